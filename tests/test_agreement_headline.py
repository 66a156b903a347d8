"""The agreement's headline measure (sign agreement on the pairs the real users separate, its split-half ceiling,
the paired sanity rows, the response to real items), the global time split and the zoo's added history models."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pandas as pd
import pytest

from recagent_gym.data.splits import global_time_split, leave_last_out
from recagent_gym.recommenders.history_zoo import HISTORY_MODELS, Popularity
from recagent_gym.runs.evaluation.agreement.evaluate import run_agreement
from recagent_gym.runs.evaluation.agreement.pairs import (
    paired,
    real_item_response,
    separated_pairs,
    sign_agreement,
    sign_ceiling,
)
from recagent_gym.runs.evaluation.agreement.report import Report
from tests._eval_fixtures import movielens_dir, tiny_ml  # noqa: F401
from tests.test_eval_agreement import _config, _resources


def _users(means: list[float], n: int = 200, noise: float = 0.3, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"r{k}": m + noise * rng.standard_normal(n) for k, m in enumerate(means)}


def test_only_the_pairs_the_real_users_separate_count():
    real = _users([0.0, 0.01, 1.0, 2.0])  # r0 and r1 within noise: not separated
    names = list(real)
    pairs = {(i, j) for i, j, _ in separated_pairs(real, names)}
    assert (0, 1) not in pairs and {(0, 2), (0, 3), (1, 2), (1, 3), (2, 3)} <= pairs
    same = sign_agreement(real, {r: v * 2 + 5 for r, v in real.items()}, names)
    assert same.share == 1.0 and same.pairs == 5 and same.low == 1.0
    reversed_ = sign_agreement(real, {r: -v for r, v in real.items()}, names)
    assert reversed_.share == 0.0
    # a user model that swaps only the pair the real users do not separate loses nothing
    swapped = {**real, "r0": real["r1"], "r1": real["r0"]}
    assert sign_agreement(real, swapped, names).share == 1.0
    flat = sign_agreement(real, {r: np.zeros(200) for r in names}, names)
    assert flat.share == 0.5  # ties count half


def test_the_split_half_ceiling_counts_only_separated_pairs_and_is_one_for_a_clear_ranking():
    clear = sign_ceiling(_users([0.0, 1.0, 2.0, 3.0], noise=0.3), ["r0", "r1", "r2", "r3"], n_splits=200)
    noisy = _users([0.0, 0.05, 0.1, 0.3], noise=1.0, n=400)
    vague = sign_ceiling(noisy, list(noisy), n_splits=200)
    assert clear.share == 1.0 == clear.low and clear.pairs == 6
    assert 1 <= vague.pairs < 6 and vague.n_users == 200  # the close pairs are not separated; halves of 200


def test_paired_differences_and_the_response_to_real_items():
    d = paired(np.array([1.0, 1.0, np.nan]), np.array([0.0, 0.5, 0.0]))
    assert d.mean == pytest.approx(0.75) and d.n == 2
    dose = np.array([[0, 1, 1.0], [0, 0, 0.0], [1, 0, 0.5], [1, 0, 0.5]])  # user 1 never saw a real item
    with_item, without = real_item_response(dose, 2)
    assert with_item[0] == 1.0 and without[0] == 0.0 and np.isnan(with_item[1]) and without[1] == 0.5


def test_the_global_split_cuts_everyone_at_one_time(tiny_ml):  # noqa: F811
    split = global_time_split(tiny_ml, 3, quantile=0.7, min_train=5)
    inter = tiny_ml.interactions
    cut = np.quantile(inter["timestamp"].to_numpy(np.float64), 0.7)
    assert split.train.interactions["timestamp"].max() < cut  # no history row at or after the cut
    assert split.held_out
    for user, items in split.held_out.items():
        mine = inter[(inter["user_id"] == user) & (inter["timestamp"] >= cut)].sort_values("timestamp", kind="stable")
        assert list(items) == mine["item_id"].tolist()[:3]  # the first three after the cut, oldest first
        assert (split.train.interactions["user_id"] == user).sum() >= 5
    with pytest.raises(ValueError):
        global_time_split(tiny_ml, 3, quantile=1.0)


@pytest.fixture(scope="module")
def genre_fans():
    """160 users in 4 communities who watch 30 of 300 items each, by the items' popularity and 20 times likelier
    inside their community, in a random order: only the co-watching tells the community."""
    from tests._env_fixtures import make_dataset

    dataset = make_dataset(n_users=160, n_items=300, per_user=4, seed=3)
    rng = np.random.default_rng(0)
    community, rows = rng.integers(0, 4, 160), []
    popularity = rng.pareto(1.5, 300) + 0.2
    for user in range(160):
        weight = np.where(np.arange(300) % 4 == community[user], 20.0, 1.0) * popularity
        items = rng.choice(300, size=30, replace=False, p=weight / weight.sum())
        rows += [(user, int(i), 4.0, 1_000_000 + int(t)) for i, t in zip(items, rng.permutation(30) * 60, strict=True)]
    inter = pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])
    return dataclasses.replace(dataset, interactions=inter)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["popularity", *HISTORY_MODELS])
def test_every_history_model_ranks_held_out_items_above_chance_and_is_deterministic(genre_fans, name):
    split = leave_last_out(genre_fans, 4, min_train=10)
    build = (lambda d, seed: Popularity(d)) if name == "popularity" else HISTORY_MODELS[name]
    first, second = build(split.train, 0), build(split.train, 0)
    seen = split.train.interactions.groupby("user_id")["item_id"].apply(set)
    ranks = []
    for user, future in split.held_out.items():
        unseen = np.array([i for i in range(genre_fans.n_items) if i not in seen[user]])
        scores = first.scores(user, unseen)
        assert np.array_equal(scores, second.scores(user, unseen))  # same seed, same scores
        order = unseen[np.argsort(-scores, kind="stable")]
        ranks += [float(np.flatnonzero(order == i)[0]) / len(order) for i in future]
    if name != "mf-128":  # rank 128 of a 160 x 300 matrix nearly reproduces it: no room to generalise here
        assert np.mean(ranks) < 0.4  # the held-out items rank well above the middle on average (chance: 0.5)


@pytest.mark.slow
def test_the_report_leads_with_the_headline_and_writes_its_csv(tiny_ml, tmp_path):  # noqa: F811
    config = _config(agreement_user_models="[recsim]",
                     agreement_recommenders="[random,popularity,itemknn,ease,mf,oracle,anti-oracle]")  # fmt: skip
    run = run_agreement(config, tiny_ml, out=tmp_path, resources=_resources(tiny_ml, config), progress=False)
    paths = Report(run, n_boot=100).write(tmp_path)
    text = paths["markdown"].read_text()
    assert text.index("## Headline: agreement over the 5 history recommenders") < text.index("## Negatives:")
    with paths["headline_csv"].open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["user_model"] for r in rows] == ["real, split halves"] * 2 + ["recsim"] * 2
    for row in rows[2:]:
        assert 0.0 <= float(row["pairs_agreeing"] or 0.5) <= 1.0
        assert row["oracle_minus_random"] != "" and row["random_minus_anti_oracle"] != ""
    arm = run.arm("uniform", "recsim", "random")
    assert np.all(arm.per_page <= arm.returns + 1e-12)  # a page's reward is part of the session's
