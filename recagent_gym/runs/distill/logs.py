"""The decision logs: Parquet part files in one folder (``part-00000.parquet``, ...), one row per page decision.

Columns (see :func:`recagent_gym.runs.distill.sessions.decision_row`): ``session_id user_id source page_index
page_source watched_count patience_before patience_left items shown permutation scores llm_scores
embedding_scores threshold p_watch action item position rating query fallback reward``; the per-item lists are
aligned with ``shown`` (the order the user saw after the agent's shuffle). ``collect.json`` beside them records how
they were made. Both are checked where they are read (:mod:`~recagent_gym.runs.distill.log_schema`): a damaged
or foreign file is a one-line :class:`~recagent_gym.users.distilled.errors.DistillError` naming it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd

from recagent_gym.users.distilled.errors import DistillError

META_FILE = "collect.json"


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise DistillError("decision logs are Parquet files: install pyarrow (pip install pyarrow)") from exc


def parts(folder: str | Path) -> list[Path]:
    return sorted(Path(folder).glob("part-*.parquet"))


def write_part(folder: str | Path, rows: list[dict[str, Any]]) -> Path:
    """Append ``rows`` as the next part file (written to a temporary name, then renamed: never half a file)."""
    _require_pyarrow()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    existing = parts(folder)
    index = int(existing[-1].stem.split("-")[1]) + 1 if existing else 0
    path = folder / f"part-{index:05d}.parquet"
    tmp = path.with_suffix(".tmp")
    pd.DataFrame(rows).to_parquet(tmp, index=False)
    tmp.replace(path)
    return path


def read_logs(folder: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    """Every part, each checked against the log schema (see :func:`.log_schema.read_part`), as one frame."""
    _require_pyarrow()
    from recagent_gym.runs.distill.log_schema import read_part

    files = parts(folder)
    if not files:
        raise DistillError(f"{folder}: no decision logs (part-*.parquet); run 'recagent-gym users collect' first")
    tables = [read_part(f) for f in files]
    frames = [t.select(columns).to_pandas() if columns else t.to_pandas() for t in tables]
    return pd.concat(frames, ignore_index=True)


def check_ids(frame: pd.DataFrame, folder: str | Path, n_users: int, n_items: int, dataset: str) -> None:
    """Every user and shown item of the logs is one of the dataset's (the readers index tables with them)."""
    if frame.empty:
        return
    items = max((int(max(s)) for s in frame["shown"] if len(s)), default=-1)
    items = max(items, int(frame["item"].max()), max((int(max(s)) for s in frame["items"] if len(s)), default=-1))
    if int(frame["user_id"].max()) >= n_users or items >= n_items:
        raise DistillError(
            f"{folder}: user or item ids beyond dataset {dataset!r} ({n_users} users, {n_items} items); "
            "were these logs collected on another dataset?"
        )


def done_sessions(folder: str | Path) -> set[int]:
    if not parts(folder):
        return set()
    return {int(s) for s in read_logs(folder, ["session_id"])["session_id"].unique()}


def logs_hash(folder: str | Path) -> str:
    """SHA-256 over the part files' names and bytes (the artefact records which logs it was trained on)."""
    digest = hashlib.sha256()
    for path in parts(folder):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def read_meta(folder: str | Path) -> dict[str, Any]:
    """``collect.json`` checked (:func:`.log_schema.read_meta_file`); empty when the folder has none yet."""
    from recagent_gym.runs.distill.log_schema import read_meta_file

    path = Path(folder) / META_FILE
    return read_meta_file(path) if path.exists() else {}


def write_meta(folder: str | Path, meta: dict[str, Any]) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
