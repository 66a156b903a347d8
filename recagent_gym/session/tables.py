"""Arrays precomputed once per dataset and shared by every open session (env, vector env, simulator): no pandas
in a page step."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.users.recsim import item_quality, item_topics, user_genre_shares


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "popularity_list", self.popularity_order.tolist())
        rows = self.topics.tolist()
        sparse = [tuple((g, share) for g, share in enumerate(row) if share > 0.0) for row in rows]
        object.__setattr__(self, "sparse_topics", sparse)
        object.__setattr__(self, "_first_unseen", {})

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
