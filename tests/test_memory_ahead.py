"""Issue 17: memory work done ahead of a flush (``precompress``) by several jobs on one memory at once.

The jobs of one agent's session must overlap (each claims what nobody has claimed, and asks the model outside the
memory's lock), every observation is compressed once, and what the flush stores is the same as without them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.stages import Observation
from recagent_gym.memory.writer import flush_memories, precompress
from tests._memory_fixtures import memory_llm


class MeetingLLM:
    """A scripted memory model whose ``generate`` calls wait until ``parties`` of them are in flight together:
    if the callers were serialised, the barrier breaks (and the test fails) instead of hanging."""

    def __init__(self, parties: int) -> None:
        self.inner = memory_llm()
        self.barrier = threading.Barrier(parties, timeout=5.0)
        self.prompts: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> Any:
        self.prompts.extend(prompts)
        self.barrier.wait()
        return self.inner.generate(prompts, **kwargs)


def _memory(llm: Any) -> AgentMemory:
    return AgentMemory(MemoryConfig(importance_with_summary=True), llm, HashingEmbedder(16), "Ann")


def test_jobs_ahead_on_one_memory_overlap_and_compress_each_observation_once() -> None:
    llm = MeetingLLM(parties=2)
    memory = _memory(llm)
    memory.observe(["Ann watched Heat on the first page.", "Ann watched Casino on the second page."], 1.0)
    first, second = list(memory.sensory.pending)
    memory.observe(["Ann searched for crime movies with a heist."], 1.0)
    third = memory.sensory.pending[-1]
    jobs = [threading.Thread(target=precompress, args=(memory, obs)) for obs in ([first, second], [second, third])]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join()
    assert not llm.barrier.broken  # both jobs were asking the model at the same time
    assert sorted(llm.prompts) == sorted(set(llm.prompts)) and len(llm.prompts) == 3  # each observation once
    assert set(memory.sensory.compressed) == {first, second, third} and not memory.sensory.claimed
    assert memory.stats["compressed"] == 3 and memory.usage.calls == 3  # the jobs' tallies are merged

    plain = _memory(memory_llm())
    plain.observe([first.text, second.text, third.text], 1.0)
    flush_memories([plain], 1.0)
    asked = len(llm.inner.history)
    flush_memories([memory], 1.0)
    assert not any(h["prompt"].rstrip().endswith("Sentence:") for h in llm.inner.history[asked:])
    assert [r.content for r in memory.records()] == [r.content for r in plain.records()]


def test_an_observation_made_twice_is_compressed_once() -> None:
    """A repeated search in one session queues the same observation twice; the flush reuses what was done ahead."""
    llm = memory_llm()
    memory = _memory(llm)
    memory.observe(["Ann searched for crime movies with a heist."] * 2, 1.0)
    precompress(memory, list(memory.sensory.pending))
    asked = len(llm.history)
    flush_memories([memory], 1.0)
    assert not any(h["prompt"].rstrip().endswith("Sentence:") for h in llm.history[asked:])
    assert not memory.sensory.compressed


def test_a_failed_job_ahead_leaves_its_observations_to_the_flush() -> None:
    class Failing:
        def __getattr__(self, name: str) -> Any:
            return getattr(memory_llm(), name)

        def generate(self, prompts: Sequence[str], **kwargs: Any) -> Any:
            raise RuntimeError("server down")

    memory = _memory(Failing())
    memory.observe(["Ann watched Heat on the first page."], 1.0)
    obs: Observation = memory.sensory.pending[0]
    with pytest.raises(RuntimeError, match="server down"):
        precompress(memory, [obs])
    assert obs not in memory.sensory.compressed and not memory.sensory.claimed
    memory.llm = memory_llm()
    flush_memories([memory], 1.0)
    assert len(memory.records()) == 1
