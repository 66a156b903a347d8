"""What the batched writer (``writer.py``) needs of one agent's memory. ``AgentMemory`` implements it; the writer
depends on this protocol only, so the memory may import the writer without an import cycle."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from recagent_gym.llm.protocol import LanguageModel, Usage
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.record import MemoryRecord
from recagent_gym.memory.stages import LongTermMemory, SensoryMemory


class WritableMemory(Protocol):
    agent_name: str
    config: MemoryConfig
    llm: LanguageModel
    embedder: Any
    sensory: SensoryMemory
    long_term: LongTermMemory | None
    usage: Usage
    stats: Counter[str]
    importance_since_reflection: float
    flushes: int

    def next_seed(self, stage: int) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def store(self, record: MemoryRecord, embedding: np.ndarray) -> list[Any]: ...

    def recent_records(self, count: int) -> list[MemoryRecord]: ...

    def wants_reflection(self) -> bool: ...

    def forget(self, rng: np.random.Generator, time_h: float) -> list[MemoryRecord]: ...
