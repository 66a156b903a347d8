"""Diverse pages for collecting decisions: each session is served by one source, like one recommender's episode.

``random`` (uniform), ``popular`` (most interacted items the user has not watched), ``mf`` (the MF baseline's top
items), ``genre`` (items of one genre per session, the user's favourite half the time, drawn by popularity). Every
source skips items already shown in the session and the user's own history, so a session sees fresh items on each
page (and the kernel's duplicate rule has nothing to replace).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.recommenders.baselines import top_k_excluding

SOURCES: tuple[str, ...] = ("random", "popular", "mf", "genre")


class PageSources:
    """Builds the page of a session's next step from its source (the MF model is trained on first use)."""

    def __init__(self, dataset: Dataset, *, page_size: int, config: Any = None, seed: int = 0) -> None:
        if page_size > dataset.n_items:
            raise ValueError(f"page_size {page_size} exceeds the catalogue ({dataset.n_items} items)")
        self.dataset, self.page_size, self.config, self.seed = dataset, page_size, config, seed
        self.popularity = dataset.item_popularity().astype(np.float64)
        self.genre_matrix = dataset.genre_matrix() > 0
        self.genres = dataset.genres
        self.history = [np.asarray(dataset.user_history(u)["item_id"], dtype=np.int64) for u in range(dataset.n_users)]
        self._mf: Any = None

    def mf_scores(self, user: int) -> np.ndarray:
        if self._mf is None:
            from recagent_gym.recommenders.mf import MFRecommender

            rec_cfg = getattr(self.config, "recommender", None)
            self._mf = MFRecommender(self.dataset, self.page_size, rec_cfg, self.seed)
        return self._mf.scores(user)

    def session_genre(self, user: int, rng: np.random.Generator) -> int:
        """The genre of a ``genre`` session: one of the user's interests half the time, else any genre."""
        interests = [self.genres.index(g) for g in self.dataset.users["interests"].iloc[user] if g in self.genres]
        if interests and rng.random() < 0.5:
            return int(rng.choice(interests))
        return int(rng.integers(0, len(self.genres)))

    def page(self, source: str, user: int, shown: set[int], rng: np.random.Generator, genre: int = 0) -> list[int]:
        k = self.page_size
        exclude = np.fromiter(shown, dtype=np.int64, count=len(shown))
        if source == "random":
            weights = np.ones(self.dataset.n_items)
            weights[exclude] = 0.0
            weights[self.history[user]] = 0.0
            return [int(i) for i in rng.choice(self.dataset.n_items, k, replace=False, p=weights / weights.sum())]
        if source in ("popular", "mf"):
            scores = self.popularity if source == "popular" else self.mf_scores(user)
            return [int(i) for i in top_k_excluding(scores, np.concatenate([exclude, self.history[user]]), k)]
        if source == "genre":
            weights = np.sqrt(self.popularity + 1.0) * self.genre_matrix[:, genre]
            weights[exclude] = 0.0
            weights[self.history[user]] = 0.0
            if np.count_nonzero(weights) < k:  # a small genre is spent: fill from the whole catalogue
                weights = np.sqrt(self.popularity + 1.0)
                weights[exclude] = 0.0
            return [int(i) for i in rng.choice(self.dataset.n_items, k, replace=False, p=weights / weights.sum())]
        raise ValueError(f"unknown page source {source!r}; expected one of {', '.join(SOURCES)}")
