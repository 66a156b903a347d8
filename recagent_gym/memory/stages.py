"""The paper's three memory stages, which :class:`~recagent_gym.memory.agent_memory.AgentMemory` composes:

* sensory memory (:class:`SensoryMemory`): the queue of raw observations waiting to be compressed and scored (see
  ``writer``);
* short-term memory (:class:`ShortTermMemory`): a small buffer whose records are *enhanced* by similar new records
  and, after K enhancements, promoted to long-term memory together with an insight;
* long-term memory (:class:`LongTermMemory`): records with an embedding matrix, searched by a faiss inner-product
  index or numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.record import MEMORY_KINDS, MemoryKind, MemoryRecord
from recagent_gym.memory.scoring import forget_weights, recency, retrieval_scores, sample_forgotten


def as_matrix(vectors: np.ndarray | Sequence[Sequence[float]], n: int, where: str) -> np.ndarray:
    """``vectors`` as a C-contiguous float32 ``(n, d)`` matrix, or a ValueError naming ``where``."""
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != n:
        raise ValueError(f"{where}: expected {n} embedding rows, got an array of shape {matrix.shape}")
    return matrix


# ------------------------------------------------------------------------------------------------------ sensory memory


@dataclass(frozen=True)
class Observation:
    """A raw observation as the agent perceived it."""

    text: str
    time_h: float
    kind: MemoryKind = "observation"


class SensoryMemory:
    """Holds observations until a flush turns them into (content, importance, time) records.

    Compression is skipped (raw text kept) when ``config.sensory`` is off or the text is at most
    ``sensory_min_chars`` long; importance scoring is skipped when ``config.score_importance`` is off.
    """

    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        self.pending: list[Observation] = []
        self.compressed: dict[Observation, tuple[str, float | None]] = {}
        """Observations whose stored content is known before their flush: compressed ahead
        (:func:`~recagent_gym.memory.writer.precompress`; transient: a flush without it asks the same prompts
        again), or written by the agent's own reply (``AgentMemory.observe_written``). Content and importance (None:
        still to score)."""
        self.claimed: set[Observation] = set()
        """Observations a :func:`~recagent_gym.memory.writer.precompress` is compressing now (the others skip them)."""

    def push(self, texts: Sequence[str], time_h: float, kind: MemoryKind, *, owner: str) -> None:
        if kind not in MEMORY_KINDS:
            raise ValueError(f"memory of {owner!r}: kind must be one of {MEMORY_KINDS}, got {kind!r}")
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"memory of {owner!r}: observation {i} is empty or not a string: {text!r}")
        self.pending.extend(Observation(" ".join(t.split()), float(time_h), kind) for t in texts)

    def take(self) -> list[Observation]:
        taken, self.pending = self.pending, []
        return taken

    def needs_compression(self, obs: Observation) -> bool:
        return self.config.sensory and len(obs.text) > self.config.sensory_min_chars

    def get_state(self) -> list[dict[str, Any]]:
        return [asdict(o) for o in self.pending]

    def set_state(self, state: Sequence[Mapping[str, Any]]) -> None:
        try:
            self.pending = [
                Observation(str(o["text"]), float(o["time_h"]), o.get("kind", "observation")) for o in state
            ]
        except KeyError as exc:
            raise ValueError(f"sensory state: a pending observation lacks {exc.args[0]!r}") from None


# --------------------------------------------------------------------------------------------------- short-term memory


@dataclass
class Promotion:
    """A record that reached K enhancements, with the contents that enhanced it (inputs of its insight)."""

    record: MemoryRecord
    related: list[str] = field(default_factory=list)


@dataclass
class AddResult:
    promoted: list[Promotion] = field(default_factory=list)
    overflow: list[MemoryRecord] = field(default_factory=list)
    """Records pushed out by the capacity (with embeddings)."""
    enhanced: int = 0
    """Existing records this addition enhanced."""


class ShortTermMemory:
    """Records in arrival order, their unit embeddings, and what enhanced each of them."""

    def __init__(self, config: MemoryConfig, *, promote: bool = True) -> None:
        self.config = config
        self.promote = promote
        """False in the ``short_term_only`` ablation: records stay, enhanced, until the capacity pushes them out."""
        self.records: list[MemoryRecord] = []
        self.related: list[list[str]] = []
        self._emb: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.records)

    def _copy(self, i: int) -> MemoryRecord:
        assert self._emb is not None
        return replace(self.records[i], embedding=self._emb[i].copy())

    def add(self, record: MemoryRecord, embedding: np.ndarray) -> AddResult:
        """Enhance similar records, promote those that reached K, append ``record``, enforce the capacity."""
        cfg = self.config
        vec = as_matrix(np.asarray(embedding).reshape(1, -1), 1, "ShortTermMemory.add")
        result = AddResult()
        if self._emb is not None and len(self.records):
            sims = self._emb @ vec[0]
            for i in np.flatnonzero(sims >= cfg.enhance_threshold):
                old = self.records[int(i)]
                old.enhance_count += 1
                old.last_access_h = max(old.last_access_h, record.created_h)
                self.related[int(i)].append(record.content)
                result.enhanced += 1
            if self.promote:
                ready = [i for i, r in enumerate(self.records) if r.enhance_count >= cfg.enhance_count]
                result.promoted = [Promotion(self._copy(i), list(self.related[i])) for i in ready]
                self._drop(ready)
        self.records.append(replace(record, embedding=None))
        self.related.append([])
        self._emb = vec.copy() if self._emb is None else np.concatenate([self._emb, vec])
        while len(self.records) > cfg.short_term_capacity:
            result.overflow.append(self._evict())
        return result

    def _evict(self) -> MemoryRecord:
        # The paper's choice: the least important record (then the least enhanced, then the oldest), never the
        # record that just arrived.
        candidates = range(len(self.records) - 1)
        victim = min(candidates, key=lambda i: (self.records[i].importance, self.records[i].enhance_count, i))
        evicted = self._copy(victim)
        self._drop([victim])
        return evicted

    def _drop(self, indices: list[int]) -> None:
        if not indices:
            return
        drop = set(indices)
        keep = [i for i in range(len(self.records)) if i not in drop]
        self.records = [self.records[i] for i in keep]
        self.related = [self.related[i] for i in keep]
        assert self._emb is not None
        self._emb = np.ascontiguousarray(self._emb[keep]) if keep else None

    def all_records(self) -> list[MemoryRecord]:
        """Copies of every record, oldest first, with embeddings."""
        return [self._copy(i) for i in range(len(self.records))]

    def get_state(self, *, with_embeddings: bool) -> dict[str, Any]:
        return {
            "records": [r.to_dict(with_embedding=with_embeddings) for r in self.all_records()],
            "related": [list(r) for r in self.related],
        }

    def set_state(self, records: list[MemoryRecord], related: list[list[str]], embeddings: np.ndarray) -> None:
        if len(related) != len(records):
            raise ValueError(f"short-term state: {len(records)} records but {len(related)} 'related' lists")
        self.records = [replace(r, embedding=None) for r in records]
        self.related = [list(map(str, r)) for r in related]
        self._emb = as_matrix(embeddings, len(records), "short-term state") if records else None


# ---------------------------------------------------------------------------------------------------- long-term memory


class LongTermMemory:
    """Records and their unit embeddings (row ``i`` belongs to ``records[i]``).

    Retrieval scores every record (or the ``retrieve_candidates`` most relevant ones found by the index) with
    relevance + recency + importance and returns the top N, refreshing their last access.
    """

    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        self.records: list[MemoryRecord] = []
        self._emb: np.ndarray | None = None
        self._faiss: Any = None
        self._faiss_rows = 0

    def __len__(self) -> int:
        return len(self.records)

    @property
    def embeddings(self) -> np.ndarray:
        """``(n, d)`` float32, read-only view."""
        if self._emb is None:
            return np.zeros((0, 0), dtype=np.float32)
        view = self._emb.view()
        view.flags.writeable = False
        return view

    @property
    def backend(self) -> str:
        """``faiss`` or ``numpy``: what the next search uses."""
        if self.config.index == "auto":
            return "faiss" if len(self.records) >= self.config.faiss_min_records else "numpy"
        return self.config.index

    def add(self, records: Sequence[MemoryRecord], embeddings: np.ndarray) -> None:
        if not records:
            return
        matrix = as_matrix(embeddings, len(records), "LongTermMemory.add")
        if self._emb is not None and matrix.shape[1] != self._emb.shape[1]:
            raise ValueError(f"LongTermMemory.add: embedding dimension {matrix.shape[1]} != {self._emb.shape[1]}")
        self.records.extend(replace(r, embedding=None) for r in records)
        self._emb = matrix.copy() if self._emb is None else np.concatenate([self._emb, matrix])

    def remove(self, indices: Sequence[int] | np.ndarray) -> list[MemoryRecord]:
        """Drop the records at ``indices``; returns them (with embeddings)."""
        drop = {int(i) for i in indices}
        if not drop:
            return []
        removed = [self._copy(i) for i in sorted(drop)]
        keep = [i for i in range(len(self.records)) if i not in drop]
        self.records = [self.records[i] for i in keep]
        assert self._emb is not None
        self._emb = np.ascontiguousarray(self._emb[keep])
        self._faiss = None  # rows moved: rebuild on the next search
        return removed

    def _copy(self, i: int) -> MemoryRecord:
        assert self._emb is not None
        return replace(self.records[i], embedding=self._emb[i].copy())

    def all_records(self) -> list[MemoryRecord]:
        """Copies of every record, in insertion order, with embeddings (access times untouched)."""
        return [self._copy(i) for i in range(len(self.records))]

    def relevance(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Indices and cosine similarities of the ``k`` records most similar to the unit vector ``query``."""
        n = len(self.records)
        k = min(k, n)
        if k == 0 or self._emb is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        # Scoring every record is one matrix product; an index only pays off for a short candidate list.
        if self.backend == "faiss" and k < n:
            index = self._faiss_index()
            sims, idx = index.search(q, k)
            return idx[0].astype(np.int64), sims[0]
        sims = self._emb @ q[0]
        if k == n:
            return np.arange(n), sims
        top = np.argpartition(-sims, k - 1)[:k]
        return top, sims[top]

    def _faiss_index(self) -> Any:
        import faiss

        assert self._emb is not None
        if self._faiss is None or self._faiss.d != self._emb.shape[1]:
            self._faiss = faiss.IndexFlatIP(self._emb.shape[1])
            self._faiss_rows = 0
        if self._faiss_rows < len(self.records):  # only appends happened since the last search
            self._faiss.add(self._emb[self._faiss_rows :])
            self._faiss_rows = len(self.records)
        return self._faiss

    def scored(self, query: np.ndarray | None, time_h: float) -> tuple[np.ndarray, np.ndarray]:
        """Candidate indices and their combined scores (unsorted)."""
        n = len(self.records)
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        cfg = self.config
        if query is None:
            idx, rel = np.arange(n), np.zeros(n)
        else:
            idx, rel = self.relevance(query, cfg.retrieve_candidates or n)
        last = np.fromiter((self.records[i].last_access_h for i in idx), dtype=np.float64, count=len(idx))
        imp = np.fromiter((self.records[i].importance for i in idx), dtype=np.float64, count=len(idx))
        scores = retrieval_scores(
            rel,
            recency(last, time_h, cfg.recency_decay),
            imp,
            relevance_weight=cfg.relevance_weight,
            recency_weight=cfg.recency_weight,
            importance_weight=cfg.importance_weight,
            normalise=cfg.score_normalisation == "minmax",
        )
        return idx, scores

    def retrieve(self, query: np.ndarray | None, time_h: float, top_n: int) -> list[MemoryRecord]:
        """Top ``top_n`` records by combined score, best first; their last access becomes ``time_h``."""
        idx, scores = self.scored(query, time_h)
        # Stable sort on (-score, index) so that ties resolve to the older record, reproducibly.
        order = np.lexsort((idx, -scores))[:top_n]
        chosen = [int(idx[o]) for o in order]
        for i in chosen:
            self.records[i].last_access_h = max(self.records[i].last_access_h, float(time_h))
        return [self._copy(i) for i in chosen]

    def merge_near_duplicates(self) -> int:
        """Merge records whose cosine similarity reaches ``merge_threshold``: the more important one stays (the
        older on ties), absorbing the other's enhancement count and latest access. Returns how many were merged."""
        n = len(self.records)
        if n < 2 or self._emb is None:
            return 0
        sims = self._emb @ self._emb.T
        order = sorted(range(n), key=lambda i: (-self.records[i].importance, i))
        absorbed: set[int] = set()
        for i in order:
            if i in absorbed:
                continue
            keeper = self.records[i]
            for j in np.flatnonzero(sims[i] >= self.config.merge_threshold):
                j = int(j)
                if j == i or j in absorbed:
                    continue
                other = self.records[j]
                keeper.enhance_count += other.enhance_count
                keeper.last_access_h = max(keeper.last_access_h, other.last_access_h)
                absorbed.add(j)
        self.remove(sorted(absorbed))
        return len(absorbed)

    def forget(self, rng: np.random.Generator, time_h: float) -> list[MemoryRecord]:
        """Above ``forget_max_records``, remove the excess, drawn with probability proportional to ``g(M)``."""
        excess = len(self.records) - self.config.forget_max_records
        if excess <= 0:
            return []
        weights = self.forget_weights(time_h)
        return self.remove(sample_forgotten(weights, excess, rng))

    def forget_weights(self, time_h: float) -> np.ndarray:
        imp = np.array([r.importance for r in self.records], dtype=np.float64)
        last = np.array([r.last_access_h for r in self.records], dtype=np.float64)
        rec = recency(last, time_h, self.config.recency_decay)
        return forget_weights(imp, rec, self.config.forget_beta, self.config.forget_delta)

    def get_state(self, *, with_embeddings: bool) -> list[dict[str, Any]]:
        return [r.to_dict(with_embedding=with_embeddings) for r in self.all_records()]

    def set_state(self, records: Sequence[MemoryRecord], embeddings: np.ndarray) -> None:
        self.records, self._emb, self._faiss, self._faiss_rows = [], None, None, 0
        self.add(records, embeddings)
