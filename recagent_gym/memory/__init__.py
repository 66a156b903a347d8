"""The agents' memory (RecAgent): sensory, short-term and long-term memory, retrieval, reflection, forgetting.

Writing is batched across agents by :func:`flush_memories` (one LLM call per stage), off the critical path.
"""

from recagent_gym.memory.agent_memory import AgentMemory, format_memories
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.long_term import LongTermMemory
from recagent_gym.memory.record import MEMORY_KINDS, MemoryKind, MemoryRecord
from recagent_gym.memory.scoring import forget_weights, minmax, recency, retrieval_scores, sample_forgotten
from recagent_gym.memory.sensory import Observation, SensoryMemory
from recagent_gym.memory.short_term import ShortTermMemory
from recagent_gym.memory.writer import FlushReport, flush_memories, reflect_memories

__all__ = [
    "MEMORY_KINDS",
    "AgentMemory",
    "FlushReport",
    "LongTermMemory",
    "MemoryConfig",
    "MemoryKind",
    "MemoryRecord",
    "Observation",
    "SensoryMemory",
    "ShortTermMemory",
    "flush_memories",
    "forget_weights",
    "format_memories",
    "minmax",
    "recency",
    "reflect_memories",
    "retrieval_scores",
    "sample_forgotten",
]
