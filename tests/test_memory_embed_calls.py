"""Fewer, larger embedding calls: a flush embeds its records in one call and its promotion insights and reflections
together in one more, across agents, and every stored vector is the one its text gets alone."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recagent_gym.memory.writer import flush_memories
from tests._memory_fixtures import TopicEmbedder, make_memory, memory_llm

OBSERVED = ["watched a crime film", "watched a comedy", "liked another crime story"]


class Recording(TopicEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return super().__call__(texts)


def _memories(names: Sequence[str], embedder: Recording) -> list:  # type: ignore[type-arg]
    llm = memory_llm()
    memories = [
        make_memory(
            name,
            llm=llm,
            embedder=embedder,
            enhance_count=2,
            sensory=False,
            score_importance=False,
            reflection_threshold=2.0,
        )
        for name in names
    ]
    for memory in memories:  # three records each, the third enhancing the first
        for t, text in enumerate(OBSERVED):
            memory.observe(f"{memory.agent_name} {text}", float(t + 1))
    flush_memories(memories, 3.0)
    for memory in memories:  # the next crime record promotes the first, and the importance calls for a reflection
        memory.observe(f"{memory.agent_name} saw a crime thriller", 4.0)
    return memories


def test_a_flush_embeds_its_insights_and_reflections_in_one_call_across_agents() -> None:
    embedder = Recording()
    memories = _memories(["Ann", "Bob"], embedder)
    embedder.batches.clear()
    report = flush_memories(memories, 4.0)
    assert report.promoted == 2 and report.reflections == 2 and report.insights == 6
    assert report.embed_calls == 2 == len(embedder.batches), "the records, then every insight at once"
    assert embedder.batches[0] == ["Ann saw a crime thriller", "Bob saw a crime thriller"]
    second = embedder.batches[1]
    assert second.count("They keep coming back to the same kind of film.") == 2 and len(second) == 6
    for memory in memories:
        assert memory.long_term is not None
        kinds = [r.kind for r in memory.long_term.all_records()]
        assert kinds.count("insight") == 3, "the promotion's insight, then the two reflected"


def test_every_stored_vector_is_the_one_its_text_gets_alone() -> None:
    embedder = Recording()
    memories = _memories(["Ann", "Bob"], embedder)
    flush_memories(memories, 4.0)
    alone = TopicEmbedder()
    for memory in memories:
        records = memory.records()
        assert len(records) >= 6
        for record in records:
            assert np.array_equal(record.embedding, alone([record.content])[0]), record.content


def test_minilm_vectors_do_not_depend_on_the_flush_batch(sentence_embedder) -> None:  # type: ignore[no-untyped-def]
    """The real model: a record's vector is the same whether its flush embeds it with other agents' or alone."""
    texts = [f"{name} {text}" for name in ("Ann", "Bob", "Cy") for text in OBSERVED]
    together = sentence_embedder(texts)
    alone = np.stack([sentence_embedder([t])[0] for t in texts])
    assert np.array_equal(together, alone)
