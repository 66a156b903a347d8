"""The memory on the real components: Gemma 3 270M (llama.cpp) and all-MiniLM-L6-v2; small on purpose."""

from __future__ import annotations

from typing import Any

import pytest

from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.writer import flush_memories
from recagent_gym.prompts import memory_sensory

OBSERVATIONS = [
    "{n} watched Heat (1995), a tense crime thriller about a bank robbery crew, and rated it 5 out of 5.",
    "{n} skipped a page of cartoons: Toy Story (1995), Balto (1995) and Pocahontas (1995).",
]


@pytest.mark.embedded_llm
@pytest.mark.slow
def test_batched_flush_on_the_embedded_model(embedded_llm: Any, sentence_embedder: Any) -> None:
    config = MemoryConfig(
        reflection_threshold=0.5, reflection_insights=1, sensory_max_tokens=32, reflection_max_tokens=32
    )
    names = ("Ann", "Ben")
    memories = [AgentMemory(config, embedded_llm, sentence_embedder, n, seed=i) for i, n in enumerate(names)]
    for memory in memories:
        for t, text in enumerate(OBSERVATIONS):
            memory.observe(text.format(n=memory.agent_name), float(t))
    report = flush_memories(memories, 3.0)

    assert report.observations == 4
    # sensory (+ at most one re-ask batch), importance, reflection (+ re-ask); no promotion with K=3
    assert 3 <= report.llm_calls <= 5 and report.promoted == 0
    assert report.usage.prompt_tokens > 0 and report.usage.completion_tokens > 0
    assert report.reflections == 2
    for memory in memories:
        observed = [r for r in memory.records() if r.kind == "observation"]
        assert len(observed) == 2
        for record, raw in zip(observed, OBSERVATIONS, strict=True):
            raw_text = raw.format(n=memory.agent_name)
            # every content is either a valid compression or the counted fallback
            ok = memory_sensory.validate(record.content, raw_text, config.sensory_max_chars) is None
            assert ok or record.content == memory_sensory.fallback(raw_text, config.sensory_max_chars)
            assert 0.0 <= record.importance <= 1.0
        assert memory.stats["sensory_fallbacks"] <= memory.stats["reasks"]
        assert memory.usage.calls > 0


@pytest.mark.slow
def test_retrieval_with_the_real_embedder_finds_the_relevant_record(sentence_embedder: Any) -> None:
    config = MemoryConfig(implementation="long_term_only", sensory=False, score_importance=False, reflection=False)
    memory = AgentMemory(config, llm=None, embedder=sentence_embedder, agent_name="Ann")  # type: ignore[arg-type]
    texts = [
        "Ann watched a romantic comedy set in Paris.",
        "Ann watched a gory zombie horror film at midnight.",
        "Ann talked with Bob about a documentary on whales.",
        "Ann skipped a page of animated musicals.",
    ]
    for t, text in enumerate(texts):
        memory.observe(text, float(t))
    memory.flush(4.0)
    assert [r.content for r in memory.retrieve("scary undead movie", 4.0, top_n=1)] == [texts[1]]
    assert [r.content for r in memory.retrieve("ocean animals", 4.0, top_n=1)] == [texts[2]]
