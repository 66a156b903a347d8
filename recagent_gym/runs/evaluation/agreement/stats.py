"""Rank agreement between the real and a simulated ranking of recommenders, and the dose-response of return.

Both are bootstrapped over users: a resample of users gives every recommender's mean on the real side and on the
simulated side (the same users, so the two rankings stay paired), and the statistic is computed on those means.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau, spearmanr

from recagent_gym.runs.metrics import bootstrap_replicates, percentile_interval


@dataclass(frozen=True)
class Agreement:
    """Kendall tau-b and Spearman between two rankings of the same recommenders, with 95% bootstrap intervals."""

    tau: float
    tau_low: float
    tau_high: float
    rho: float
    rho_low: float
    rho_high: float
    n_recommenders: int
    n_users: int


def _corr(real: np.ndarray, sim: np.ndarray) -> tuple[float, float]:
    if np.ptp(real) == 0 or np.ptp(sim) == 0:
        return float("nan"), float("nan")
    return float(kendalltau(real, sim).statistic), float(spearmanr(real, sim).statistic)


def rank_agreement(
    real: Mapping[str, np.ndarray],
    sim: Mapping[str, np.ndarray],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Agreement:
    """``real[r]`` and ``sim[r]``: per-user values of recommender ``r`` over the same users (same order)."""
    names = [r for r in real if r in sim]
    real_m = np.vstack([np.asarray(real[r], np.float64) for r in names])
    sim_m = np.vstack([np.asarray(sim[r], np.float64) for r in names])
    n = real_m.shape[1]
    tau, rho = _corr(real_m.mean(axis=1), sim_m.mean(axis=1))
    boots = bootstrap_replicates(
        lambda idx: _corr(real_m[:, idx].mean(axis=1), sim_m[:, idx].mean(axis=1)),
        n, np.random.default_rng(seed), n_boot=n_boot if n > 1 else 0,
    ).reshape(-1, 2)  # fmt: skip
    (tau_low, tau_high), (rho_low, rho_high) = (percentile_interval(boots[:, k], confidence) for k in (0, 1))
    return Agreement(tau, tau_low, tau_high, rho, rho_low, rho_high, len(names), n)


def _central(values: list[float], confidence: float) -> tuple[float, float, float]:
    """``(low, median, high)`` of the finite ``values``: the central ``confidence`` share and its middle."""
    kept = np.asarray(values, dtype=np.float64)
    kept = kept[np.isfinite(kept)]
    if not len(kept):
        return float("nan"), float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2
    low, mid, high = np.quantile(kept, [alpha, 0.5, 1 - alpha])
    return float(low), float(mid), float(high)


def split_half(
    real: Mapping[str, np.ndarray], *, n_splits: int = 1000, seed: int = 0, confidence: float = 0.95
) -> Agreement:
    """How well the real ranking reproduces on other users: over ``n_splits`` random splits of the users into two
    disjoint halves, Kendall tau-b and Spearman between the recommenders' real means on one half and on the other.
    The point estimate is the median over splits and the interval the central ``confidence`` share of them.

    A reference, not a bound: a user model is compared with the real ranking on all the users, while each half
    has half of them, so a user model's tau can exceed it; a tau far below it is a user model's, not noise's."""
    names = list(real)
    real_m = np.vstack([np.asarray(real[r], np.float64) for r in names])
    n = real_m.shape[1]
    rng = np.random.default_rng(seed)
    taus, rhos = [], []
    for _ in range(n_splits if n >= 4 else 0):
        order = rng.permutation(n)
        a, b = order[: n // 2], order[n // 2 : 2 * (n // 2)]
        t, r = _corr(real_m[:, a].mean(axis=1), real_m[:, b].mean(axis=1))
        taus.append(t)
        rhos.append(r)
    (tau_low, tau, tau_high), (rho_low, rho, rho_high) = _central(taus, confidence), _central(rhos, confidence)
    return Agreement(tau, tau_low, tau_high, rho, rho_low, rho_high, len(names), n // 2)


ORACLE_ROWS: tuple[str, ...] = ("oracle", "anti-oracle")
"""The zoo's rows that read the user's real future: sanity anchors rather than recommenders anyone could run."""


@dataclass(frozen=True)
class OracleBound:
    """Where a simulated ranking puts the future oracle that the real ranking puts first.

    A user model knows only the history. To rank the future oracle's pages (one of the user's real next items, the
    rest popular candidates) above a history recommender's, it must tell the user's real next item from that
    recommender's best guesses better than the recommender does. Each recommender it ranks above the oracle is a
    discordant pair, each it ties with it a tied one, so with ``P = n (n - 1) / 2`` pairs its Kendall tau-b is at most
    ``(P - 2 above - tied) / sqrt(P (P - tied))`` (three above among 8 cap it at 0.79), provided the real means have
    no ties (simulated ties elsewhere only lower it)."""

    above: tuple[str, ...]
    """The recommenders the simulated ranking puts strictly above the oracle."""
    tied: tuple[str, ...]
    """The recommenders whose simulated mean equals the oracle's."""
    tau_max: float
    """The largest Kendall tau-b a ranking with the oracle where this one has it can reach (real means untied)."""


def oracle_bound(real: Mapping[str, float], sim: Mapping[str, float], oracle: str = "oracle") -> OracleBound | None:
    """``real`` / ``sim``: mean per recommender. ``None`` unless ``oracle`` is a row the real ranking puts strictly
    first."""
    names = [r for r in real if r in sim]
    if oracle not in names or any(real[r] >= real[oracle] for r in names if r != oracle):
        return None
    above = tuple(r for r in names if r != oracle and sim[r] > sim[oracle])
    tied = tuple(r for r in names if r != oracle and sim[r] == sim[oracle])
    pairs = len(names) * (len(names) - 1) / 2
    return OracleBound(above, tied, (pairs - 2.0 * len(above) - len(tied)) / math.sqrt(pairs * (pairs - len(tied))))


@dataclass(frozen=True)
class DoseResponse:
    """Least-squares slope of a step's reward on the real future items on its page, with a bootstrap interval over
    users, and the mean reward per dose (0, 1, 2, ... future items on the page)."""

    slope: float
    low: float
    high: float
    by_dose: dict[int, tuple[float, int]]
    """dose -> (mean reward, pages)."""


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2 or np.ptp(x) == 0:
        return float("nan")
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / (xc * xc).sum())


def dose_response(rows: np.ndarray, n_users: int, *, n_boot: int = 1000, seed: int = 0) -> DoseResponse:
    """``rows``: ``(steps, 3)`` of user index, dose, reward (the :class:`~.run.Arm` dose rows, pooled over
    recommenders)."""
    rows = np.asarray(rows, dtype=np.float64).reshape(-1, 3)
    users, x, y = rows[:, 0].astype(np.int64), rows[:, 1], rows[:, 2]
    slope = _slope(x, y)
    by_user = [np.flatnonzero(users == u) for u in range(n_users)]

    def resampled_slope(idx: np.ndarray) -> float:
        pick = np.concatenate([by_user[u] for u in idx])  # every step of each drawn user (users are the unit)
        return _slope(x[pick], y[pick])

    rng = np.random.default_rng(seed)
    boots = bootstrap_replicates(resampled_slope, n_users, rng, n_boot=n_boot if n_users > 1 else 0)
    low, high = percentile_interval(boots, 0.95)
    by_dose = {int(d): (float(y[x == d].mean()), int((x == d).sum())) for d in np.unique(x)}
    return DoseResponse(slope, float(low), float(high), by_dose)
