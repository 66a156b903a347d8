"""Training callbacks: a plain progress line with the episode return, and held-out evaluation (learning curve).

:class:`ProgressLine` prints one line every ``every`` rollouts (PPO/A2C updates, DQN collection rounds) to the
stream given, so a run whose output goes to a file still shows how far it is and what return it reaches.
:class:`HeldOutEval` is SB3's ``EvalCallback`` for this project's protocol: every ``eval_every`` steps it runs the
current policy on held-out users (one session each, from their restored starting state) and records the mean
return with its 95% bootstrap interval; ``learning_curve.csv`` and ``learning_curve.png`` (mean with a band) are
written as it goes.
"""

from __future__ import annotations

import csv
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from recagent_gym.runs.policies.protocol import Interval, bootstrap_mean


class ProgressLine(BaseCallback):
    """``train step 512/2048 (25%) | episodes 80 | return (last 50) 1.234 +- 0.456 | 230 steps/s``.

    One line every ``every`` rollouts, and at least every ``every_s`` seconds while steps are slow.
    """

    def __init__(
        self, total_timesteps: int, *, every: int = 1, every_s: float = 30.0, stream: TextIO | None = None
    ) -> None:
        super().__init__()
        self.total, self.every, self.every_s = total_timesteps, max(every, 1), every_s
        self._last_line = 0.0
        self.stream = stream
        self.rollouts = 0
        self.episodes = 0
        self._start = time.perf_counter()
        self.lines: list[str] = []

    def _on_training_start(self) -> None:
        self._start = self._last_line = time.perf_counter()

    def _on_step(self) -> bool:
        dones = self.locals.get("dones")
        if dones is not None:
            self.episodes += int(np.sum(dones))
        # Slow steps (LLM users): a line every ``every_s`` seconds too, so a log file never looks stuck.
        if self.every_s > 0 and time.perf_counter() - self._last_line >= self.every_s:
            self.emit()
        return True

    def _on_rollout_end(self) -> None:
        self.rollouts += 1
        if self.rollouts % self.every == 0:
            self.emit()

    def _on_training_end(self) -> None:
        if self.rollouts % self.every != 0 or self.rollouts == 0:
            self.emit()

    def emit(self) -> None:
        steps = int(self.model.num_timesteps)
        returns = [float(info["r"]) for info in self.model.ep_info_buffer or []]
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        result = (
            f"return (last {len(returns)}) {np.mean(returns):.3f} +- {np.std(returns):.3f}"
            if returns
            else "return: no episode finished yet"
        )
        line = (
            f"train step {steps}/{self.total} ({100 * steps / max(self.total, 1):.0f}%) | "
            f"episodes {self.episodes} | {result} | {_rate(steps / elapsed)} steps/s"
        )
        self.lines.append(line)
        self._last_line = time.perf_counter()
        print(line, file=self.stream or sys.stdout, flush=True)


def _rate(value: float) -> str:
    """Steps per second readable both for RecSim users (thousands) and LLM users (a fraction of one)."""
    return f"{value:.0f}" if value >= 10 else f"{value:.2f}"


class HeldOutEval(BaseCallback):
    """Evaluate the current policy on held-out users every ``eval_every`` steps (see the module docstring).

    ``evaluate(model) -> per-user returns`` runs the sessions (it owns the env and the users); this callback
    only schedules it, bootstraps the interval and writes the curve.
    """

    def __init__(
        self,
        evaluate: Callable[[Any], np.ndarray],
        *,
        eval_every: int,
        output_dir: str | Path,
        n_boot: int = 2000,
        seed: int = 0,
        stream: TextIO | None = None,
        also: Callable[[Any, int], Any] | None = None,
    ) -> None:
        super().__init__()
        self.evaluate, self.eval_every = evaluate, eval_every
        self.also = also
        """Called with (model, step) at every point too (model selection on validation users)."""
        self.output_dir = Path(output_dir)
        self.n_boot, self.seed = n_boot, seed
        self.stream = stream
        self.points: list[tuple[int, Interval]] = []
        self.per_user: list[tuple[int, np.ndarray]] = []
        """The raw per-user returns of every point (to pool training seeds)."""
        self._next = 0

    def _on_training_start(self) -> None:
        self._next = 0
        self._evaluate_now()
        self._next = self.eval_every

    def _on_step(self) -> bool:
        if self.model.num_timesteps >= self._next:
            self._evaluate_now()
            self._next = self.model.num_timesteps + self.eval_every
        return True

    def _on_training_end(self) -> None:
        if not self.points or self.points[-1][0] != self.model.num_timesteps:
            self._evaluate_now()
        write_curve_plot({"policy": self.points}, self.output_dir / "learning_curve.png")

    def _evaluate_now(self) -> None:

        per_user = np.asarray(self.evaluate(self.model), dtype=np.float64)
        interval = bootstrap_mean(per_user, n_boot=self.n_boot, seed=self.seed + len(self.points))
        step = int(self.model.num_timesteps)
        self.points.append((step, interval))
        self.per_user.append((step, per_user))
        self.logger.record("eval/heldout_return", interval.mean)
        self.logger.record("eval/heldout_ci_low", interval.low)
        self.logger.record("eval/heldout_ci_high", interval.high)
        print(
            f"held-out step {step}: return {interval} over {interval.n} users",
            file=self.stream or sys.stdout,
            flush=True,
        )
        write_curve_csv(self.points, self.output_dir / "learning_curve.csv")
        if self.also is not None:
            self.also(self.model, step)


def write_curve_csv(points: list[tuple[int, Interval]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["step", "mean_return", "ci_low", "ci_high", "n_users"])
        for step, interval in points:
            writer.writerow([step, interval.mean, interval.low, interval.high, interval.n])


def read_curve_csv(path: Path) -> list[tuple[int, Interval]]:
    with path.open(encoding="utf-8") as handle:
        return [
            (
                int(row["step"]),
                Interval(float(row["mean_return"]), float(row["ci_low"]), float(row["ci_high"]), int(row["n_users"])),
            )
            for row in csv.DictReader(handle)
        ]


def write_curve_plot(
    curves: dict[str, list[tuple[int, Interval]]],
    path: Path,
    title: str = "",
    validation: dict[str, tuple[list[tuple[int, float]], list[tuple[int, float]]]] | None = None,
) -> Path:
    """Held-out return against training steps, one line per curve with its 95% band; with ``validation`` (per
    curve: its validation return per step, and the points kept), those dashed in the same colour, the kept points
    starred: what chose the learner, beside what it did on the held-out users."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, points in curves.items():
        if not points:
            continue
        steps = np.array([p[0] for p in points])
        means = np.array([p[1].mean for p in points])
        lows = np.array([p[1].low for p in points])
        highs = np.array([p[1].high for p in points])
        (line,) = ax.plot(steps, means, marker="o", markersize=3, label=name)
        ax.fill_between(steps, lows, highs, alpha=0.2, color=line.get_color())
        val, kept = (validation or {}).get(name, ([], []))
        if val:
            ax.plot(*zip(*val, strict=True), linestyle="--", linewidth=1, color=line.get_color(),
                    label=f"{name}, validation")  # fmt: skip
        if kept:
            ax.plot(*zip(*kept, strict=True), linestyle="none", marker="*", markersize=11, color=line.get_color())
    ax.set_xlabel("training steps")
    ax.set_ylabel("held-out return per session (95% CI)")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
