"""The decision logs: Parquet part files in one folder (``part-00000.parquet``, ...), one row per page decision.

Columns (see :func:`recagent_gym.users.distilled.harness.decision_row`): ``session_id user_id source page_index
page_source watched_count patience_before patience_left items shown permutation scores llm_scores
embedding_scores threshold p_watch action item position rating query fallback reward``; the per-item lists are
aligned with ``shown`` (the order the user saw after the agent's shuffle). ``collect.json`` beside them records how
they were made.
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
    _require_pyarrow()
    files = parts(folder)
    if not files:
        raise DistillError(f"{folder}: no decision logs (part-*.parquet); run 'recagent-gym users collect' first")
    return pd.concat([pd.read_parquet(f, columns=columns) for f in files], ignore_index=True)


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
    path = Path(folder) / META_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def write_meta(folder: str | Path, meta: dict[str, Any]) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
