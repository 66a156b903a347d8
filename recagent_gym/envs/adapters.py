"""Action and observation adapters: pure mappings shared by the single-env wrappers and the vector env.

A page adapter turns a policy's action into a page given the items the user already watched; an observation adapter
turns the env's ``Dict`` observation into what a policy network eats. Keeping them as plain objects lets the vector
env apply them to a whole batch without gymnasium's per-env wrapper chains.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from gymnasium import spaces

from recagent_gym.session.tables import SessionTables

TRAINING_KEYS: tuple[str, ...] = ("user_features", "history_genres", "page", "last_response", "last_rating")
"""Observation keys a policy network sees by default (raw ids are left out: they are not features)."""


class PageAdapter(Protocol):
    space: spaces.Space

    def to_page(self, action: np.ndarray, seen: np.ndarray) -> np.ndarray:
        """The page (``page_size`` item ids) for ``action``; ``seen`` marks items the user already watched."""
        ...


def _top_k_unseen(scores: np.ndarray, seen: np.ndarray, k: int) -> np.ndarray:
    scores = np.where(seen, -np.inf, scores)
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.argsort(-scores[top], kind="stable")]


class ScorePageAdapter:
    """A continuous action ``a`` in ``[-1, 1]^d`` scores every item as ``features @ a``; the page is the top-k unseen.

    ``features`` defaults to :meth:`SessionTables.item_features` (genre vector, quality, popularity: d = n_genres + 2),
    a query vector that stays small however large the catalogue. Pass the identity (``np.eye(n_items)``) for one
    score per item.
    """

    def __init__(self, tables: SessionTables, page_size: int, features: np.ndarray | None = None) -> None:
        self.features = tables.item_features() if features is None else np.asarray(features, np.float32)
        if self.features.shape[0] != tables.n_items:
            raise ValueError(f"features has {self.features.shape[0]} rows for {tables.n_items} items")
        self.page_size = page_size
        self.space = spaces.Box(-1.0, 1.0, (self.features.shape[1],), np.float32)

    def to_page(self, action: np.ndarray, seen: np.ndarray) -> np.ndarray:
        weights = np.clip(np.asarray(action, dtype=np.float32).reshape(-1), -1.0, 1.0)
        return _top_k_unseen(self.features @ weights, seen, self.page_size)


class GenrePageAdapter:
    """A discrete action picks a genre; the page is that genre's best unseen items (by quality, then popularity).

    This makes the env usable by DQN; a page that runs out of unseen items of the genre is filled by the env's
    duplicate rule.
    """

    def __init__(self, tables: SessionTables, page_size: int) -> None:
        self.page_size = page_size
        self.space: spaces.Discrete = spaces.Discrete(tables.n_genres)
        rank = tables.quality + 0.5 * tables.popularity
        self._by_genre = [
            np.flatnonzero(tables.topics[:, g] > 0)[np.argsort(-rank[tables.topics[:, g] > 0], kind="stable")]
            for g in range(tables.n_genres)
        ]
        self._fallback = tables.popularity_order

    def to_page(self, action: np.ndarray, seen: np.ndarray) -> np.ndarray:
        candidates = self._by_genre[int(np.asarray(action).reshape(-1)[0])]
        unseen = candidates[~seen[candidates]][: self.page_size]
        if len(unseen) < self.page_size:
            extra = self._fallback[~seen[self._fallback]]
            extra = extra[~np.isin(extra, unseen)][: self.page_size - len(unseen)]
            unseen = np.concatenate([unseen, extra])
        if len(unseen) < self.page_size:  # catalogue spent: the env's duplicate rule takes over
            unseen = np.concatenate([unseen, self._fallback[: self.page_size - len(unseen)]])
        return unseen.astype(np.int64)


class ObsFlattener:
    """Concatenates chosen keys of the ``Dict`` observation into one float32 vector (bounds preserved)."""

    def __init__(self, space: spaces.Dict, keys: Sequence[str] = TRAINING_KEYS) -> None:
        missing = [k for k in keys if k not in space.spaces]
        if missing:
            raise KeyError(f"observation has no keys {missing}; it has {list(space.spaces)}")
        self.keys = tuple(keys)
        boxes = [space.spaces[k] for k in self.keys]
        self.space = spaces.Box(
            np.concatenate([b.low.reshape(-1) for b in boxes]).astype(np.float32),
            np.concatenate([b.high.reshape(-1) for b in boxes]).astype(np.float32),
            dtype=np.float32,
        )

    def flatten(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(obs[k], dtype=np.float32).reshape(-1) for k in self.keys])

    def flatten_batch(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        n = len(next(iter(obs.values())))
        return np.concatenate([np.asarray(obs[k], dtype=np.float32).reshape(n, -1) for k in self.keys], axis=1)
