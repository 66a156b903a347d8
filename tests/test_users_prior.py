"""The behavioural prior: features, weights files, and its hook in the LLM agent's page decision."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.users.agent.prior import (
    FEATURES,
    BehaviouralPrior,
    PriorWeights,
    combine,
    combine_parts,
    load_weights,
)
from recagent_gym.users.protocol import Action, Context, Page
from tests._agent_fixtures import make_model, tiny_dataset


def _with_crowd(dataset: Dataset) -> Dataset:
    """Users 0-5 of the tiny set plus a crowd history: item 29 is by far the most watched, recently and well rated."""
    rows = [(u, 29, 5.0, 20_000 + u) for u in range(6)] + [(u, 24, 1.0, 100 + u) for u in range(3, 6)]
    rows += [(2, 12, 3.0, 3000), (2, 13, 3.0, 3001), (2, 14, 3.0, 3002)]  # user 2 also watches three niche films
    extra = pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])
    inter = pd.concat([dataset.interactions, extra], ignore_index=True)
    inter["timestamp"] += 1_600_000_000  # September 2020: after every release year of the tiny set
    return replace(dataset, interactions=inter.drop_duplicates(["user_id", "item_id"]).reset_index(drop=True))


def write_weights(path: Path, both: dict[str, float], prior_only: dict[str, float] | None = None) -> Path:
    path.write_text(json.dumps({"both": both, "prior_only": prior_only or both, "users_raw": ["5"],
                                "window_days": 30.0}))  # fmt: skip
    return path


def test_features_popularity_trend_recency_and_rating_scale() -> None:
    dataset = _with_crowd(tiny_dataset())
    prior = BehaviouralPrior(dataset, window_days=1.0)
    x = prior.features(0, [29, 24, 10])
    assert x.shape == (3, len(FEATURES))
    pop, _, trend, recency, scale, _ = x.T
    assert pop[0] > pop[1] > pop[2]  # 6 interactions > 3 > none
    assert trend[0] > trend[2]  # 29 is watched within a day of user 0's last interaction
    assert recency[0] > recency[2]  # released 2019 vs 2000
    assert scale[0] > 0 > scale[1]  # rated 5 by everyone vs 1: above and below user 0's own mean (4.0 + 5.0)
    assert np.allclose(prior.popularity.mean(), 0.0)
    with pytest.raises(DataError, match="history"):
        BehaviouralPrior(replace(dataset, interactions=dataset.interactions[dataset.interactions.user_id != 2]),
                         window_days=1.0).features(2, [0])  # fmt: skip


def test_affinity_favours_what_people_with_the_same_taste_watched() -> None:
    """Two taste groups: users 0-2 watch items 0-3, users 3-5 items 10-13; user 0 also skipped item 3 so far. Item 3
    (watched by user 0's group) must have a higher affinity for user 0 than item 13 (the other group's), and the
    reverse for user 3."""
    base = tiny_dataset()
    rows = [(u, i, 4.0, 1_600_000_000 + 10 * u + i) for u in range(3) for i in range(4) if (u, i) != (0, 3)]
    rows += [(u, i, 4.0, 1_600_000_000 + 10 * u + i) for u in range(3, 6) for i in range(10, 14)]
    inter = pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])
    prior = BehaviouralPrior(replace(base, interactions=inter))
    column = FEATURES.index("affinity")
    own, other = prior.features(0, [3, 13])[:, column]
    assert own > other
    own, other = prior.features(3, [13, 3])[:, column]
    assert own > other


def test_mainstream_users_weigh_popularity_more() -> None:
    dataset = _with_crowd(tiny_dataset())
    prior = BehaviouralPrior(dataset)
    mainstream, niche = (prior.features(u, [29])[0] for u in (0, 2))
    assert mainstream[0] == niche[0] > 0  # same item, same popularity
    assert mainstream[1] > 0 > niche[1]  # weighted up for the mainstream user, down for the niche one


def test_weights_file_round_trip_and_errors(tmp_path: Path) -> None:
    path = write_weights(tmp_path / "prior.json", {"llm": 0.5, "popularity": 2.0})
    weights = load_weights(path)
    assert weights.llm == 0.5 and weights.features["popularity"] == 2.0 and weights.features["trend"] == 0.0
    assert weights.meta["window_days"] == 30.0
    scores = combine(np.array([1.0, 0.0]), np.array([[1.0, 0, 0, 0, 0, 0], [0.0, 0, 0, 0, 0, 0]]), weights)
    assert scores.tolist() == [2.5, 0.0]
    (tmp_path / "bad.json").write_text(json.dumps({"both": {"popularity": 1.0, "typo": 3.0}}))
    with pytest.raises(DataError, match="typo"):
        load_weights(tmp_path / "bad.json")
    (tmp_path / "prior_only.json").write_text(json.dumps({"prior_only": {"popularity": 1.0}}))
    with pytest.raises(DataError, match="no 'both' weights"):  # calibrated with --no-llm
        load_weights(tmp_path / "prior_only.json")
    with pytest.raises(DataError, match=r"missing\.json"):
        load_weights(tmp_path / "missing.json")
    assert PriorWeights(1.0, {}).vector().tolist() == [0.0] * len(FEATURES)


def _watched_items(model, user: int, pages: list[Page]) -> list[int]:
    out = []
    for k, page in enumerate(pages):
        rng = np.random.default_rng([user, k])
        model.start_session(user, rng)
        response = model.respond(page, Context(user_id=user, step=0), rng)
        if response.action == Action.WATCH:
            out.append(int(response.item))
        model.end_sessions([user])
    return out


def test_page_decision_follows_the_prior_only_when_weights_are_given(tmp_path: Path) -> None:
    """Without a prior the user picks by taste (never item 24); with a popularity-only prior (no LLM weight) it
    always picks the most watched item of the page, 24."""
    pages = [Page(items=(3, 4, 24, 27, 28), index=k) for k in range(6)]
    decide = {"watch_threshold": -20.0, "watch_temperature": 0.05}
    plain = make_model(overrides={"user": decide})
    plain.dataset = _with_crowd(plain.dataset)
    chosen_plain = _watched_items(plain, 0, pages)
    path = write_weights(tmp_path / "prior.json", {"llm": 0.0, "popularity": 5.0})
    biased = make_model(overrides={"user": {**decide, "prior_weights": str(path)}})
    biased.dataset = _with_crowd(biased.dataset)
    chosen = _watched_items(biased, 0, pages)
    assert chosen == [24] * len(pages)
    assert chosen_plain and 24 not in chosen_plain


def write_parts(path: Path, both: dict[str, float], parts: dict[str, float]) -> Path:
    """A calibrate file with the ``parts`` fit (the agent's score taken apart) beside ``both``."""
    path.write_text(json.dumps({"both": both, "prior_only": both, "users_raw": ["5"], "window_days": 30.0,
                                "parts_fits": {"parts": {"weights": parts, "log_likelihood": -1.0, "accuracy": 0.5},
                                               "llm_score_only": {"weights": {"llm_score": 1.0}}}}))  # fmt: skip
    return path


def test_parts_fit_weights_each_part_of_the_agent_score(tmp_path: Path) -> None:
    path = write_parts(tmp_path / "prior.json", {"llm": 1.0}, {"llm_score": 3.0, "embedding": 0.5, "trend": 2.0})
    weights = load_weights(path, which="parts")
    assert weights.parts == (3.0, 0.5) and weights.features["trend"] == 2.0 and weights.meta["fit"] == "parts"
    assert weights.to_dict()["llm_score"] == 3.0 and "llm" not in weights.to_dict()
    features = np.zeros((2, len(FEATURES)))
    features[:, 2] = [1.0, 0.0]
    llm, embedding = np.array([1.0, np.nan]), np.array([2.0, 4.0])  # an item the LLM did not score counts 0
    assert combine_parts(llm, embedding, features, weights).tolist() == [3.0 + 1.0 + 2.0, 2.0]
    with pytest.raises(ValueError, match="parts"):
        combine_parts(llm, embedding, features, load_weights(path))
    with pytest.raises(DataError, match="no 'parts' weights"):  # an older file: both only
        load_weights(write_weights(tmp_path / "old.json", {"llm": 1.0}), which="parts")
    write_parts(tmp_path / "bad.json", {"llm": 1.0}, {"llm": 1.0, "embedding": 0.5})  # 'llm' is the both fit's name
    with pytest.raises(DataError, match=r"unknown weights \['llm'\] in 'parts_fits.parts.weights'"):
        load_weights(tmp_path / "bad.json", which="parts")


def test_prior_fit_parts_is_what_the_page_decision_uses(tmp_path: Path) -> None:
    """Same file, two fits that disagree: ``both`` pushes the crowd's item 24, ``parts`` pushes it away; the page
    decision follows the fit ``user.prior_fit`` names."""
    pages = [Page(items=(3, 4, 24, 27, 28), index=k) for k in range(6)]
    decide = {"watch_threshold": -20.0, "watch_temperature": 0.05}
    path = write_parts(tmp_path / "prior.json", {"llm": 0.0, "popularity": 5.0},
                       {"llm_score": 0.0, "embedding": 0.0, "popularity": -5.0})  # fmt: skip
    chosen = {}
    for fit in ("both", "parts"):
        model = make_model(overrides={"user": {**decide, "prior_weights": str(path), "prior_fit": fit}})
        model.dataset = _with_crowd(model.dataset)
        chosen[fit] = _watched_items(model, 0, pages)
    assert chosen["both"] == [24] * len(pages)
    assert chosen["parts"] and 24 not in chosen["parts"]


def test_prior_fit_parts_needs_a_file_with_that_fit(tmp_path: Path) -> None:
    from recagent_gym.runs.config import ConfigError, load_config

    old = write_weights(tmp_path / "old.json", {"llm": 1.0})
    with pytest.raises(ConfigError, match=r"user.prior_fit: .*old.json has no 'parts' fit"):
        load_config(None, [f"user.prior_weights={old}", "user.prior_fit=parts"])
    new = write_parts(tmp_path / "new.json", {"llm": 1.0}, {"llm_score": 2.0, "embedding": 1.0})
    assert load_config(None, [f"user.prior_weights={new}", "user.prior_fit=parts"]).user.prior_fit == "parts"


def test_llm_prior_row_with_parts_reuses_the_llm_rows_call() -> None:
    """The evaluations' ``llm+prior`` row with the parts fit: the formula on the agent's two parts, and one LLM call
    per (user, items) shared with the ``llm`` row through ``Memo``."""
    from recagent_gym.runs.evaluation.prior_ablation import Memo, PriorCombined

    class Parts:
        calls = 0

        def score_components(self, user, items, rng):
            Parts.calls += 1
            return np.array([1.0, -1.0]), np.array([0.5, 0.5])

        def combine(self, llm, embedding):
            return llm + embedding

        def score_items(self, user, items, rng):
            return self.combine(*self.score_components(user, items, rng))

    dataset = _with_crowd(tiny_dataset())
    prior = BehaviouralPrior(dataset)
    weights = PriorWeights(0.0, {"popularity": 1.0}, parts=(2.0, 4.0))
    memo = Memo(Parts())
    row = PriorCombined(memo, prior, weights)
    rng = np.random.default_rng(0)
    got = row.score_items(0, [29, 10], rng)
    pop = prior.features(0, [29, 10])[:, 0]
    assert np.allclose(got, [2.0 + 2.0 + pop[0], -2.0 + 2.0 + pop[1]])
    assert memo.score_items(0, [29, 10], rng).tolist() == [1.5, -0.5] and Parts.calls == 1
