"""One memory record: the paper's (content, importance, timestamp) triplet plus bookkeeping."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np

MemoryKind = Literal["observation", "insight", "dialogue", "feeling"]
MEMORY_KINDS: tuple[str, ...] = get_args(MemoryKind)


@dataclass
class MemoryRecord:
    """A memory. Stores keep embeddings in their own matrix; ``embedding`` is filled on the copies they return."""

    content: str
    importance: float
    """In [0, 1]."""
    created_h: float
    """Simulated hour the observation was made."""
    last_access_h: float
    """Simulated hour of the last retrieval or enhancement (drives recency)."""
    enhance_count: int = 0
    kind: MemoryKind = "observation"
    embedding: np.ndarray | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.importance <= 1.0:
            raise ValueError(f"memory importance must be in [0, 1], got {self.importance!r}")
        if self.kind not in MEMORY_KINDS:
            raise ValueError(f"memory kind must be one of {MEMORY_KINDS}, got {self.kind!r}")

    def to_dict(self, *, with_embedding: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "content": self.content,
            "importance": float(self.importance),
            "created_h": float(self.created_h),
            "last_access_h": float(self.last_access_h),
            "enhance_count": int(self.enhance_count),
            "kind": self.kind,
        }
        if with_embedding and self.embedding is not None:
            data["embedding"] = np.asarray(self.embedding).reshape(-1).tolist()  # floats, as float(x) gives them
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryRecord:
        try:
            embedding = data.get("embedding")
            return cls(
                content=str(data["content"]),
                importance=float(data["importance"]),
                created_h=float(data["created_h"]),
                last_access_h=float(data["last_access_h"]),
                enhance_count=int(data.get("enhance_count", 0)),
                kind=data.get("kind", "observation"),
                embedding=None if embedding is None else np.asarray(embedding, dtype=np.float32),
            )
        except KeyError as exc:
            raise ValueError(f"memory record state lacks the key {exc.args[0]!r}: {dict(data)!r}") from None
