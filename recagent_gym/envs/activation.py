"""Which user's session comes next: the paper's activation methods, drawn from the env's generator."""

from __future__ import annotations

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.simulator.activation import Activation
from recagent_gym.simulator.config import SimulationConfig


def activation_weights(
    method: str, dataset: Dataset, rng: np.random.Generator, sim: SimulationConfig | None = None
) -> np.ndarray:
    """Normalised probability of each user starting the next session, by the simulator's activation methods.

    ``pareto``: the user's Pareto activity level (:class:`~recagent_gym.simulator.activation.Activation`: drawn
    once, fitted to and ranked by the dataset's interaction counts with ``fit_activity``); ``uniform``: all users
    alike; ``marginal``: proportional to the user's share of the dataset's interactions.
    """
    n = dataset.n_users
    if n == 0:
        raise ValueError(f"{dataset.name}: no users to activate")
    if method not in ("pareto", "uniform", "marginal"):
        raise ValueError(f"unknown activation method {method!r}; expected pareto, uniform or marginal")
    sim = (sim or SimulationConfig()).model_copy(update={"activation": method, "active_prob": 1.0 / n})
    counts = np.bincount(dataset.interactions["user_id"].to_numpy(), minlength=n).astype(np.float64) + 1.0
    activation = Activation.build(sim, counts, rng)
    # Pareto levels, not the per-round probabilities min(1, level): the cap would flatten the heavy tail.
    weights = activation.levels if activation.levels is not None else activation.probabilities
    return weights / weights.sum()


def draw_user(cumulative: np.ndarray, rng: np.random.Generator, busy: frozenset[int] = frozenset()) -> tuple[int, int]:
    """A user drawn by the cumulative activation weights, never one busy elsewhere; returns ``(user, redraws)``.

    A busy user is redrawn a few times; if the weight is concentrated on busy users (heavy-tailed activity and many
    sub-envs), the draw is made from the weights of the free users only. Raises when every user is busy.
    """
    n = len(cumulative)
    if len(busy) >= n:
        raise ValueError(f"all {n} users are in a session already: use fewer sub-envs than users")
    redraws = 0
    while redraws < 16:
        user = min(int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right")), n - 1)
        if user not in busy:
            return user, redraws
        redraws += 1
    weights = np.diff(cumulative, prepend=0.0)
    free = np.setdiff1d(np.arange(n), np.fromiter(busy, dtype=np.int64, count=len(busy)))
    p = weights[free]
    p = p / p.sum() if p.sum() > 0 else np.full(len(free), 1.0 / len(free))
    return int(rng.choice(free, p=p)), redraws
