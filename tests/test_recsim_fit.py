"""RecSim-style users fitted on real choices: features, the fit, the fitted file, the command."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from recagent_gym.runs.cli import main
from recagent_gym.settings_section import ConfigError
from recagent_gym.users.config import UserConfig
from recagent_gym.users.recsim import RecSimUser
from recagent_gym.users.recsim_features import (
    BUNDLED_FIT,
    FittedWeights,
    apply_fit,
    collaborative_item_latents,
    item_popularity,
)
from recagent_gym.users.recsim_fit import Pages, build_pages, fit_pages, fit_recsim
from tests._eval_fixtures import movielens_dir, tiny_ml, write_movielens  # noqa: F401

FEATURES = lambda history, user: RecSimUser(history, user).features  # noqa: E731
SMALL = {"holdout": 4, "choices": 4, "min_history": 4, "pool": 20, "pages": 4}


def test_popularity_spans_minus_one_to_one_in_watch_order(tiny_ml):  # noqa: F811
    pop = item_popularity(tiny_ml)
    counts = np.bincount(tiny_ml.interactions["item_id"], minlength=tiny_ml.n_items)
    assert pop.max() == pytest.approx(1.0) and pop.min() >= -1.0
    assert np.all(np.diff(pop[np.argsort(counts, kind="stable")]) >= 0)


def test_collaborative_latents_are_unit_deterministic_and_follow_co_watching(tiny_ml):  # noqa: F811
    a = collaborative_item_latents(tiny_ml, 4, seed=0)
    assert np.array_equal(a, collaborative_item_latents(tiny_ml, 4, seed=0))
    watched = np.unique(tiny_ml.interactions["item_id"])
    assert np.allclose(np.linalg.norm(a[watched], axis=1), 1.0)
    # a user's history centroid is closer to its own items than to the items it never watched
    user = RecSimUser(tiny_ml, UserConfig(recsim_item_latents="collaborative", recsim_latent_from_history=1.0,
                                          recsim_hidden_dims=4))  # fmt: skip
    seen = tiny_ml.interactions.loc[tiny_ml.interactions["user_id"] == 0, "item_id"].unique()
    unseen = np.setdiff1d(watched, seen)
    affinity = user.features(0, np.arange(tiny_ml.n_items))[:, 1]
    assert affinity[seen].mean() > affinity[unseen].mean() + 0.1


def test_the_fit_recovers_a_popularity_driven_choice():
    """Real choices simulated from a known logit on popularity: the fit finds a positive popularity weight near the
    truth and beats the null model."""
    rng = np.random.default_rng(0)
    n, k = 4000, 5
    x = rng.uniform(-1, 1, size=(n, k, 4))
    beta, m = np.array([0.0, 0.0, 0.0, 2.0]), 3.0
    weights = np.exp(x @ beta)
    p_none = m / (weights.sum(axis=1) + m)
    real = np.zeros((n, k), dtype=bool)
    for row in range(n):
        draw = rng.random()
        if draw >= p_none[row]:
            real[row, rng.choice(k, p=weights[row] / weights[row].sum())] = True
    fitted, mass, ll, null = fit_pages(Pages(x, real), l2=0.0)
    assert fitted[3] == pytest.approx(2.0, abs=0.3) and np.all(np.abs(fitted[:3]) < 0.3)
    assert mass == pytest.approx(3.0, rel=0.25) and ll > null


def test_fit_on_a_dataset_never_reads_the_holdout(movielens_dir, tmp_path):  # noqa: F811
    from recagent_gym.data.load import load_dataset

    dataset = load_dataset(str(movielens_dir))
    pages, users = build_pages(
        dataset, UserConfig(recsim_hidden_dims=4), page_size=5, seed=0, features=FEATURES, **SMALL
    )
    # change every user's last 4 items (the holdout): the pages the fit sees are the same
    inter = dataset.interactions.copy()
    last = inter.sort_values("timestamp").groupby("user_id").tail(4).index
    inter.loc[last, "item_id"] = (inter.loc[last, "item_id"] + 1) % dataset.n_items
    changed = dataclasses.replace(dataset, interactions=inter)
    again, users_again = build_pages(
        changed, UserConfig(recsim_hidden_dims=4), page_size=5, seed=0, features=FEATURES, **SMALL
    )
    assert users == users_again and np.array_equal(pages.real, again.real) and np.allclose(pages.x, again.x)
    fit = fit_recsim(dataset, UserConfig(recsim_hidden_dims=4), seed=0, features=FEATURES, **SMALL)
    assert fit.meta["log_likelihood"] > fit.meta["null_log_likelihood"]
    assert fit.values["recsim_item_latents"] == "collaborative" and fit.meta["users"] == len(users)


def test_apply_fit_gives_defaults_and_explicit_settings_win(tmp_path):
    path = FittedWeights({"recsim_popularity_weight": 0.7, "recsim_no_click_mass": 9.0,
                          "recsim_interest_noise": 0.0}).write(tmp_path / "fit.json")  # fmt: skip
    applied = apply_fit(UserConfig(recsim_fitted=str(path), recsim_no_click_mass=30.0))
    assert applied.recsim_popularity_weight == 0.7 and applied.recsim_interest_noise == 0.0
    assert applied.recsim_no_click_mass == 30.0  # set explicitly: the config wins
    assert apply_fit(UserConfig(recsim_fitted=None)).recsim_popularity_weight == 0.0  # no fit: unchanged
    assert UserConfig().recsim_fitted == "auto"  # the default: fitted users, never hand-set by default


@pytest.mark.parametrize(
    "document",
    ['{"values": {"recsim_popularity_weight": NaN}}', '{"values": {"not_a_field": 1}}', "[1, 2]", "{not json",
     '{"values": {"recsim_popularity_weight": 99}}'],
)  # fmt: skip
def test_a_bad_fit_file_is_a_configuration_error(tmp_path, document):
    path = tmp_path / "fit.json"
    path.write_text(document, encoding="utf-8")
    with pytest.raises(ConfigError, match="recsim_fitted"):
        apply_fit(UserConfig(recsim_fitted=str(path)))
    with pytest.raises(ConfigError, match="recsim_fitted"):
        apply_fit(UserConfig(recsim_fitted=str(tmp_path / "missing.json")))


def test_the_shipped_bundled_fit_loads_with_a_likelihood_gain():
    fit = FittedWeights.load("bundled")
    assert BUNDLED_FIT.is_file() and fit.meta["dataset"].startswith("ml-latest-small")
    assert fit.meta["log_likelihood"] > fit.meta["null_log_likelihood"]
    assert all(math.isfinite(v) for v in fit.values.values() if isinstance(v, float))


def test_fit_recsim_command_writes_a_file_the_users_read(tmp_path):
    folder = write_movielens(tmp_path / "ml", n_users=20, per_user=40)
    out = tmp_path / "fit"
    code = main(["users", "fit-recsim", "--dataset", str(folder), "--holdout", "4", "--choices", "4", "--pages", "2",
                 "--out", str(out), "--set", "evaluation.agreement_min_history=4",
                 "--set", "evaluation.agreement_pool=20", "--set", "user.recsim_hidden_dims=4"])  # fmt: skip
    assert code == 0
    document = json.loads((out / "recsim_fit.json").read_text())
    assert document["meta"]["holdout"] == 4 and (out / "fit.md").read_text().startswith("# RecSim-style users")
    from recagent_gym.data.load import load_dataset

    dataset = load_dataset(str(folder))
    fitted = RecSimUser(dataset, UserConfig(recsim_fitted=str(out / "recsim_fit.json"), recsim_hidden_dims=4))
    assert fitted.config.recsim_popularity_weight == document["values"]["recsim_popularity_weight"]
    assert main(["users", "fit-recsim", "--dataset", str(folder), "--choices", "0", "--out", str(out)]) == 2


@pytest.mark.slow
def test_a_fit_of_another_dataset_is_refused_and_auto_fits_a_new_dataset_first(tiny_ml, caplog):  # noqa: F811
    with pytest.raises(ConfigError, match="fitted on"):
        RecSimUser(tiny_ml, UserConfig(recsim_fitted="bundled", recsim_hidden_dims=4))
    from recagent_gym.users import recsim_fit

    recsim_fit._FITTED.clear()  # auto is the default: an earlier test in this process may have fitted tiny_ml
    with caplog.at_level("INFO", logger="recagent_gym.users.recsim_fit"):
        auto = RecSimUser(tiny_ml, UserConfig(recsim_fitted="auto", recsim_hidden_dims=4))
    assert auto.fitted_from is not None and auto.fitted_from.startswith("auto: fitted on")
    direct = fit_recsim(tiny_ml, UserConfig(recsim_hidden_dims=4), features=FEATURES)
    assert auto.config.recsim_popularity_weight == direct.values["recsim_popularity_weight"] != 0.0
    assert "fitted the RecSim-style users on its real choices" in caplog.text  # said, not silent
    again = RecSimUser(tiny_ml, UserConfig(recsim_fitted="auto", recsim_hidden_dims=4))  # the process's fit reused
    assert again.config.recsim_hidden_weight == auto.config.recsim_hidden_weight


def test_auto_on_a_dataset_too_small_to_fit_keeps_hand_set_weights_and_says_so(tmp_path, caplog):
    from recagent_gym.data.load import load_dataset

    small = load_dataset(str(write_movielens(tmp_path / "small", n_users=6, per_user=12)))
    with caplog.at_level("WARNING", logger="recagent_gym.users.recsim_features"):
        user = RecSimUser(small, UserConfig(recsim_fitted="auto", recsim_hidden_dims=4))
    assert user.fitted_from is None and user.config.recsim_popularity_weight == 0.0
    assert "keep their hand-set weights" in caplog.text


@pytest.mark.slow
def test_auto_fits_the_bundled_dataset():
    from recagent_gym.data.load import load_dataset

    user = RecSimUser(load_dataset("bundled"), UserConfig(recsim_fitted="auto"))
    assert user.fitted_from == "auto"
    assert user.config.recsim_popularity_weight == FittedWeights.load("bundled").values["recsim_popularity_weight"]


def test_a_bad_fit_file_stops_a_command_before_it_creates_anything(tmp_path, capsys):
    bad = tmp_path / "fit.json"
    bad.write_text('{"values": {"recsim_popularity_weight": 99}}', encoding="utf-8")
    for where in (str(bad), str(tmp_path / "missing.json")):
        out = tmp_path / "out"
        code = main(["evaluate", "agreement", "--user-model", "recsim", "--out", str(out), "--no-progress",
                     "--set", f"user.recsim_fitted={where}"])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2 and "recsim_fitted" in err and len(err.strip().splitlines()) == 1
        assert not out.exists()
