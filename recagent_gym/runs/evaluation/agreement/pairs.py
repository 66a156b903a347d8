"""The headline agreement of a user model: over the recommenders that read only the history, on the pairs of
recommenders the real users separate, how often the simulated users order the pair the same way.

Kendall's tau counts every pair alike, so two recommenders whose real means differ by noise (four within 0.05 of
each other are common) weigh as much as random against the best; and a user model is penalised for an order the
real users do not have. Here a pair counts only when the real users' paired difference has a 95% bootstrap interval
that excludes zero, and the score is the share of those pairs the simulated means order the same way (a simulated
tie counts half). The real ranking's own reproducibility gives its ceiling: over random splits of the users into
two disjoint halves, the share of the same pairs that one half orders as the other does.

Every resample is over users (the same users on both sides: the rankings stay paired).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from recagent_gym.runs.metrics import Estimate, bootstrap_replicates, paired_difference, percentile_interval


@dataclass(frozen=True)
class SignAgreement:
    """Share of the separated pairs ordered as the real users order them, with a 95% bootstrap interval."""

    share: float
    low: float
    high: float
    pairs: int
    """Pairs the real users separate (of ``n (n - 1) / 2``)."""
    n_recommenders: int
    n_users: int


def _matrix(values: Mapping[str, np.ndarray], names: Sequence[str]) -> np.ndarray:
    return np.vstack([np.asarray(values[r], np.float64) for r in names])


def separated_pairs(
    real: Mapping[str, np.ndarray], names: Sequence[str], *, n_boot: int = 1000, seed: int = 0
) -> list[tuple[int, int, int]]:
    """``(i, j, sign)`` for each pair of ``names`` whose real paired difference (mean over users of ``real[i] -
    real[j]``) has a 95% bootstrap interval excluding zero; ``sign`` is that difference's."""
    m = _matrix(real, names)
    n = m.shape[1]
    # (n_boot, recommenders): each resample's means
    means = bootstrap_replicates(lambda idx: m[:, idx].mean(axis=2).T, n, np.random.default_rng(seed),
                                 n_boot=n_boot, batched=True)  # fmt: skip
    out = []
    for i, j in combinations(range(len(names)), 2):
        low, high = percentile_interval(means[:, i] - means[:, j]) if len(means) else (np.nan, np.nan)
        if low > 0 or high < 0:
            out.append((i, j, 1 if low > 0 else -1))
    return out


def _share(sim_means: np.ndarray, pairs: Sequence[tuple[int, int, int]]) -> np.ndarray:
    """``sim_means``: ``(recommenders, k)``; the share of ``pairs`` ordered as their sign, per column."""
    if not pairs:
        return np.full(sim_means.shape[1], np.nan)
    i, j, sign = (np.array(c) for c in zip(*pairs, strict=True))
    diff = np.sign(sim_means[i] - sim_means[j]) * sign[:, None]  # 1 agree, 0 tie, -1 disagree
    return ((diff + 1.0) / 2.0).mean(axis=0)


def sign_agreement(
    real: Mapping[str, np.ndarray],
    sim: Mapping[str, np.ndarray],
    names: Sequence[str],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> SignAgreement:
    """The share of the real users' separated pairs of ``names`` that ``sim``'s means order the same way."""
    pairs = separated_pairs(real, names, n_boot=n_boot, seed=seed)
    s = _matrix(sim, names)
    n = s.shape[1]
    share = float(_share(s.mean(axis=1, keepdims=True), pairs)[0])
    boots = bootstrap_replicates(lambda idx: _share(s[:, idx].mean(axis=2), pairs), n,
                                 np.random.default_rng(seed + 1), n_boot=n_boot, batched=True)  # fmt: skip
    low, high = percentile_interval(boots) if pairs and n > 1 else (np.nan, np.nan)
    return SignAgreement(share, float(low), float(high), len(pairs), len(names), n)


def sign_ceiling(
    real: Mapping[str, np.ndarray], names: Sequence[str], *, n_splits: int = 1000, seed: int = 0
) -> SignAgreement:
    """The real ranking against itself on other users: over random splits into two disjoint halves, the share of
    the separated pairs (on all users) that the halves' means order alike; median and central 95% of the splits."""
    pairs = separated_pairs(real, names, n_boot=n_splits, seed=seed)
    m = _matrix(real, names)
    n = m.shape[1]
    rng = np.random.default_rng(seed + 2)
    shares = []
    for _ in range(n_splits if pairs and n >= 4 else 0):
        order = rng.permutation(n)
        a, b = order[: n // 2], order[n // 2 : 2 * (n // 2)]
        ma, mb = m[:, a].mean(axis=1), m[:, b].mean(axis=1)
        agree = [(np.sign(ma[i] - ma[j]) * np.sign(mb[i] - mb[j]) + 1.0) / 2.0 for i, j, _ in pairs]
        shares.append(float(np.mean(agree)))
    if not shares:
        return SignAgreement(np.nan, np.nan, np.nan, len(pairs), len(names), n // 2)
    low, mid, high = np.quantile(shares, [0.025, 0.5, 0.975])
    return SignAgreement(float(mid), float(low), float(high), len(pairs), len(names), n // 2)


def paired(a: np.ndarray, b: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> Estimate:
    """``mean(a - b)`` over the users where both are finite (:func:`~recagent_gym.runs.metrics.paired_difference`:
    bootstrapped over those users; ``n`` counts them)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    return paired_difference(a[both], b[both], np.random.default_rng(seed), bootstrap=n_boot)


def real_item_response(dose: np.ndarray, n_users: int) -> tuple[np.ndarray, np.ndarray]:
    """Per user, the mean reward on pages with a real future item and on pages without one (NaN where a user had
    no such page), from :class:`~.run.Arm` dose rows ``(user index, future items on the page, reward)``."""
    rows = np.asarray(dose, np.float64).reshape(-1, 3)
    users, hit, reward = rows[:, 0].astype(np.int64), rows[:, 1] > 0, rows[:, 2]
    with_item, without = np.full(n_users, np.nan), np.full(n_users, np.nan)
    for u in range(n_users):
        mine = users == u
        if (mine & hit).any():
            with_item[u] = reward[mine & hit].mean()
        if (mine & ~hit).any():
            without[u] = reward[mine & ~hit].mean()
    return with_item, without
