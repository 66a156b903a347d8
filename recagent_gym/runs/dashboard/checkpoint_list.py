"""The checkpoints under the dashboard's folder, by id ``run-NNN/round_NNNN``, for the page's list and for loading."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from recagent_gym.runs.dashboard.refusals import DashboardError, NotFound
from recagent_gym.runs.simulator import checkpoint as ckpt

CHECKPOINT_ID = re.compile(r"^(run-\d{3,})/(round_\d{4})$")


def list_checkpoints(root: Path, current: Path | None) -> list[dict[str, Any]]:
    """Every run's checkpoints in order; ``current``: the folder of the run now loaded."""
    current = current.resolve() if current is not None else None
    out = []
    for run in sorted(root.glob("run-*")):
        files = sorted((run / ckpt.CHECKPOINT_DIR).glob("round_*.json"))
        for path in files:
            out.append(
                {
                    "id": f"{run.name}/{path.stem}",
                    "run": run.name,
                    "round": int(path.stem.split("_")[1]),
                    "latest": path == files[-1],
                    "current_run": run.resolve() == current,
                }
            )
    return out


def checkpoint_file(root: Path, ident: str) -> Path:
    """The file of checkpoint ``ident``; refused when the id is malformed or names no checkpoint."""
    match = CHECKPOINT_ID.match(ident)
    if match is None:
        raise DashboardError(f"bad checkpoint id {ident!r}: expected 'run-NNN/round_NNNN' (see /api/checkpoints)")
    path = root / match.group(1) / ckpt.CHECKPOINT_DIR / f"{match.group(2)}.json"
    if not path.is_file():
        raise NotFound(f"no checkpoint {ident} in {root}")
    return path
