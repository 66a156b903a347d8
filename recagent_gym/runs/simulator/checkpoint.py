"""Checkpoints: the simulation's complete state as plain JSON, written atomically at the end of every round.

A checkpoint holds the configuration (secrets redacted), the dataset's identity, the LLM response cache's path and
mode (a reference: the cache itself is never copied), and the state of every stateful part (agents' profiles and
memories, social graph, recommender, activation, clock, random generators, interactions, log offsets). It is
written to a temporary file and renamed over the target, so a killed process leaves the previous checkpoint whole.
Its long float arrays (embeddings, weights) live in one append-only file beside it, each stored once
(:mod:`.checkpoint_vectors`), so a round's checkpoint writes what changed rather than the whole state again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.errors import RecAgentError
from recagent_gym.runs.simulator.checkpoint_schema import validate_checkpoint
from recagent_gym.runs.simulator.checkpoint_vectors import VectorStore, expand_vectors
from recagent_gym.runs.simulator.files import atomic_write_text

FORMAT = "recagent-gym-simulation-checkpoint"
VERSION = 1
REQUIRED_KEYS: tuple[str, ...] = ("format", "version", "round", "config", "dataset", "llm_cache", "state")
CHECKPOINT_DIR = "checkpoints"
_NAME = re.compile(r"^round_(\d+)\.json$")


class CheckpointError(RecAgentError, ValueError):
    """A checkpoint is missing, unreadable, corrupt or does not fit the run; the message names the file."""

    label = "checkpoint error"


class _NotPlain(Exception):
    """Raised deep inside :func:`to_plain`; the path to the value is added as it unwinds (cheap when all is well)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []


def to_plain(value: Any, where: str = "state") -> Any:
    """``value`` as JSON-ready plain data (numpy scalars and arrays converted); anything else is an error.

    Dict keys must be strings: JSON would turn an int key into a string silently, and ``set_state`` would then
    meet a different key than ``get_state`` gave. The error names the path to the value (``state.a[3].b``).
    """
    try:
        return _plain(value)
    except _NotPlain as exc:
        raise CheckpointError(f"{where}{''.join(reversed(exc.path))}: {exc.message}") from None


_SCALARS = (str, bool, int, float, type(None))
_SCALAR_SET = frozenset(_SCALARS)


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int or kind is float:
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, list | tuple):
        if set(map(type, value)) <= _SCALAR_SET:  # the common case (ids, vectors): no recursion, no Python loop
            return list(value)
        out = []
        for i, v in enumerate(value):
            try:
                out.append(_plain(v))
            except _NotPlain as exc:
                exc.path.append(f"[{i}]")
                raise
        return out
    if isinstance(value, dict):
        plain = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise _NotPlain(f"key {key!r} is not a string; states must use string keys")
            try:
                plain[key] = _plain(v)
            except _NotPlain as exc:
                exc.path.append(f".{key}")
                raise
        return plain
    raise _NotPlain(f"{type(value).__name__} is not plain data (checkpoints never pickle objects)")


def checkpoint_path(folder: Path, round_index: int) -> Path:
    return folder / CHECKPOINT_DIR / f"round_{round_index:04d}.json"


def save_checkpoint(path: Path, payload: dict[str, Any], vectors: VectorStore | None = None) -> None:
    """Validate ``payload`` (plain data, required keys) and write it atomically to ``path``; with ``vectors`` (the
    store of ``path``'s folder), its float arrays go to the store's file, only those not stored before
    (:mod:`.checkpoint_vectors`)."""
    missing = [k for k in REQUIRED_KEYS if k not in payload]
    if missing:
        raise CheckpointError(f"{path}: checkpoint payload misses {missing}")
    plain = to_plain(payload, "checkpoint")
    if vectors is not None:
        plain = vectors.externalise(plain)
        vectors.sync()  # on disk before the checkpoint that names them
    # ``allow_nan`` stays on: NaN ratings are legitimate; JSON floats round-trip exactly (shortest repr).
    atomic_write_text(path, json.dumps(plain, separators=(",", ":")))


def find_latest(folder: Path) -> Path:
    """The checkpoint of the highest round in ``folder/checkpoints``."""
    directory = folder / CHECKPOINT_DIR
    found = (
        sorted((int(m.group(1)), p) for p in directory.glob("round_*.json") if (m := _NAME.match(p.name)) is not None)
        if directory.is_dir()
        else []
    )
    if not found:
        raise CheckpointError(f"no checkpoint in {directory}")
    return found[-1][1]


def resolve_checkpoint(spec: str | Path) -> Path:
    """A checkpoint file, or a run folder (its latest checkpoint)."""
    path = Path(spec)
    if path.is_dir():
        return find_latest(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    return path


def load_checkpoint(spec: str | Path) -> tuple[Path, dict[str, Any]]:
    """Read and validate a checkpoint (:mod:`.checkpoint_schema`); returns its path and payload."""
    path = resolve_checkpoint(spec)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"checkpoint {path} cannot be read: {exc}") from exc
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(
            f"checkpoint {path} is corrupt (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc
    if not isinstance(payload, dict):
        raise CheckpointError(f"checkpoint {path}: top level is {type(payload).__name__}, expected an object")
    try:
        payload = expand_vectors(payload, path.parent)
    except (ValueError, OSError) as exc:
        raise CheckpointError(f"checkpoint {path}: its vectors do not load ({exc})") from None
    if payload.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {path}: not a simulation checkpoint (format={payload.get('format')!r})")
    if payload.get("version") != VERSION:
        raise CheckpointError(f"checkpoint {path}: version {payload.get('version')!r}, this build reads {VERSION}")
    missing = [k for k in REQUIRED_KEYS if k not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {path} misses keys {missing}")
    try:
        validate_checkpoint(payload)  # every part the simulator reads, typed (checkpoint_schema.py)
    except ValueError as exc:
        raise CheckpointError(f"checkpoint {path}: {exc}") from None
    return path, payload
