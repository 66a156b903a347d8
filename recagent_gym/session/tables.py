"""Arrays precomputed once per dataset and shared by every open session (env, vector env, simulator): no pandas
in a page step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.users.recsim import item_quality, item_topics, user_genre_shares


class Opening(NamedTuple):
    """What every session of one user starts from (read-only; a session copies ``seen`` and ``window``)."""

    seen: bytes
    """``n_items`` flags, 1 for the items of the user's dataset history."""
    window: tuple[int, ...]
    """The last ``history_length`` items of the history, most recent first."""
    history: np.ndarray
    """``window`` padded with -1 (read-only)."""
    history_genres: np.ndarray
    """Mean genre vector of ``window`` (read-only)."""
    first_unseen: int


@dataclass(frozen=True)
class SessionTables:
    n_items: int
    n_users: int
    genres: tuple[str, ...]
    topics: np.ndarray
    """``(n_items, n_genres)`` genre vectors normalised to sum 1."""
    quality: np.ndarray
    """``(n_items,)`` shrunk mean rating in ``[-1, 1]``."""
    popularity: np.ndarray
    """``(n_items,)`` log interaction count scaled to ``[0, 1]``."""
    popularity_order: np.ndarray
    """Item ids, most interacted first (ties by id)."""
    user_features: np.ndarray
    """``(n_users, n_genres + 3)`` float32 in ``[0, 1]``: genre shares, activity, diversity, conformity."""
    histories: tuple[np.ndarray, ...]
    """Per user, the item ids of its dataset history in time order."""
    titles: tuple[str, ...] = ()
    """Item titles (for event records)."""
    popularity_list: list[int] = field(init=False, repr=False, compare=False)
    """``popularity_order`` as Python ints (the page step's replacement scan reads it item by item)."""
    sparse_topics: list[tuple[tuple[int, float], ...]] = field(init=False, repr=False, compare=False)
    """Per item, its ``(genre, share)`` pairs with a share > 0 (the history's genre mean adds only these)."""
    _first_unseen: dict[int, int] = field(init=False, repr=False, compare=False)
    _openings: dict[tuple[int, int], Opening] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "popularity_list", self.popularity_order.tolist())
        rows = self.topics.tolist()
        sparse = [tuple((g, share) for g, share in enumerate(row) if share > 0.0) for row in rows]
        object.__setattr__(self, "sparse_topics", sparse)
        object.__setattr__(self, "_first_unseen", {})
        object.__setattr__(self, "_openings", {})

    def first_unseen(self, user: int) -> int:
        """Position in ``popularity_order`` of the user's most popular item outside the dataset history (cached)."""
        pointer = self._first_unseen.get(user)
        if pointer is None:
            seen = np.zeros(self.n_items, dtype=bool)
            seen[self.histories[user]] = True
            flags = seen[self.popularity_order]
            pointer = len(flags) if flags.all() else int(np.argmin(flags))
            self._first_unseen[user] = pointer
        return pointer

    def opening(self, user: int, history_length: int) -> Opening:
        """The state every session of ``user`` opens with (cached: a few hundred bytes plus ``n_items`` per user)."""
        key = (user, history_length)
        opening = self._openings.get(key)
        if opening is None:
            past = self.histories[user]
            seen = np.zeros(self.n_items, dtype=bool)
            seen[past] = True
            window = tuple(int(i) for i in past[::-1][:history_length])
            history, genres = self.window_arrays(window, history_length)
            history.setflags(write=False)
            genres.setflags(write=False)
            opening = Opening(seen.tobytes(), window, history, genres, self.first_unseen(user))
            self._openings[key] = opening
        return opening

    def window_arrays(self, window: Sequence[int], history_length: int) -> tuple[np.ndarray, np.ndarray]:
        """A session's ``history`` (``window`` padded with -1 to ``history_length``, int64) and ``history_genres``."""
        history = np.array([*window, *([-1] * (history_length - len(window)))], dtype=np.int64)
        return history, self.window_genres(window)

    def window_genres(self, window: Sequence[int]) -> np.ndarray:
        """``(n_genres,)`` float32 mean genre vector of ``window``'s items.

        Plain floats over each item's few genres, added in window order: bit for bit what summing the window's rows
        of ``topics`` in numpy gives (adding 0.0 changes nothing), without numpy's per-call overhead. Recomputed per
        window, not kept as a running sum: subtraction drifts below 0 (e.g. -5.6e-18) and leaves the observation
        space.
        """
        totals = [0.0] * len(self.genres)
        if window:
            sparse = self.sparse_topics
            for item in window:
                for genre, share in sparse[item]:
                    totals[genre] += share
            scale = 1.0 / len(window)
            totals = [t * scale for t in totals]
        return np.array(totals, dtype=np.float32)

    @classmethod
    def build(cls, dataset: Dataset) -> SessionTables:
        topics = item_topics(dataset)
        counts = dataset.item_popularity()
        log_pop = np.log1p(counts.astype(np.float64))
        popularity = log_pop / max(log_pop.max(), 1e-12)
        users = dataset.users
        behaviour = (
            np.stack([users[c].to_numpy(dtype=np.float64) for c in ("activity", "diversity", "conformity")], axis=1)
            if dataset.n_users
            else np.zeros((0, 3))
        )
        features = np.concatenate([user_genre_shares(dataset, topics), np.nan_to_num(behaviour)], axis=1)
        inter = dataset.interactions.sort_values(["user_id", "timestamp"], kind="stable")
        user_ids = inter["user_id"].to_numpy()
        item_ids = inter["item_id"].to_numpy().astype(np.int64)
        bounds = np.searchsorted(user_ids, np.arange(dataset.n_users + 1))
        histories = tuple(item_ids[bounds[u] : bounds[u + 1]] for u in range(dataset.n_users))
        return cls(
            n_items=dataset.n_items,
            n_users=dataset.n_users,
            genres=dataset.genres,
            topics=topics,
            quality=item_quality(dataset),
            popularity=popularity,
            popularity_order=np.argsort(-counts, kind="stable").astype(np.int64),
            user_features=np.clip(features, 0.0, 1.0).astype(np.float32),
            histories=histories,
            titles=tuple(str(t) for t in dataset.items["title"]),
        )

    @property
    def n_genres(self) -> int:
        return len(self.genres)

    def item_features(self) -> np.ndarray:
        """``(n_items, n_genres + 2)`` float32: genre vector, quality, popularity; the score wrapper's basis."""
        return np.concatenate([self.topics, self.quality[:, None], self.popularity[:, None]], axis=1).astype(np.float32)
