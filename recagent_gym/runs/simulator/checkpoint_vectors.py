"""The long runs of numbers in a checkpoint (memory embeddings, the recommender's weights), kept in one append-only
binary file beside the checkpoints instead of being written into every round's JSON.

Most of a checkpoint's bytes are such numbers, and most of them do not change from one round to the next: a memory
record's embedding is fixed once stored, the MF weights change only when it retrains. :class:`VectorStore` takes the
plain payload, replaces every list of at least :data:`MIN_VALUES` floats (and every list of equal-length float
lists: a matrix) by a reference ``{"$vectors": [offset, *shape]}`` into ``checkpoints/vectors.f64`` (little-endian
float64: every float, float32-born or not, round-trips exactly), and appends only the arrays it has not stored
before (a content hash recognises them). A round therefore appends its new records' vectors, not the whole state.

Crash safety: the file is appended and synced before the checkpoint that refers to it is written (atomically), so a
checkpoint never refers to bytes that are not on disk; a torn tail after a kill is never referred to and is cut
before the next append. :func:`expand_vectors` puts the lists back when a checkpoint is read, so everything after
:func:`~.checkpoint.load_checkpoint` (the schema check, ``set_state``) sees the same payload as before; checkpoints
written with the lists inline load as they are.
"""

from __future__ import annotations

import hashlib
import os
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

MARK = "$vectors"
FILE_NAME = "vectors.f64"
MIN_VALUES = 16
"""Shorter float lists stay inline (a reference costs about as much as a few numbers)."""
_DTYPE = np.dtype("<f8")


class VectorStore:
    """Moves a checkpoint payload's float arrays into ``<folder>/vectors.f64`` (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / FILE_NAME
        self._known: dict[bytes, int] = {}
        """Content hash (with shape) -> offset in values of every array this process has appended."""
        self._end: int | None = None
        self._new: list[np.ndarray] = []
        self.appended = 0
        """Values appended by this store so far."""

    def externalise(self, plain: Any) -> Any:
        """``plain`` with its float arrays replaced by references; new arrays wait for :meth:`sync`."""
        if self._end is None:
            self._end = self._valid_size()
        return self._walk(plain)

    def sync(self) -> None:
        """Append the new arrays and flush them to disk (before the checkpoint naming them is written)."""
        if not self._new:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = np.concatenate(self._new).astype(_DTYPE, copy=False).tobytes()
        with self.path.open("ab") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        self.appended += sum(len(a) for a in self._new)
        self._new = []

    def _valid_size(self) -> int:
        """Values in the file; a torn tail (a write cut by a kill: never referred to) is cut off first."""
        if not self.path.exists():
            return 0
        size = self.path.stat().st_size
        whole = size - size % _DTYPE.itemsize
        if whole != size:
            with self.path.open("r+b") as handle:
                handle.truncate(whole)
        return whole // _DTYPE.itemsize

    def _walk(self, value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            return {k: self._walk(v) for k, v in value.items()}
        if kind is list:
            shape = _float_shape(value)
            if shape is not None:
                return {MARK: [self._offset(value, shape), *shape]}
            return [self._walk(v) for v in value]
        return value

    def _offset(self, value: list[Any], shape: tuple[int, ...]) -> int:
        flat = np.asarray(list(chain.from_iterable(value)) if len(shape) == 2 else value, dtype=_DTYPE)
        key = hashlib.blake2b(flat.tobytes(), digest_size=16).digest() + repr(shape).encode()
        found = self._known.get(key)
        if found is not None:
            return found
        assert self._end is not None
        offset = self._end
        self._known[key] = offset
        self._new.append(flat)
        self._end += len(flat)
        return offset


def _float_shape(value: list[Any]) -> tuple[int, ...] | None:
    """``(n,)`` for a list of at least :data:`MIN_VALUES` floats, ``(rows, cols)`` for a list of equal-length float
    lists holding that many; None for anything else (it stays as it is)."""
    if not value:
        return None
    types = set(map(type, value))
    if types == {float}:
        return (len(value),) if len(value) >= MIN_VALUES else None
    if types == {list}:
        lengths = set(map(len, value))
        if len(lengths) != 1:
            return None
        cols = lengths.pop()
        if cols == 0 or cols * len(value) < MIN_VALUES or set(map(type, chain.from_iterable(value))) != {float}:
            return None
        return (len(value), cols)
    return None


def expand_vectors(payload: Any, folder: Path) -> Any:
    """``payload`` with every reference replaced by its list again (read from ``<folder>/vectors.f64``); a payload
    without references is returned as it is. Raises ValueError for a reference the file cannot satisfy."""
    path = Path(folder) / FILE_NAME
    values: list[np.ndarray] = []

    def data() -> np.ndarray:
        if not values:
            if not path.is_file():
                raise ValueError(f"it refers to {path}, which is missing")
            values.append(np.fromfile(path, dtype=_DTYPE))
        return values[0]

    def walk(value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            if MARK in value and len(value) == 1:
                return _read(value[MARK], data(), path)
            return {k: walk(v) for k, v in value.items()}
        if kind is list:
            return [walk(v) for v in value]
        return value

    return walk(payload)


def _read(ref: Any, values: np.ndarray, path: Path) -> list[Any]:
    if not isinstance(ref, list) or not 2 <= len(ref) <= 3 or not all(type(x) is int and x >= 0 for x in ref):
        raise ValueError(f"malformed vector reference {ref!r}")
    offset, *shape = ref
    count = int(np.prod(shape))
    if offset + count > len(values):
        raise ValueError(f"a vector reference reaches value {offset + count} but {path} holds {len(values)}")
    return values[offset : offset + count].reshape(shape).tolist()
