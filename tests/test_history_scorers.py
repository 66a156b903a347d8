"""LightGCN against a property that could fail: on users with communities (a graph structure) it finds held-out
items far better than popularity and than the agreement zoo's MF, and it is deterministic at a seed."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from recagent_gym.data.schema import Dataset
from recagent_gym.recommenders.history_scorers import LightGCN, SVDScores


def _communities(seed: int = 0) -> tuple[Dataset, list[np.ndarray]]:
    """300 users and 240 items in 6 communities: a user's 6 history and 3 held-out items are drawn from a skewed
    item popularity, 20 times likelier inside the user's community. Only the co-watch graph tells the community."""
    gen = np.random.default_rng(seed)
    n_users, n_items, n_communities, history, held = 300, 240, 6, 6, 3
    user_community = gen.integers(0, n_communities, n_users)
    item_community = np.arange(n_items) % n_communities
    popularity = 1.0 / np.arange(1, n_items + 1) ** 0.8
    popularity = popularity[gen.permutation(n_items)]
    rows, future = [], []
    for u in range(n_users):
        weight = np.where(item_community == user_community[u], 20.0, 1.0) * popularity
        items = gen.choice(n_items, size=history + held, replace=False, p=weight / weight.sum())
        rows += [(u, int(i)) for i in items[:history]]
        future.append(items[history:])
    inter = pd.DataFrame(rows, columns=["user_id", "item_id"]).assign(rating=np.nan, timestamp=0)
    users, items_table = pd.DataFrame({"user_id": np.arange(n_users)}), pd.DataFrame({"item_id": np.arange(n_items)})
    return Dataset("communities", items_table, users, inter), future


def _recall(scores: Callable[[int], np.ndarray], dataset: Dataset, future: list[np.ndarray], k: int = 10) -> float:
    """Mean recall@k of the held-out items over a full ranking of the items the user has not seen."""
    inter = dataset.interactions
    out = []
    for u, truth in enumerate(future):
        s = np.asarray(scores(u), dtype=np.float64).copy()
        s[inter.loc[inter["user_id"] == u, "item_id"].to_numpy()] = -np.inf
        out.append(len(set(np.argsort(-s, kind="stable")[:k]) & set(truth)) / len(truth))
    return float(np.mean(out))


@pytest.fixture(scope="module")
def communities() -> tuple[Dataset, list[np.ndarray]]:
    return _communities()


@pytest.mark.slow
def test_lightgcn_beats_popularity_and_the_zoo_mf_on_held_out_recall(communities):
    dataset, future = communities
    popularity = dataset.item_popularity().astype(np.float64)
    mf = SVDScores(dataset)  # the agreement zoo's ``mf`` (rank 32)
    gcn = LightGCN(dataset, seed=0)  # the zoo's defaults
    all_items = np.arange(dataset.n_items)
    recall = {
        "popularity": _recall(lambda u: popularity, dataset, future),
        "mf": _recall(lambda u: mf.scores(u, all_items), dataset, future),
        "lightgcn": _recall(lambda u: gcn.scores(u, all_items), dataset, future),
    }
    # Measured: popularity 0.180, mf 0.181, lightgcn 0.338 (a rank-8 SVD reaches 0.324: the margin is over the zoo's
    # rank-32 MF, which overfits six items per user, not over every MF).
    assert recall["lightgcn"] > recall["popularity"] + 0.1, recall
    assert recall["lightgcn"] > recall["mf"] + 0.1, recall


def test_lightgcn_is_deterministic_at_a_seed(communities):
    dataset, _ = communities
    a, b = LightGCN(dataset, seed=3, epochs=5), LightGCN(dataset, seed=3, epochs=5)
    np.testing.assert_array_equal(a.user_factors, b.user_factors)
    np.testing.assert_array_equal(a.item_factors, b.item_factors)
    other = LightGCN(dataset, seed=4, epochs=5)
    assert not np.allclose(a.item_factors, other.item_factors)
