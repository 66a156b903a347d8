"""The files of :func:`~recagent_gym.llm.embedder.embed_texts_cached`: one ``.npz`` per list of texts and embedder.

Each file carries what made it (``made_by``: the embedder's name and store identity, and ``key``: the hash of the
texts that names the file) and is checked on read: its shape, its dtype, finite values and both marks. A file that
fails any check (cut, emptied, a pickle, another model's vectors, a legacy ``.npy``) is a miss: reported once,
deleted, and written again, atomically, once the vectors are recomputed. A folder that cannot be written costs the
cache, not the run (logged).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

SUFFIX = ".npz"


def resolve_folder(folder: str | Path) -> Path | None:
    """``folder`` as given when absolute; a relative one lies under the cache folder (``$RECAGENT_GYM_CACHE`` or
    ``~/.cache/recagent-gym``), never the working directory. None (logged) when the cache folder is unusable."""
    from recagent_gym.llm.model_files import optional_cache_dir

    folder = Path(folder).expanduser()
    if folder.is_absolute():
        return folder
    root = optional_cache_dir("item embeddings")
    return None if root is None else root / folder


def read(path: Path, made_by: str, key: str, rows: int) -> np.ndarray | None:
    """The vectors in ``path`` if it holds ``rows`` finite float32 rows made by ``made_by`` for ``key``; else None
    (a file that is there but fails a check is reported and deleted)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            vectors = data["vectors"]
            marks = (str(data["made_by"]), str(data["key"]))
    except Exception as exc:
        _drop(path, f"unreadable ({type(exc).__name__}: {exc})")
        return None
    if marks != (made_by, key):
        _drop(path, f"made by {marks[0]!r}, not {made_by!r}")
        return None
    if vectors.ndim != 2 or vectors.shape[0] != rows or vectors.dtype != np.float32:
        _drop(path, f"shape {vectors.shape} of {vectors.dtype} does not fit {rows} texts")
        return None
    if not np.isfinite(vectors).all():
        _drop(path, "non-finite values")
        return None
    log.debug("embeddings loaded from %s", path)
    return vectors


def write(path: Path, vectors: np.ndarray, made_by: str, key: str) -> None:
    """Keep ``vectors`` in ``path`` atomically (a crash never leaves a cut file); a failure is logged, not raised."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{SUFFIX}")  # one per process: writers never share it
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as handle:
            np.savez(handle, vectors=vectors, made_by=np.array(made_by), key=np.array(key))
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("could not keep the embeddings in %s (they are recomputed next run): %s", path, exc)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _drop(path: Path, why: str) -> None:
    log.warning("ignoring cached embeddings %s: %s; recomputing them", path, why)
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
