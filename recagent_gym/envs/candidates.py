"""The retrieval stage of ``RecAgent-v1``: K candidate items per step from a documented mix of sources.

Default mix for K = 50 (:data:`DEFAULT_MIX`, shares of K, rounded; the remainder goes to ``random``):

| source    | share | what                                                                          |
|-----------|-------|-------------------------------------------------------------------------------|
| `mf`      | 0.40  | top items by a rank-``mf_dim`` (randomised) SVD of the user x item matrix     |
| `genre`   | 0.20  | most popular items of the user's top-3 genres (by dataset genre shares)       |
| `popular` | 0.15  | most interacted items                                                         |
| `friends` | 0.10  | items the user's friends (dataset social links) watched, most popular first  |
| `random`  | 0.15  | uniform over the catalogue (exploration; fills what the others cannot)        |

Items the user already watched (dataset history and this session) are never candidates; items shown earlier in
the session may be (the observation flags them). Sources are taken in the table's order and an item found by two
sources counts once. Everything is numpy over precomputed arrays; only ``random`` draws, from the env's generator.

Every source orders its items by something the policy observes (MF, genre shares, popularity, the friends' graph):
none reads the items' quality, which RecSim-style users' hidden nutrition follows (``env.hide_quality`` hides it
from the observation). The genre block used to rank by quality + 0.25 x popularity, which handed the hidden
nutrition over by position (``benchmarks/probe_hidden_nutrition.py`` measures what the blocks and the public item
features still carry about it).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.recommenders.svd import svd_factors
from recagent_gym.session.tables import SessionTables

DEFAULT_MIX: dict[str, float] = {"mf": 0.40, "genre": 0.20, "popular": 0.15, "friends": 0.10, "random": 0.15}
SOURCES: tuple[str, ...] = tuple(DEFAULT_MIX)


class CandidateRetriever:
    """``retrieve(user, excluded, rng) -> item ids`` (exactly ``k`` unless the catalogue runs out)."""

    def __init__(
        self,
        dataset: Dataset,
        tables: SessionTables,
        *,
        k: int = 50,
        mix: Mapping[str, float] | None = None,
        mf_dim: int = 32,
    ) -> None:
        mix = dict(DEFAULT_MIX if mix is None else mix)
        unknown = set(mix) - set(SOURCES)
        if unknown:
            raise ValueError(f"unknown candidate sources {sorted(unknown)}; expected among {', '.join(SOURCES)}")
        if k < 1:
            raise ValueError(f"n_candidates must be >= 1, got {k}")
        total = sum(mix.values())
        self.k = k
        self.quota = {name: int(k * share / total) for name, share in mix.items() if share > 0 and name != "random"}
        self.quota["random"] = k - sum(self.quota.values())  # random fills the rest (and whatever others lack)
        self.tables = tables
        self.user_factors, self.item_factors = svd_factors(dataset, mf_dim)
        rank = tables.popularity  # public (an item feature); never the hidden quality
        self._genre_order = [
            np.flatnonzero(tables.topics[:, g] > 0)[np.argsort(-rank[tables.topics[:, g] > 0], kind="stable")]
            for g in range(tables.n_genres)
        ]
        self._top_genres = np.argsort(-tables.user_features[:, : tables.n_genres], axis=1, kind="stable")[:, :3]
        self._friends_items = self._friends(dataset, tables)
        self._mf_cache: dict[int, np.ndarray] = {}

    @staticmethod
    def _friends(dataset: Dataset, tables: SessionTables) -> list[np.ndarray]:
        friends: list[set[int]] = [set() for _ in range(dataset.n_users)]
        for a, b in zip(dataset.social["user_1"].tolist(), dataset.social["user_2"].tolist(), strict=True):
            friends[int(a)].add(int(b))
            friends[int(b)].add(int(a))
        rank = np.argsort(np.argsort(tables.popularity_order, kind="stable"), kind="stable")  # item -> pop rank
        out = []
        for user in range(dataset.n_users):
            items = (
                np.unique(np.concatenate([tables.histories[f] for f in friends[user]]))
                if friends[user]
                else np.zeros(0, np.int64)
            )
            out.append(items[np.argsort(rank[items], kind="stable")][:200].astype(np.int64))
        return out

    @property
    def n_users(self) -> int:
        return int(self.user_factors.shape[0])

    def _mf_order(self, user: int) -> np.ndarray:
        """The user's MF head (best ``4 * quota + 64`` items, best first), computed once per user: the scores are
        fixed, only the exclusions change from step to step."""
        order = self._mf_cache.get(user)
        if order is None:
            scores = self.mf_scores(user)
            n = min(4 * self.quota.get("mf", 0) + 64, len(scores))
            top = np.argpartition(-scores, n - 1)[:n]
            order = self._mf_cache[user] = top[np.argsort(-scores[top], kind="stable")]
        return order

    def mf_scores(self, user: int, items: np.ndarray | None = None) -> np.ndarray:
        """The MF score of ``items`` (all items when None) for ``user``."""
        factors = self.item_factors if items is None else self.item_factors[items]
        return factors @ self.user_factors[user]

    def retrieve(
        self, user: int, excluded: np.ndarray, rng: np.random.Generator, *, sources: list[str] | None = None
    ) -> np.ndarray:
        """Candidate ids for ``user``; ``excluded`` marks items that may not be candidates (watched). ``sources``,
        when given, receives the source of each candidate (a probe's diagnostic)."""
        taken = excluded.copy()
        out: list[np.ndarray] = []
        source = ["mf"]

        def take(ordered: np.ndarray, n: int) -> None:
            if n <= 0 or len(ordered) == 0:
                return
            fresh = ordered[~taken[ordered]]
            if len(fresh) > n:
                fresh = fresh[:n]
            taken[fresh] = True
            out.append(fresh)
            if sources is not None:
                sources.extend(source * len(fresh))

        quota = self.quota
        if "mf" in quota:
            order = self._mf_order(user)
            before = sum(len(o) for o in out)
            take(order, quota["mf"])
            if sum(len(o) for o in out) - before < quota["mf"]:  # the cached head is spent: rank everything left
                scores = np.where(taken, -np.inf, self.mf_scores(user))
                n = min(quota["mf"] - (sum(len(o) for o in out) - before), int((~taken).sum()))
                if n > 0:
                    top = np.argpartition(-scores, n - 1)[:n]
                    take(top[np.argsort(-scores[top], kind="stable")], n)
        if "genre" in quota:
            source[0] = "genre"
            genres = self._top_genres[user]
            per = [quota["genre"] // len(genres) + (1 if i < quota["genre"] % len(genres) else 0) for i in range(3)]
            for genre, n in zip(genres.tolist(), per, strict=True):
                take(self._genre_order[genre][: n + 64], n)
        if "popular" in quota:
            source[0] = "popular"
            take(self.tables.popularity_order[: quota["popular"] + 256], quota["popular"])
        if "friends" in quota:
            source[0] = "friends"
            take(self._friends_items[user], quota["friends"])
        missing = self.k - sum(len(o) for o in out)
        free = np.flatnonzero(~taken)
        if missing > 0 and len(free):
            source[0] = "random"
            take(rng.choice(free, size=min(missing, len(free)), replace=False), missing)
        return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)
