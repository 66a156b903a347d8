"""The history recommenders by name: what ``evaluate agreement`` ranks, and what ``benchmarks/bench_history_recall.py``
checks is adequately trained (full-ranking recall on the same split).

Each builder takes the history (a training split) and a seed and returns an object with ``scores(user, items)``.
Settings were compared on the bundled data's inner validation split (``bench_history_recall.py --validation``: each
user's last 10 history items, the evaluated futures never read): LightGCN's softmax loss, 10 epochs, reaches the
plain MF's recall there (0.127 against 0.128 over 300 users) where BPR at 30-60 epochs and learning rates 0.005-0.05
stayed at 0.10-0.11.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.recommenders import history_models as hm
from recagent_gym.recommenders import history_scorers as hs


class Popularity:
    """Interactions per item in the history (what the env's popularity column holds)."""

    def __init__(self, dataset: Dataset) -> None:
        self._counts = np.bincount(dataset.interactions["item_id"].to_numpy(np.int64), minlength=dataset.n_items)

    def scores(self, user: int, items: np.ndarray) -> np.ndarray:
        return self._counts[np.asarray(items, np.int64)].astype(np.float64)


HISTORY_MODELS: dict[str, Callable[[Dataset, int], Any]] = {
    "recent-popularity": lambda d, seed: hs.RecentPopularity(d, days=365.0),
    "itemknn": lambda d, seed: hs.ItemKNN(d),
    "userknn": lambda d, seed: hm.UserKNN(d, k=50),
    "mf": lambda d, seed: hs.SVDScores(d, dim=32),
    "mf-8": lambda d, seed: hs.SVDScores(d, dim=8),
    "mf-128": lambda d, seed: hs.SVDScores(d, dim=128),
    "bpr": lambda d, seed: hs.LightGCN(d, layers=0, loss="bpr", seed=seed),
    "lightgcn": lambda d, seed: hs.LightGCN(d, seed=seed),
    "ease": lambda d, seed: hm.EASE(d, l2=200.0),
    "gru4rec": lambda d, seed: hm.GRU4Rec(d, seed=seed),
}
"""Scored history recommenders (``popularity``, ``random`` and ``quality`` read the env's candidate columns)."""
