"""Short-term memory: a small buffer whose records are *enhanced* by similar new records and, after K
enhancements, promoted to long-term memory together with an insight."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.long_term import as_matrix
from recagent_gym.memory.record import MemoryRecord


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
