"""Reading the validation curves that model selection writes (``<learner>_<seed>/validation.csv``, one per trained
learner and seed: :meth:`~recagent_gym.runs.policies.selection.BestOnValidation.write_csv`). Without torch, so
``evaluate sim2real`` reads them without loading it."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np

Points = list[tuple[int, float]]
"""(training step, validation return) pairs."""


def validation_curves(out: Path, names: list[str]) -> dict[str, tuple[Points, Points]]:
    """Per learner, from its seeds' ``<name>_<seed>/validation.csv``: the validation return per step (mean over the
    seeds that scored it) and every seed's kept point (step, its validation return)."""
    found: dict[str, tuple[Points, Points]] = {}
    for name in names:
        by_step: dict[int, list[float]] = {}
        kept: Points = []
        for path in sorted(out.glob(f"{name}_*/validation.csv")):
            if not re.fullmatch(rf"{re.escape(name)}_\d+", path.parent.name):  # bc_* also finds bc_ppo_0
                continue
            with path.open(encoding="utf-8") as handle:
                for row in csv.DictReader(handle):
                    step, value = int(row["step"]), float(row["validation_return"])
                    by_step.setdefault(step, []).append(value)
                    if int(row["kept"]):
                        kept.append((step, value))
        if by_step:
            found[name] = ([(step, float(np.mean(v))) for step, v in sorted(by_step.items())], kept)
    return found
