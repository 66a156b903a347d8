"""The evaluation protocol's pieces: a seeded train / held-out split of users, and intervals by bootstrap over users.

Sessions of one user are correlated (same tastes, same state), so the unit of resampling is the user: a policy's
figure is the mean over held-out users of each user's mean session return, and its 95% interval comes from
resampling users with replacement. Differences between two runs on the same users (the swapped-encoding check) are
bootstrapped as paired per-user differences.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.metrics import bootstrap_replicates, percentile_interval, summarize
from recagent_gym.settings_section import ConfigError

CONFIDENCE = 0.95


@dataclass(frozen=True)
class UserSplit:
    """Dense user ids for training and for held-out evaluation (disjoint, each sorted)."""

    train: np.ndarray
    test: np.ndarray


def split_users(n_users: int, *, test_fraction: float, seed: int) -> UserSplit:
    """A fixed seeded split: ``round(test_fraction * n_users)`` held-out users (at least one, and one left to train)."""
    if n_users < 2:  # a configuration error: data.max_users or data.min_user_interactions left too few users
        raise ConfigError(
            f"a train / held-out split of users needs at least 2 users, the dataset has {n_users}: "
            "raise data.max_users (or lower data.min_user_interactions)"
        )
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    n_test = min(max(round(test_fraction * n_users), 1), n_users - 1)
    order = np.random.default_rng(seed).permutation(n_users)
    return UserSplit(train=np.sort(order[n_test:]), test=np.sort(order[:n_test]))


@dataclass(frozen=True)
class Interval:
    """A mean with its bootstrap interval over ``n`` users."""

    mean: float
    low: float
    high: float
    n: int

    def excludes_zero(self) -> bool:
        return self.low > 0.0 or self.high < 0.0

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap_mean(
    per_user: np.ndarray, *, n_boot: int = 2000, seed: int = 0, confidence: float = CONFIDENCE
) -> Interval:
    """Mean of ``per_user`` values with a percentile bootstrap interval (users resampled with replacement): the
    project's one bootstrap, :func:`recagent_gym.runs.metrics.summarize`, as an :class:`Interval`."""
    values = np.asarray(per_user, dtype=np.float64).reshape(-1)
    values = values[~np.isnan(values)]
    if len(values) == 1:
        return Interval(float(values[0]), float("nan"), float("nan"), 1)
    estimate = summarize(values, np.random.default_rng(seed), bootstrap=n_boot, confidence=confidence)
    return Interval(estimate.mean, estimate.low, estimate.high, estimate.n)


def bootstrap_ratio(numerator: np.ndarray, denominator: np.ndarray, *, n_boot: int = 2000, seed: int = 0) -> Interval:
    """``mean(numerator) / mean(denominator)`` over the same users, with a paired bootstrap interval."""
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    n = len(num)
    if n == 0 or den.mean() == 0:
        return Interval(float("nan"), float("nan"), float("nan"), n)

    def ratio(idx: np.ndarray) -> np.ndarray:
        den_mean = den[idx].mean(axis=1)
        return num[idx].mean(axis=1) / np.where(den_mean == 0, np.nan, den_mean)

    ratios = bootstrap_replicates(ratio, n, np.random.default_rng(seed), n_boot=n_boot, batched=True)
    low, high = percentile_interval(ratios, CONFIDENCE)
    return Interval(float(num.mean() / den.mean()), float(low), float(high), n)


def derangement(n: int, seed: int) -> np.ndarray:
    """A seeded permutation with no fixed point: position ``i`` gets partner ``p[i] != i`` (identity for n < 2)."""
    if n < 2:
        return np.arange(n)
    order = np.random.default_rng(seed).permutation(n)
    partner = np.empty(n, dtype=np.int64)
    partner[order] = np.roll(order, 1)  # a single cycle through a random order: nobody keeps their own
    return partner


def training_dataset(dataset: Dataset, users: np.ndarray) -> Dataset:
    """The dataset restricted to ``users`` (training users), renumbered densely; items are kept as they are.

    Training on it means the policy never meets a held-out user, and item statistics (popularity, mean rating)
    used while training never include held-out users' interactions.
    """
    import pandas as pd

    users = np.sort(np.asarray(users, dtype=np.int64))
    remap = np.full(dataset.n_users, -1, dtype=np.int64)
    remap[users] = np.arange(len(users))
    table = dataset.users.iloc[users].copy()
    table["user_id"] = np.arange(len(users))
    inter = dataset.interactions
    inter = inter[remap[inter["user_id"].to_numpy()] >= 0].copy()
    inter["user_id"] = remap[inter["user_id"].to_numpy()]
    social = dataset.social
    if len(social):
        ends = [remap[social[c].to_numpy(dtype=np.int64)] for c in ("user_1", "user_2")]
        social = social[(ends[0] >= 0) & (ends[1] >= 0)].copy()
        for column in ("user_1", "user_2"):
            social[column] = remap[social[column].to_numpy(dtype=np.int64)]
    subset = replace(
        dataset,
        name=f"{dataset.name}[train users]",
        users=table.reset_index(drop=True),
        interactions=inter.reset_index(drop=True),
        social=pd.DataFrame(social).reset_index(drop=True),
    )
    subset.validate()
    return subset
