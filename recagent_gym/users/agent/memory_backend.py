"""How the agent reaches its memory: one memory per agent, and batched flushing of many agents' memories.

The default backend is the paper's memory (``recagent_gym.memory``); tests pass a light fake with the same methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from recagent_gym.llm.protocol import LanguageModel
from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.writer import flush_memories

MEMORY_LINE_CHARS = 160
"""Longest memory record quoted in a prompt (longer ones are cut), to bound the prompt."""


class MemoryBackend(Protocol):
    def create(self, agent_name: str, seed: int) -> Any:
        """A new, empty memory with ``observe``, ``retrieve``, ``get_state``, ``set_state``."""
        ...

    def flush(self, memories: Sequence[Any], time_h: float) -> None:
        """Process the deferred writes of many memories in one batch."""
        ...


class RecAgentMemoryBackend:
    """The paper's sensory / short-term / long-term memory (``recagent_gym.memory.AgentMemory``)."""

    def __init__(self, config: MemoryConfig, llm: LanguageModel, embedder: Any) -> None:
        self.config = config
        self.llm = llm
        self.embedder = embedder

    def create(self, agent_name: str, seed: int) -> Any:
        return AgentMemory(self.config, self.llm, self.embedder, agent_name, seed=seed)

    def flush(self, memories: Sequence[Any], time_h: float) -> None:
        if memories:
            flush_memories(list(memories), time_h)


def memory_text(records: Sequence[Any], limit: int, name: str) -> str:
    """The first ``limit`` records as a short block for a prompt ("" when there is nothing to quote)."""
    lines = []
    for record in records[:limit]:
        content = " ".join(str(getattr(record, "content", record)).split())
        if content:
            lines.append("- " + (content if len(content) <= MEMORY_LINE_CHARS else content[:MEMORY_LINE_CHARS] + "..."))
    if not lines:
        return ""
    return f"{name} remembers:\n" + "\n".join(lines)
