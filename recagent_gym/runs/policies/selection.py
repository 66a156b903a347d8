"""Model selection on validation users: keep a learner at its best validation point, not at its last step.

``train.validation_users`` training users are set aside (:func:`validation_split`); the learners train on the rest.
At every learning-curve point the learner runs one session per validation user from their restored starting state,
and :class:`BestOnValidation` keeps a copy of its parameters when the mean return is the best so far (the earliest
point on ties); after training, :meth:`BestOnValidation.restore` puts them back. The held-out users choose nothing:
they are only evaluated, as before. PPO's held-out return can peak early and decay (``rl_distilled``, fitted RecSim
users); selection on users it did not train on is the standard remedy that does not look at the test users.
"""

from __future__ import annotations

import copy
import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from recagent_gym.settings_section import ConfigError


def validation_split(train_users: np.ndarray, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(users to train on, validation users): ``n`` of ``train_users`` drawn with ``seed``, both sorted."""
    users = np.asarray(train_users, dtype=np.int64)
    if n == 0:
        return users, users[:0]
    if n >= len(users):
        raise ConfigError(
            f"train.validation_users is {n} but there are only {len(users)} training users: leave some to train on"
        )
    order = np.random.default_rng(seed).permutation(users)
    return np.sort(order[n:]), np.sort(order[:n])


def parameters(model: Any) -> torch.nn.Module:
    """The network a learner acts with: a stable-baselines3 model's policy, or SlateQ's Q network."""
    for name in ("policy", "net"):
        net = getattr(model, name, None)
        if isinstance(net, torch.nn.Module):
            return net
    raise TypeError(f"{type(model).__name__} has no policy or net to select a checkpoint of")


class BestOnValidation:
    """``offer(model, step)`` evaluates on the validation users and keeps the best parameters; ``restore`` loads
    them back. ``evaluate(model) -> per-user returns``."""

    def __init__(self, evaluate: Callable[[Any], np.ndarray], n_users: int) -> None:
        self.evaluate, self.n_users = evaluate, n_users
        self.points: list[tuple[int, float]] = []
        self.best_step: int | None = None
        self.best_return = float("-inf")
        self._state: dict[str, torch.Tensor] | None = None

    def offer(self, model: Any, step: int) -> float:
        value = float(np.mean(self.evaluate(model)))
        self.points.append((int(step), value))
        if value > self.best_return:
            self.best_step, self.best_return = int(step), value
            self._state = copy.deepcopy(parameters(model).state_dict())
        return value

    def restore(self, model: Any) -> Any:
        """``model`` with the best point's parameters (unchanged when nothing was offered)."""
        if self._state is not None:
            parameters(model).load_state_dict(self._state)
        return model

    def summary(self) -> str:
        last_step, last = self.points[-1] if self.points else (0, float("nan"))
        return (
            f"kept step {self.best_step} (validation return {self.best_return:.3f} over {self.n_users} users; "
            f"last step {last_step}: {last:.3f})"
        )

    def write_csv(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["step", "validation_return", "n_users", "kept"])
            for step, value in self.points:
                writer.writerow([step, value, self.n_users, int(step == self.best_step)])
