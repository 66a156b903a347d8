"""The Embedding users' temperature and no-click cosine fitted on real choices (``user.embedding_fitted: auto``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from recagent_gym.users import embedding_fit
from recagent_gym.users.config import UserConfig
from recagent_gym.users.embedding_fit import _row, fit_embedding
from recagent_gym.users.embedding_user import EmbeddingUser
from recagent_gym.users.recsim_fit import build_pages
from tests._env_fixtures import make_dataset
from tests._eval_fixtures import movielens_dir, tiny_ml, write_movielens  # noqa: F401


def _similarities(dataset):
    return EmbeddingUser(dataset, UserConfig(embedding_fitted=None))._similarities_on


def test_auto_fits_the_users_on_real_choices_and_says_so(tiny_ml, caplog):  # noqa: F811
    embedding_fit._FITTED.clear()  # auto is the default: an earlier test in this process may have fitted tiny_ml
    with caplog.at_level("INFO", logger="recagent_gym.users.embedding_fit"):
        user = EmbeddingUser(tiny_ml, UserConfig())
    direct = fit_embedding(tiny_ml, UserConfig(), _similarities(tiny_ml))
    assert user.fitted and user.config.embedding_temperature == direct["values"]["embedding_temperature"]
    assert user.config.embedding_no_click_threshold == direct["values"]["embedding_no_click_threshold"]
    assert user.config.embedding_temperature != UserConfig().embedding_temperature
    assert direct["meta"]["log_likelihood"] > direct["meta"]["null_log_likelihood"]
    assert "the Embedding users fitted on" in caplog.text and "with the plain mean" in caplog.text  # said
    explicit = EmbeddingUser(tiny_ml, UserConfig(embedding_temperature=0.3))  # a set field wins, the other is fitted
    assert explicit.config.embedding_temperature == 0.3
    assert explicit.config.embedding_no_click_threshold == user.config.embedding_no_click_threshold
    both = EmbeddingUser(tiny_ml, UserConfig(embedding_temperature=0.3, embedding_no_click_threshold=0.2))
    assert not both.fitted and (both.config.embedding_temperature, both.config.embedding_no_click_threshold) == (
        0.3,
        0.2,
    )
    hand = EmbeddingUser(tiny_ml, UserConfig(embedding_fitted=None))
    assert not hand.fitted and hand.config.embedding_temperature == UserConfig().embedding_temperature


def test_the_fit_never_reads_the_evaluated_future(tiny_ml):  # noqa: F811
    """Changing every user's last 10 items (what an evaluation holds out) leaves the fit as it was."""
    fit = fit_embedding(tiny_ml, UserConfig(), _similarities(tiny_ml))
    inter = tiny_ml.interactions.copy()
    last = inter.sort_values("timestamp").groupby("user_id").tail(10).index
    inter.loc[last, "item_id"] = (inter.loc[last, "item_id"] + 1) % tiny_ml.n_items
    changed = dataclasses.replace(tiny_ml, interactions=inter)
    # the user vectors read the whole dataset they are given, so the fit is asked for on the history it would see
    again = fit_embedding(changed, UserConfig(), _similarities(changed))
    assert again["values"] == pytest.approx(fit["values"]) and again["meta"]["users"] == fit["meta"]["users"]


def test_the_fit_keeps_the_most_responsive_temperature_and_starts_from_the_likelihood(tiny_ml):  # noqa: F811
    """The grid's first row is the likelihood's best (its values explain the real choices better than the hand-set
    ones: the mapping from the logit to the two settings is the users' own); the values kept respond to a page's
    real choice at least as much as that row and as the hand-set values, on the fit's own pages."""
    similarities = _similarities(tiny_ml)
    fit = fit_embedding(tiny_ml, UserConfig(), similarities)

    def features(history, _):
        cos = similarities(history, fit["values"]["embedding_half_life"])
        return lambda u, items: cos(u, items)[:, None]

    pages, _ = build_pages(tiny_ml, UserConfig(), holdout=10, choices=10, min_history=10, pool=50, pages=8,
                           page_size=5, seed=0, features=features)  # fmt: skip
    hand = UserConfig()
    hand_row = _row(pages, hand.embedding_temperature, hand.embedding_no_click_threshold / hand.embedding_temperature)
    likelihood, *rest = fit["meta"]["grid"]
    assert likelihood["log_likelihood"] == pytest.approx(fit["meta"]["log_likelihood"], rel=1e-3)
    assert likelihood["log_likelihood"] > hand_row["log_likelihood"]
    kept = _row(pages, fit["values"]["embedding_temperature"],
                fit["values"]["embedding_no_click_threshold"] / fit["values"]["embedding_temperature"])  # fmt: skip
    assert kept["response"] >= max(likelihood["response"], hand_row["response"]) - 1e-6
    assert all(kept["response"] >= row["response"] - embedding_fit.TOLERANCE - 1e-6 for row in rest)


def test_the_fit_keeps_the_history_half_life_the_likelihood_prefers(tiny_ml):  # noqa: F811
    """Every half-life of the grid is fitted on the same pages; the one kept has the highest likelihood (the
    temperature is then chosen for the response at it), and the users are built with it unless the config sets it."""
    fit = fit_embedding(tiny_ml, UserConfig(), _similarities(tiny_ml))
    lives = {row["half_life"]: row["log_likelihood"] for row in fit["meta"]["half_lives"]}
    assert set(lives) == set(embedding_fit.HALF_LIVES)
    kept = fit["values"]["embedding_half_life"]
    assert lives[kept] == max(lives.values()) == fit["meta"]["log_likelihood"]
    embedding_fit._FITTED.clear()
    assert EmbeddingUser(tiny_ml, UserConfig()).config.embedding_half_life == kept
    plain = EmbeddingUser(tiny_ml, UserConfig(embedding_half_life=None))  # set by the config: wins
    assert plain.config.embedding_half_life is None and plain.fitted


def test_a_short_half_life_puts_the_user_near_its_newest_items():
    dataset = make_dataset()
    user, items = 0, dataset.interactions.query("user_id == 0").sort_values("timestamp")["item_id"].to_numpy()
    config = UserConfig(embedding_fitted=None)
    mean = EmbeddingUser(dataset, config)
    recent = EmbeddingUser(dataset, config.model_copy(update={"embedding_half_life": 0.25}))
    newest, oldest = np.array([items[-1]]), np.array([items[0]])
    assert recent.similarities(user, newest)[0] > mean.similarities(user, newest)[0]
    assert recent.similarities(user, newest)[0] > recent.similarities(user, oldest)[0]
    assert recent.similarities(user, newest)[0] > 0.99  # 0.5 ** 4 for the next newest: nearly the newest alone


def test_a_dataset_too_small_to_fit_keeps_the_hand_set_values_and_says_so(tmp_path, caplog):
    from recagent_gym.data.load import load_dataset

    small = load_dataset(str(write_movielens(tmp_path / "small", n_users=6, per_user=12)))
    with caplog.at_level("WARNING", logger="recagent_gym.users.embedding_fit"):
        user = EmbeddingUser(small, UserConfig())
    assert not user.fitted and user.config.embedding_temperature == UserConfig().embedding_temperature
    assert "keep the hand-set temperature" in caplog.text
