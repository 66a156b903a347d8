"""Who comes next: the paper's activation methods, with per-agent activity levels drawn once.

The one activation module of the package: the simulator draws the agents active in a round
(:meth:`Activation.draw`), the env faces draw the user of the next session (:func:`session_weights`,
:func:`draw_user`). Methods (``activation``):

* ``pareto``: each agent's activity level ``x`` follows the classical Pareto distribution
  ``p(x) = alpha x_min^alpha / x^(alpha+1)`` (``x >= x_min``), and an agent is active in a round with probability
  ``min(1, x)``. ``alpha``/``x_min`` come from ``pareto_alpha``/``pareto_x_min``; with ``fit_activity`` the shape
  ``alpha`` is instead the maximum-likelihood fit to the dataset's per-user interaction counts
  (:func:`fit_pareto`), and the drawn levels are handed out in the rank order of those counts, so the users most
  active in the data are the most active agents. ``x_min`` stays ``pareto_x_min`` either way: interaction counts
  and per-round probabilities have different units, only the shape carries over.
* ``uniform``: every agent is active with probability ``active_prob``.
* ``marginal``: an agent's probability is its *marginal share* of the dataset's interactions among the agents,
  scaled so that ``active_prob * n_agents`` agents are expected per round: ``min(1, active_prob * n * c_u / sum c)``.

When more than ``active_threshold`` agents are drawn, a uniformly drawn subset of that size is kept. All draws use
the generator passed in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

log = logging.getLogger(__name__)


def fit_pareto(samples: np.ndarray, x_min: float | None = None) -> tuple[float, float]:
    """Maximum-likelihood ``(alpha, x_min)`` of a classical Pareto: ``alpha = n / sum(log(x / x_min))``.

    ``x_min`` defaults to the smallest sample (its MLE); with ``x_min`` given, samples below it are ignored.
    """
    x = np.asarray(samples, dtype=np.float64).reshape(-1)
    x = x[np.isfinite(x) & (x > 0)]
    if x_min is None:
        if len(x) == 0:
            raise ValueError("fit_pareto needs at least one positive sample")
        x_min = float(x.min())
    x = x[x >= x_min]
    logs = np.log(x / x_min)
    if len(x) < 2 or float(logs.sum()) <= 0.0:
        raise ValueError(f"fit_pareto needs at least two samples above x_min={x_min} that are not all equal")
    return float(len(x) / logs.sum()), float(x_min)


def pareto_levels(n: int, alpha: float, x_min: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of the classical Pareto (numpy's ``pareto`` is the Lomax form: ``x_min * (1 + X)`` shifts it)."""
    return x_min * (1.0 + rng.pareto(alpha, size=n))


def pareto_cdf(x: np.ndarray, alpha: float, x_min: float) -> np.ndarray:
    """``P(X <= x) = 1 - (x_min / x)^alpha`` for ``x >= x_min`` (0 below)."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x < x_min, 0.0, 1.0 - (x_min / np.maximum(x, x_min)) ** alpha)


class ActivationSettings(Protocol):
    """The settings :meth:`Activation.build` reads (``SimulationConfig`` has them; see :class:`Settings`)."""

    activation: str
    active_prob: float
    active_threshold: int
    pareto_alpha: float
    pareto_x_min: float
    fit_activity: bool


@dataclass(frozen=True)
class Settings:
    """Plain :class:`ActivationSettings` (defaults as ``SimulationConfig``'s)."""

    activation: str = "pareto"
    active_prob: float = 0.5
    active_threshold: int = 1000
    pareto_alpha: float = 1.5
    pareto_x_min: float = 0.1
    fit_activity: bool = True


@dataclass
class Activation:
    """Per-agent activation probabilities of one run (fixed after construction) and the round draw."""

    method: str
    probabilities: np.ndarray
    """``(n_agents,)`` chance of each agent being active in a round."""
    threshold: int
    alpha: float | None = None
    x_min: float | None = None
    levels: np.ndarray | None = None
    """The Pareto activity levels (``pareto`` only)."""

    @classmethod
    def build(
        cls,
        config: ActivationSettings,
        agent_counts: np.ndarray,
        rng: np.random.Generator,
        dataset_counts: np.ndarray | None = None,
    ) -> Activation:
        """Probabilities for agents whose dataset interaction counts are ``agent_counts``.

        ``dataset_counts`` (every user's count; defaults to ``agent_counts``) is what ``fit_activity`` fits.
        """
        counts = np.asarray(agent_counts, dtype=np.float64)
        n = len(counts)
        if n == 0:
            raise ValueError("no agents to activate")
        if config.activation == "uniform":
            return cls("uniform", np.full(n, config.active_prob), config.active_threshold)
        if config.activation == "marginal":
            total = float(counts.sum())
            share = counts / total if total > 0 else np.full(n, 1.0 / n)
            probs = np.minimum(1.0, config.active_prob * n * share)
            return cls("marginal", probs, config.active_threshold)
        alpha, x_min = config.pareto_alpha, config.pareto_x_min
        if config.fit_activity:
            try:
                alpha, _ = fit_pareto(counts if dataset_counts is None else dataset_counts)
            except ValueError as err:  # e.g. one agent, or all counts equal: nothing to fit
                log.warning("activity not fitted (%s); using pareto_alpha=%s", err, config.pareto_alpha)
        levels = pareto_levels(n, alpha, x_min, rng)
        if config.fit_activity:
            ranked = np.empty(n)
            ranked[np.argsort(-counts, kind="stable")] = np.sort(levels)[::-1]
            levels = ranked
        return cls("pareto", np.minimum(1.0, levels), config.active_threshold, alpha, x_min, levels)

    def draw(self, rng: np.random.Generator, force: tuple[int, ...] = ()) -> np.ndarray:
        """Sorted indices (into the agent list) of the agents active this round; ``force`` ones always are."""
        active = np.flatnonzero(rng.random(len(self.probabilities)) < self.probabilities)
        forced = np.asarray(sorted(set(force)), dtype=np.int64)
        rest = np.setdiff1d(active, forced)
        room = max(0, self.threshold - len(forced))
        if len(rest) > room:
            rest = rng.choice(rest, size=room, replace=False)
        return np.sort(np.concatenate([forced, rest]).astype(np.int64))

    @property
    def expected_active(self) -> float:
        return float(min(self.probabilities.sum(), self.threshold))

    def get_state(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "probabilities": self.probabilities.tolist(),
            "threshold": self.threshold,
            "alpha": self.alpha,
            "x_min": self.x_min,
            "levels": None if self.levels is None else self.levels.tolist(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Activation:
        levels = state.get("levels")
        return cls(
            method=str(state["method"]),
            probabilities=np.asarray(state["probabilities"], dtype=np.float64),
            threshold=int(state["threshold"]),
            alpha=state.get("alpha"),
            x_min=state.get("x_min"),
            levels=None if levels is None else np.asarray(levels, dtype=np.float64),
        )


def session_weights(settings: ActivationSettings, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Normalised probability of each user starting the next session (``counts``: dataset interactions per user).

    ``pareto``: the user's Pareto activity level (drawn once, fitted to and ranked by ``counts`` with
    ``fit_activity``); ``uniform``: all users alike; ``marginal``: proportional to the user's share of ``counts``.
    """
    n = len(counts)
    if n == 0:
        raise ValueError("no users to activate")
    if settings.activation not in ("pareto", "uniform", "marginal"):
        raise ValueError(f"unknown activation method {settings.activation!r}; expected pareto, uniform or marginal")
    activation = Activation.build(settings, np.asarray(counts, dtype=np.float64) + 1.0, rng)
    # Pareto levels, not the per-round probabilities min(1, level): the cap would flatten the heavy tail.
    weights = activation.levels if activation.levels is not None else activation.probabilities
    return weights / weights.sum()


def draw_user(cumulative: np.ndarray, rng: np.random.Generator, busy: frozenset[int] = frozenset()) -> tuple[int, int]:
    """A user drawn by the cumulative activation weights, never one busy elsewhere; returns ``(user, redraws)``.

    One draw from all users; if it lands on a busy user, one draw from the free users' weights (``redraws`` = 1).
    Both together give exactly the conditional distribution of the free users (as redrawing until free does), in
    two draws: heavy-tailed activity puts most of the weight on a few users, and redrawing until free took ten
    draws on average with 16 sub-envs on the bundled data. Free users with no weight at all are drawn uniformly.
    Raises when every user is busy.
    """
    n = len(cumulative)
    if len(busy) >= n:
        raise ValueError(f"all {n} users are in a session already: use fewer sub-envs than users")
    user = min(int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right")), n - 1)
    if user not in busy:
        return user, 0
    weights = np.diff(cumulative, prepend=0.0)
    weights[np.fromiter(busy, dtype=np.int64, count=len(busy))] = 0.0
    free_cumulative = np.cumsum(weights)
    if free_cumulative[-1] <= 0.0:
        free = np.setdiff1d(np.arange(n), np.fromiter(busy, dtype=np.int64, count=len(busy)))
        return int(free[min(int(rng.random() * len(free)), len(free) - 1)]), 1
    return min(int(np.searchsorted(free_cumulative, rng.random() * free_cumulative[-1], side="right")), n - 1), 1
