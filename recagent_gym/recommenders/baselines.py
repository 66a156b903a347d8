"""Non-learning recommenders answering SB3's ``predict`` on the env's ``Dict`` observation (single or batched)."""

from __future__ import annotations

from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset


def observation_batch(observation: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(user_ids (n,), histories (n, H), batched)`` from a single or batched ``Dict`` observation."""
    users = np.asarray(observation["user_id"], dtype=np.int64)
    history = np.asarray(observation["history"], dtype=np.int64)
    batched = history.ndim == 2
    return users.reshape(-1), history.reshape(-1, history.shape[-1]), batched


def top_k_excluding(scores: np.ndarray, exclude: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best ``scores`` not in ``exclude`` (ids < 0 in ``exclude`` are padding)."""
    scores = scores.astype(np.float64, copy=True)
    scores[exclude[exclude >= 0]] = -np.inf
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.argsort(-scores[top], kind="stable")]


class RandomRecommender:
    """A page of distinct items drawn uniformly (from its own seeded generator)."""

    def __init__(self, n_items: int, page_size: int, seed: int = 0) -> None:
        if page_size > n_items:
            raise ValueError(f"page_size {page_size} exceeds the catalogue ({n_items} items)")
        self.n_items, self.page_size = n_items, page_size
        self.rng = np.random.default_rng(seed)

    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = False
    ) -> tuple[np.ndarray, None]:
        _, history, batched = observation_batch(observation)
        pages = np.stack([self.rng.choice(self.n_items, self.page_size, replace=False) for _ in range(len(history))])
        return (pages if batched else pages[0]), None

    def get_state(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]


class PopularityRecommender:
    """The most interacted items of the dataset the user has not recently watched (same page for everyone)."""

    def __init__(self, dataset: Dataset, page_size: int) -> None:
        self.page_size = page_size
        self.scores = dataset.item_popularity().astype(np.float64)

    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = False
    ) -> tuple[np.ndarray, None]:
        _, history, batched = observation_batch(observation)
        pages = np.stack([top_k_excluding(self.scores, h, self.page_size) for h in history])
        return (pages if batched else pages[0]), None

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        return None
