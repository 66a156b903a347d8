"""The agreement test's subjects: a temporal split, and per held-out user a fixed pool of candidates.

**Split.** Each user's last ``future`` interactions by time are held out (:func:`~recagent_gym.data.splits.
leave_last_out`): the *history* (everything else, all users) is what every recommender and user model is fitted or
built on; the held-out items are the user's *real future*.

**Pools.** Per sampled user and sampler, ``size`` candidates (RecAgent-v1's K, 50 by default): the user's real
future items and ``size - len(future)`` negatives the user never interacted with, drawn with the discrimination
test's samplers (``uniform``, or ``popularity-matched``: each negative from a future item's popularity band), in a
seeded random order so that a position says nothing. The same pools serve every recommender and every user model.

:class:`PoolRetriever` stands in for RecAgent-v1's retrieval stage: each step the candidates are the user's pool
minus what the user watched, so a session is played by the env's own rules (the session kernel).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.data.splits import Split, leave_last_out, sample_negatives, sample_negatives_popularity_matched
from recagent_gym.runs.evaluation.subjects import child_rng


@dataclass(frozen=True)
class Pool:
    """One user's candidates (shuffled) and real future items (oldest first)."""

    user: int
    candidates: np.ndarray
    future: tuple[int, ...]


def temporal_split(dataset: Dataset, future: int, min_history: int) -> Split:
    """Every user's last ``future`` items held out, for users keeping at least ``min_history`` items."""
    if future < 1:
        raise DataError(f"future must be >= 1, not {future}")
    return leave_last_out(dataset, future, min_train=min_history)


def build_pools(
    dataset: Dataset,
    split: Split,
    users: Sequence[int],
    *,
    sampler: str,
    size: int,
    seed: int,
    n_bands: int = 10,
) -> dict[int, Pool]:
    """One :class:`Pool` per user of ``users`` (each must have held-out items in ``split``)."""
    pools: dict[int, Pool] = {}
    for user in users:
        user = int(user)
        future = split.held_out.get(user)
        if not future:
            raise DataError(f"user {user} has no held-out items in this split")
        future = tuple(dict.fromkeys(future))  # a re-watched item counts once
        n_neg = size - len(future)
        if n_neg < 1:
            raise DataError(f"pool size {size} leaves no room for negatives beside {len(future)} future items")
        rng = child_rng(seed, "agreement-pool", sampler, user)
        if sampler == "uniform":
            negatives = sample_negatives(dataset, user, n_neg, rng, exclude=future)
        elif sampler == "popularity-matched":
            per, extra = divmod(n_neg, len(future))
            counts = [per + (1 if k < extra else 0) for k in range(len(future))]
            parts = []
            taken: list[int] = []
            for item, n in zip(future, counts, strict=True):
                if n == 0:
                    continue
                sample = sample_negatives_popularity_matched(
                    dataset, user, [item], n, rng, exclude=[*future, *taken], n_bands=n_bands
                )
                drawn = sample.negatives[item]
                taken.extend(int(i) for i in drawn)
                parts.append(drawn)
            negatives = np.concatenate(parts)
        else:
            raise DataError(f"unknown negative sampler {sampler!r}")
        candidates = rng.permutation(np.concatenate([np.asarray(future, np.int64), negatives.astype(np.int64)]))
        pools[user] = Pool(user, candidates.astype(np.int64), future)
    return pools


class PoolRetriever:
    """RecAgent-v1's retrieval stage over fixed pools: the user's pool minus what the user watched.

    A user without a pool (not set) gets none: the env is only ever reset for users of the pools.
    """

    def __init__(self, pools: dict[int, Pool], k: int, n_users: int) -> None:
        self.pools = pools
        self.k = k
        self.n_users = n_users

    def retrieve(self, user: int, excluded: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        pool = self.pools.get(int(user))
        if pool is None:
            raise KeyError(f"user {user} has no candidate pool in this agreement run")
        return pool.candidates[~excluded[pool.candidates]]
