"""Held-out splits and negative sampling for the paper's evaluations (e.g. discrimination (a, b)).

``leave_last_out`` holds out each user's last ``a`` interactions by timestamp (ties broken by file order, the
order of the loaded interactions). Negatives are items the user never interacted with, in train or held-out data.
The popularity-matched variant bands items by interaction count: items are sorted by popularity (ties by id) and
cut into :data:`N_POPULARITY_BANDS` bands of (nearly) equal size, so band 0 holds the least popular decile; a
negative is drawn from the positive's band, widening to neighbouring bands only when that band has too few
candidates (counted in the returned :class:`NegativeSample`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.data.stats import user_statistics

N_POPULARITY_BANDS = 10


@dataclass(frozen=True)
class Split:
    """``train`` keeps everything but the held-out rows; ``held_out[u]`` is user u's last items, oldest first."""

    train: Dataset
    held_out: dict[int, tuple[int, ...]]


def leave_last_out(dataset: Dataset, a: int = 1, *, min_train: int = 1) -> Split:
    """Hold out each user's last ``a`` interactions by timestamp.

    ``train``'s users get activity, diversity and conformity recomputed on the train interactions; interests and
    behaviour features stay as loaded (they may be given by the dataset rather than derived). Users with fewer than
    ``a + min_train`` interactions keep their whole history in ``train`` and get no held-out items (they are absent
    from ``held_out``), so no user is evaluated without a history to condition on.
    """
    if a < 1:
        raise ValueError(f"a must be >= 1, not {a}")
    if min_train < 0:
        raise ValueError(f"min_train must be >= 0, not {min_train}")
    inter = dataset.interactions.reset_index(drop=True)
    order = inter.sort_values(["user_id", "timestamp"], kind="stable")
    size = order.groupby("user_id")["item_id"].transform("size").to_numpy()
    rank_from_end = size - 1 - order.groupby("user_id").cumcount().to_numpy()
    held = (rank_from_end < a) & (size >= a + min_train)
    return _split(dataset, order, held)


def _split(dataset: Dataset, order: pd.DataFrame, held: np.ndarray) -> Split:
    """``order``: the interactions sorted by user and time; ``held``: the rows held out (each user's, in time
    order). The training users' statistics are recomputed on what stays."""
    held_rows = order[held]
    held_out = {int(u): tuple(int(i) for i in g["item_id"]) for u, g in held_rows.groupby("user_id", sort=True)}
    train_inter = order[~held].sort_index().reset_index(drop=True)
    users = dataset.users.copy()
    stats = user_statistics(train_inter, dataset.items["genres"], dataset.n_users, dataset.genres)
    for column in ("activity", "diversity", "conformity"):
        users[column] = stats[column].to_numpy()
    return Split(replace(dataset, users=users, interactions=train_inter), held_out)


def global_time_split(dataset: Dataset, a: int, *, quantile: float = 0.9, min_train: int = 1) -> Split:
    """One time cut for everyone: the cut is the ``quantile`` of all interactions' timestamps; every interaction
    before it is history (for all users), and a user with at least ``min_train`` interactions before it has its
    first ``a`` interactions at or after it held out (the rest after the cut are dropped: no model reads them). No
    history row is dated after any held-out row, unlike :func:`leave_last_out`, whose history of one user can
    postdate another user's future."""
    if a < 1:
        raise ValueError(f"a must be >= 1, not {a}")
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"quantile must be in (0, 1), not {quantile}")
    inter = dataset.interactions.reset_index(drop=True)
    cut = float(np.quantile(inter["timestamp"].to_numpy(np.float64), quantile))
    order = inter.sort_values(["user_id", "timestamp"], kind="stable")
    after = order["timestamp"].to_numpy(np.float64) >= cut
    before = pd.Series(~after).groupby(order["user_id"].to_numpy()).transform("sum").to_numpy()
    rank_after = pd.Series(after.astype(np.int64)).groupby(order["user_id"].to_numpy()).cumsum().to_numpy()
    held = after & (before >= min_train) & (rank_after <= a)
    kept = ~after | held
    order = order[kept]
    return _split(dataset, order, held[kept])


def seen_items(dataset: Dataset, user_id: int) -> np.ndarray:
    """Ids of every item the user interacted with."""
    inter = dataset.interactions
    return np.unique(inter.loc[inter["user_id"] == user_id, "item_id"].to_numpy(np.int64))


@dataclass(frozen=True)
class SeenIndex:
    """What the negative samplers look up on every call, read once: each user's items and the popularity bands.

    Pass one (``index=SeenIndex.of(dataset)``) when sampling for many users of the same dataset: the draws are the
    same as without it, and a call no longer scans every interaction (on MovieLens-1M the popularity-matched pools of
    2,600 users took over a minute that way).
    """

    items: np.ndarray
    """Item ids of every interaction, grouped by user (``items[bounds[u]:bounds[u + 1]]`` are user u's)."""
    bounds: np.ndarray
    bands: np.ndarray
    """:func:`popularity_bands` with :data:`N_POPULARITY_BANDS` bands."""

    @classmethod
    def of(cls, dataset: Dataset) -> SeenIndex:
        users = dataset.interactions["user_id"].to_numpy(np.int64)
        order = np.argsort(users, kind="stable")
        bounds = np.searchsorted(users[order], np.arange(dataset.n_users + 1))
        items = dataset.interactions["item_id"].to_numpy(np.int64)[order]
        return cls(items, bounds, popularity_bands(dataset))

    def seen(self, user_id: int) -> np.ndarray:
        return self.items[self.bounds[user_id] : self.bounds[user_id + 1]]


def sample_negatives(
    dataset: Dataset,
    user_id: int,
    n: int,
    rng: np.random.Generator,
    exclude: Iterable[int] = (),
    index: SeenIndex | None = None,
) -> np.ndarray:
    """``n`` distinct items, uniformly at random, that the user never interacted with and not in ``exclude``.

    Pass the *full* dataset (not a train split) so held-out items count as seen; raises :class:`DataError` when
    fewer than ``n`` candidates exist. ``index``: ``SeenIndex.of(dataset)``, read once for many calls.
    """
    candidates = _candidates(dataset, user_id, exclude, index)
    if len(candidates) < n:
        raise DataError(f"user {user_id}: only {len(candidates)} unseen items, cannot sample {n} negatives")
    return np.sort(rng.choice(candidates, size=n, replace=False)) if n else np.empty(0, np.int64)


@dataclass(frozen=True)
class NegativeSample:
    """Negatives per positive, and how many were drawn outside their positive's popularity band."""

    negatives: dict[int, np.ndarray]
    widened: int


def popularity_bands(dataset: Dataset, n_bands: int = N_POPULARITY_BANDS) -> np.ndarray:
    """Band (0 = least popular) of every item: equal-size bands of items sorted by interaction count, ties by id."""
    popularity = dataset.item_popularity()
    order = np.lexsort((np.arange(len(popularity)), popularity))
    bands = np.empty(len(popularity), dtype=np.int64)
    bands[order] = np.arange(len(popularity)) * n_bands // max(len(popularity), 1)
    return bands


def sample_negatives_popularity_matched(
    dataset: Dataset,
    user_id: int,
    positives: Iterable[int],
    n: int,
    rng: np.random.Generator,
    exclude: Iterable[int] = (),
    n_bands: int = N_POPULARITY_BANDS,
    index: SeenIndex | None = None,
) -> NegativeSample:
    """For each positive, ``n`` unseen items from the same popularity band (see the module docstring).

    Negatives are distinct across all positives of the call. When a band runs short, the nearest bands (lower
    first at equal distance) fill in and each such negative is counted in ``widened``. ``index``:
    ``SeenIndex.of(dataset)``, read once for many calls (the same draws).
    """
    positives = [int(p) for p in positives]
    bands = index.bands if index is not None and n_bands == N_POPULARITY_BANDS else popularity_bands(dataset, n_bands)
    available = _candidates(dataset, user_id, [*exclude, *positives], index)
    if len(available) < n * len(positives):
        raise DataError(f"user {user_id}: only {len(available)} unseen items, cannot sample {n * len(positives)}")
    # each band's unseen items in id order, bands in ascending order, each shuffled: the rng's draws fix the sample
    in_band = bands[available]
    order = np.argsort(in_band, kind="stable")
    keys, starts = np.unique(in_band[order], return_index=True)
    groups = np.split(available[order], starts[1:])
    pool = {int(b): rng.permutation(g) for b, g in zip(keys, groups, strict=True)}
    used = dict.fromkeys(pool, 0)  # a band's first ``used`` items are taken
    out: dict[int, np.ndarray] = {}
    widened = 0
    for positive in positives:
        home = int(bands[positive])
        picked: list[np.ndarray] = []
        short = n
        for band in sorted(range(n_bands), key=lambda b: (abs(b - home), b)):
            if band not in pool:
                continue
            take = pool[band][used[band] : used[band] + short]
            used[band] += len(take)
            picked.append(take)
            short -= len(take)
            widened += len(take) if band != home else 0
            if short == 0:
                break
        out[positive] = np.sort(np.concatenate(picked).astype(np.int64)) if picked else np.empty(0, np.int64)
    return NegativeSample(out, widened)


def _candidates(dataset: Dataset, user_id: int, exclude: Iterable[int], index: SeenIndex | None = None) -> np.ndarray:
    if not 0 <= user_id < dataset.n_users:
        raise DataError(f"unknown user id {user_id} (dataset has {dataset.n_users} users)")
    blocked = np.zeros(dataset.n_items, dtype=bool)
    blocked[seen_items(dataset, user_id) if index is None else index.seen(user_id)] = True
    excluded = np.fromiter((int(i) for i in exclude), dtype=np.int64)
    blocked[excluded] = True
    return np.flatnonzero(~blocked)
