"""Helpers of the memory tests: a topic embedder with exact similarities and a scripted model for memory prompts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.memory.config import MemoryConfig

TOPICS = ("crime", "comedy", "horror", "drama", "romance", "western", "musical", "war")


class TopicEmbedder:
    """One axis per topic word (texts sharing their topics have cosine 1, disjoint ones 0); texts without a topic
    word get a private axis from a stable hash of the text, so they are orthogonal to everything else."""

    dim = 64

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            low = text.lower()
            hits = [i for i, topic in enumerate(TOPICS) if topic in low]
            if hits:
                out[row, hits] = 1.0
            else:
                out[row, len(TOPICS) + sum(map(ord, low)) % (self.dim - len(TOPICS))] = 1.0
            out[row] /= np.linalg.norm(out[row])
        return out


def memory_llm(**extra: Any) -> ScriptedLLM:
    """Answers every memory prompt validly: the sentence is the observation's first five words."""

    def sentence(prompt: str) -> str:
        observation = prompt.rsplit("Observation: ", 1)[1].split("\n", 1)[0]
        return " ".join(observation.split()[:5])

    def reflection(prompt: str) -> str:
        # grounded in the memories shown, as the contract demands: two of their longer words
        lines = [line for line in prompt.splitlines() if line.startswith("- ")]
        words = list(dict.fromkeys(w for line in lines for w in line[2:].lower().split() if len(w) >= 5))
        return f" They often think about {words[0]}.\n2. They keep returning to {words[-1]}."

    rules = [
        (r"Sentence:\s*$", sentence),
        (r"Insight:\s*$", "They keep coming back to the same kind of film."),
        (r"1\.\s*$", reflection),
    ]
    return ScriptedLLM(rules=list(extra.pop("rules", ())) + rules, choice_rules=[(r"Memory of", "3")], **extra)


def make_memory(name: str = "Ann", llm: Any = None, embedder: Any = None, **config: Any) -> AgentMemory:
    return AgentMemory(MemoryConfig(**config), llm or memory_llm(), embedder or TopicEmbedder(), name)


def summary(memory: AgentMemory) -> list[tuple[Any, ...]]:
    """Comparable view of every stored record."""
    return [(r.content, r.importance, r.created_h, r.last_access_h, r.enhance_count, r.kind) for r in memory.records()]
