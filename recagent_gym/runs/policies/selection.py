"""Model selection on validation users: keep a learner at its best validation point, not at its last step.

``train.validation_users`` training users are set aside (:func:`validation_split`); the learners train on the rest.
At every learning-curve point the learner plays each validation user's first session ``train.validation_repeats``
times from the user's restored starting state (the same seeds at every point), and :class:`BestOnValidation` keeps a
copy of its parameters when the point's score is the best so far (the earliest point on ties). The score is the mean
validation return of the ``train.selection_window`` points centred on it (fewer at the ends of the curve). On
``rl_recsim``'s development seeds neither replays nor windows kept better points than the single best point did
(docs/training.md), so the shipped configs keep 1 and 1. After training, :meth:`BestOnValidation.restore` puts the
kept parameters back. The held-out users choose nothing: they are only evaluated, as before. PPO's held-out return
can peak early and decay (``rl_distilled``, fitted RecSim users); selection on users it did not train on is the
standard remedy that does not look at the test users.
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
    them back. ``evaluate(model) -> per-user returns``; ``window`` (odd): the points each point's score averages."""

    def __init__(self, evaluate: Callable[[Any], np.ndarray], n_users: int, window: int = 1) -> None:
        if window < 1 or window % 2 == 0:
            raise ConfigError(f"train.selection_window must be an odd number >= 1 (centred on a point), not {window}")
        self.evaluate, self.n_users, self.window = evaluate, n_users, window
        self.points: list[tuple[int, float]] = []
        self.scores: dict[int, float] = {}  # point index -> mean over its window, once the window is complete
        self.best_step: int | None = None
        self.best_return = float("-inf")  # the kept point's score
        self._state: dict[str, torch.Tensor] | None = None
        self._pending: dict[int, dict[str, torch.Tensor]] = {}  # parameters of points still waiting for their window

    def offer(self, model: Any, step: int) -> float:
        value = float(np.mean(self.evaluate(model)))
        self.points.append((int(step), value))
        self._pending[len(self.points) - 1] = copy.deepcopy(parameters(model).state_dict())
        self._settle(len(self.points) - 1 - self.window // 2)
        return value

    def _settle(self, last: int) -> None:
        """Score the pending points up to index ``last`` (their windows are complete, or the curve has ended)."""
        half = self.window // 2
        for index in sorted(i for i in self._pending if i <= last):
            state = self._pending.pop(index)
            values = [v for _, v in self.points[max(0, index - half) : index + half + 1]]
            self.scores[index] = score = float(np.mean(values))
            if score > self.best_return:
                self.best_step, self.best_return, self._state = self.points[index][0], score, state

    def restore(self, model: Any) -> Any:
        """``model`` with the best point's parameters (unchanged when nothing was offered)."""
        self._settle(len(self.points) - 1)
        if self._state is not None:
            parameters(model).load_state_dict(self._state)
        return model

    def summary(self) -> str:
        self._settle(len(self.points) - 1)
        last_step, last = self.points[-1] if self.points else (0, float("nan"))
        over = "" if self.window == 1 else f", the mean of the {self.window} points around it"
        return (
            f"kept step {self.best_step} (validation return {self.best_return:.3f}{over}, over {self.n_users} users; "
            f"last step {last_step}: {last:.3f})"
        )

    def write_csv(self, path: Path) -> None:
        """One row per point: its validation return, its selection score (the window's mean) and whether it is kept."""
        self._settle(len(self.points) - 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["step", "validation_return", "selection_score", "n_users", "kept"])
            for index, (step, value) in enumerate(self.points):
                kept = int(step == self.best_step)
                writer.writerow([step, value, self.scores.get(index, value), self.n_users, kept])
