"""Per-user candidate pools for offline tests: a user's real future items among never-seen negatives, in a seeded
order, with the two negative samplers of the discrimination test (``uniform`` and ``popularity-matched``). The
agreement test plays its sessions over them; the RecSim-style users' fit draws its pages from them."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.data.splits import SeenIndex, Split, sample_negatives, sample_negatives_popularity_matched


def child_rng(seed: int, *keys: int | str) -> np.random.Generator:
    """A generator determined by ``seed`` and ``keys`` (strings hashed with CRC-32, stable across processes)."""
    entropy = [int(seed)] + [zlib.crc32(k.encode("utf-8")) if isinstance(k, str) else int(k) for k in keys]
    return np.random.default_rng(entropy)


@dataclass(frozen=True)
class Pool:
    """One user's candidates (shuffled) and real future items (oldest first)."""

    user: int
    candidates: np.ndarray
    future: tuple[int, ...]


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
    index = SeenIndex.of(dataset)
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
            negatives = sample_negatives(dataset, user, n_neg, rng, exclude=future, index=index)
        elif sampler == "popularity-matched":
            per, extra = divmod(n_neg, len(future))
            counts = [per + (1 if k < extra else 0) for k in range(len(future))]
            parts = []
            taken: list[int] = []
            for item, n in zip(future, counts, strict=True):
                if n == 0:
                    continue
                sample = sample_negatives_popularity_matched(
                    dataset, user, [item], n, rng, exclude=[*future, *taken], n_bands=n_bands, index=index
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
