"""The agreement test's subjects: a temporal split, and per held-out user a fixed pool of candidates.

**Split.** Each user's last ``future`` interactions by time are held out (:func:`~recagent_gym.data.splits.
leave_last_out`; or one time cut for everyone, ``evaluation.agreement_split: global``): the *history* (everything
else, all users) is what every recommender and user model is fitted or built on; the held-out items are the user's
*real future*.

**Pools.** Per sampled user and sampler, ``size`` candidates (RecAgent-v1's K, 50 by default): the user's real
future items and ``size - len(future)`` negatives the user never interacted with, drawn with the discrimination
test's samplers (``uniform``, or ``popularity-matched``: each negative from a future item's popularity band), in a
seeded random order so that a position says nothing. The same pools serve every recommender and every user model.

:class:`PoolRetriever` stands in for RecAgent-v1's retrieval stage: each step the candidates are the user's pool
minus what the user watched, so a session is played by the env's own rules (the session kernel).
"""

from __future__ import annotations

import numpy as np

from recagent_gym.data.pools import Pool, build_pools
from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.data.splits import Split, global_time_split, leave_last_out

__all__ = ["Pool", "PoolRetriever", "build_pools", "temporal_split"]


def temporal_split(
    dataset: Dataset, future: int, min_history: int, *, kind: str = "leave-last-out", quantile: float = 0.9
) -> Split:
    """Every user's last ``future`` items held out, for users keeping at least ``min_history`` items
    (``leave-last-out``), or everyone cut at one time and each user's first ``future`` items after it held out
    (``global``: :func:`~recagent_gym.data.splits.global_time_split`)."""
    if future < 1:
        raise DataError(f"future must be >= 1, not {future}")
    if kind == "global":
        return global_time_split(dataset, future, quantile=quantile, min_train=min_history)
    return leave_last_out(dataset, future, min_train=min_history)


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
