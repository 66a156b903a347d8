"""Text embeddings kept on disk across runs, so a model embeds each text once per machine.

A catalogue's item texts are the same in every run, and embedding one with all-MiniLM-L6-v2 on one CPU thread takes
about 6-11 ms: the LLM agents' embedding relevance re-embedded every item they met in every run, which was most of
a RecAgent-v1 step's CPU. :class:`VectorStore` keeps ``text -> vector`` in a folder per embedder model (its
:func:`store_identity`), as append-only segment files:

- a call that embedded new texts writes one small ``seg-<pid>-<ns>.npz`` (the new rows only), atomically, so a
  crash loses at most that call's rows and parallel processes never write the same file;
- loading reads every segment; beyond :data:`MAX_SEGMENTS` they are merged into one;
- each segment records the identity of the embedder that made it (``made_by``) and is checked on read: a segment
  that cannot be read (cut, emptied, not an ``.npz``, non-finite vectors) or that another embedder made (another
  identity, none recorded, another width) is a miss: reported once, deleted, and its texts embedded again and
  written as a new segment. A damaged store heals in one run instead of failing every later one.

Stored vectors are the embedder's own: :class:`~recagent_gym.llm.embedder.SentenceEmbedder` gives a text the same
vector bitwise whatever it is batched with, so a stored vector equals a recomputed one. Only embedders that declare a
``store_identity`` (a model, with the library versions that compute it) are stored; a cheap stand-in such as the
tests' hashing embedder has none and is simply recomputed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

MAX_SEGMENTS = 64
"""Segments beyond which loading merges them into one file."""

KEY_BYTES = 16


def text_key(text: str) -> bytes:
    """The stored key of a text: the first 16 bytes of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).digest()[:KEY_BYTES]


def store_identity(embedder: Any) -> str | None:
    """The embedder's ``store_identity`` (through wrappers' ``inner``), or None: not stored on disk (an embedder
    without one, or whose identity is None)."""
    while embedder is not None:
        if getattr(type(embedder), "store_identity", None) is not None:
            identity = embedder.store_identity
            return None if identity is None else str(identity)
        embedder = getattr(embedder, "inner", None)
    return None


def stored(embedder: Any, root: str | Path | None = None) -> Any:
    """``embedder`` reading and adding its vectors through its store (:class:`StoredEmbedder`), or ``embedder``
    itself when it declares no identity."""
    store = store_for(embedder, root)
    return embedder if store is None else StoredEmbedder(embedder, store)


class StoredEmbedder:
    """An embedder whose texts are looked up in a :class:`VectorStore` first; the rest go to ``inner`` in one call
    and are added to the store. Vectors are ``inner``'s own (read back bitwise)."""

    def __init__(self, inner: Any, store: VectorStore) -> None:
        self.inner = inner
        self.store = store

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    @property
    def name(self) -> str:
        return str(getattr(self.inner, "name", type(self.inner).__name__))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        found = self.store.lookup(texts)
        todo = [k for k, vector in enumerate(found) if vector is None]
        if todo:
            vectors = np.asarray(self.inner([texts[k] for k in todo]), dtype=np.float32)
            if vectors.shape[0] != len(todo):
                raise ValueError(f"embedder returned {vectors.shape[0]} rows for {len(todo)} texts")
            self.store.add([texts[k] for k in todo], vectors)
            for k, vector in zip(todo, vectors, strict=True):
                found[k] = vector
        if not found:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack(found)  # type: ignore[arg-type]


def store_for(embedder: Any, root: str | Path | None = None) -> VectorStore | None:
    """The store of ``embedder``'s vectors under ``root`` (default: ``<cache dir>/text-vectors``), or None when the
    embedder declares no identity."""
    identity = store_identity(embedder)
    if identity is None:
        return None
    if root is None:
        from recagent_gym.llm.model_files import optional_cache_dir

        base = optional_cache_dir("text vectors")  # an unusable cache folder: recomputed, logged once
        if base is None:
            return None
        root = base / "text-vectors"
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in identity)
    return VectorStore(Path(root) / safe, identity=identity)


class VectorStore:
    """``text -> float32 vector`` on disk in ``folder`` (read on first use); with ``identity``, segments are
    written with it and segments made by anything else are dropped on read."""

    def __init__(self, folder: str | Path, identity: str | None = None) -> None:
        self.folder = Path(folder)
        self.identity = identity
        self._vectors: dict[bytes, np.ndarray] | None = None
        self.hits = 0
        self.added = 0

    def __len__(self) -> int:
        return len(self._loaded())

    def lookup(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """Each text's stored vector, or None."""
        vectors = self._loaded()
        found = [vectors.get(text_key(t)) for t in texts]
        self.hits += sum(v is not None for v in found)
        return found

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Keep ``vectors`` (one row per text) and write them as one new segment."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(f"{vectors.shape} vectors for {len(texts)} texts")
        if not texts:
            return
        keys = np.frombuffer(b"".join(text_key(t) for t in texts), dtype=np.uint8).reshape(-1, KEY_BYTES)
        stored = self._loaded()
        for key, row in zip(keys, vectors, strict=True):
            stored[key.tobytes()] = row
        self.added += len(texts)
        try:
            self._write(keys, vectors, f"seg-{os.getpid()}-{time.time_ns()}")
        except OSError as exc:  # a read-only or full disk costs recomputation next run, not this run
            log.warning("could not keep %d text vectors in %s: %s", len(texts), self.folder, exc)

    def _write(self, keys: np.ndarray, vectors: np.ndarray, stem: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{stem}.tmp.npz"
        made_by = {} if self.identity is None else {"made_by": np.array(self.identity)}
        arrays: dict[str, Any] = {"keys": keys, "vectors": vectors, **made_by}
        np.savez(tmp, **arrays)
        os.replace(tmp, self.folder / f"{stem}.npz")

    def _loaded(self) -> dict[bytes, np.ndarray]:
        if self._vectors is None:
            self._vectors = {}
            segments = sorted(self.folder.glob("seg-*.npz")) if self.folder.is_dir() else []
            for path in segments:
                self._read(path)
            if len(segments) > MAX_SEGMENTS:
                self._merge(segments)
        return self._vectors

    def _read(self, path: Path) -> None:
        assert self._vectors is not None
        try:
            with np.load(path, allow_pickle=False) as data:
                keys, vectors = data["keys"], data["vectors"]
                made_by = str(data["made_by"]) if "made_by" in data.files else None
            if keys.ndim != 2 or keys.shape[1] != KEY_BYTES or vectors.ndim != 2 or len(keys) != len(vectors):
                raise ValueError(f"keys {keys.shape}, vectors {vectors.shape}")
            if keys.dtype != np.uint8 or vectors.dtype.kind != "f" or not np.isfinite(vectors).all():
                raise ValueError(f"keys of {keys.dtype}, vectors of {vectors.dtype} (finite floats expected)")
        except FileNotFoundError:  # merged away by another process meanwhile: its rows are in the merged file
            return
        except Exception as exc:
            self._drop(path, f"skipping unreadable text-vector segment {path} (its texts are embedded again): {exc}")
            return
        if self.identity is not None and made_by != self.identity:
            self._drop(path, f"skipping foreign text-vector segment {path}: made by {made_by or 'an unnamed embedder'}"
                             f", not {self.identity} (its texts are embedded again)")  # fmt: skip
            return
        widths = {len(v) for v in self._vectors.values()} | {vectors.shape[1]}
        if len(widths) > 1:
            self._drop(path, f"skipping text-vector segment {path}: width {vectors.shape[1]} differs from the store's")
            return
        for key, row in zip(keys, vectors.astype(np.float32, copy=False), strict=True):
            self._vectors[key.tobytes()] = row

    @staticmethod
    def _drop(path: Path, why: str) -> None:
        """A segment that is not this store's: reported, and deleted so that the next run does not meet it again
        (its texts are embedded again and written as a new segment)."""
        log.warning("%s", why)
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not delete %s: %s", path, exc)

    def _merge(self, segments: list[Path]) -> None:
        assert self._vectors is not None
        if not self._vectors:
            return
        keys = np.frombuffer(b"".join(self._vectors), dtype=np.uint8).reshape(-1, KEY_BYTES)
        try:
            self._write(keys, np.stack(list(self._vectors.values())), f"seg-0merged-{os.getpid()}-{time.time_ns()}")
            for path in segments:
                path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not merge the text-vector segments in %s: %s", self.folder, exc)
