"""The shared embedder: a text is embedded once (same text, same vector), concurrent callers share one model call,
errors reach every waiter, and retrieval with it is what it is without it. MiniLM's exact batches: a text's vector
does not depend on what it is batched with."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from recagent_gym.llm.shared_embedder import CachedEmbedder, shared_embedder
from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.memory.config import MemoryConfig


class Counting:
    """A hashing embedder that records its calls and can hold them until released."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.inner = HashingEmbedder(32)
        self.dim = 32
        self.calls: list[list[str]] = []
        self.gate = gate

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if self.gate is not None:
            self.gate.wait(5)
        return self.inner(texts)


def test_each_text_is_embedded_once_and_keeps_its_vector() -> None:
    inner = Counting()
    cached = CachedEmbedder(inner)
    first = cached(["a watched b", "c", "a watched b"])
    again = cached(["c", "a watched b", "new text"])
    assert inner.calls == [["a watched b", "c"], ["new text"]]
    assert np.array_equal(first[0], first[2]) and np.array_equal(first[0], again[1])
    assert np.array_equal(first, HashingEmbedder(32)(["a watched b", "c", "a watched b"]))
    assert cached.stats() == {"texts": 5, "hits": 2, "model_calls": 2, "urgent_calls": 0, "embedded": 3, "cached": 3}
    again[1][0] = 99.0  # callers get copies: the cached vector cannot be changed through them
    assert np.array_equal(cached(["a watched b"])[0], first[0])
    assert cached([]).shape == (0, 32)
    with pytest.raises(TypeError):
        cached("one string")
    assert shared_embedder(cached) is cached and isinstance(shared_embedder(inner), CachedEmbedder)


def test_least_recently_used_texts_are_evicted() -> None:
    inner = Counting()
    cached = CachedEmbedder(inner, capacity=2)
    cached(["a", "b"])
    cached(["a"])  # "a" is now the most recent
    cached(["c"])  # evicts "b"
    cached(["a", "b"])
    assert inner.calls == [["a", "b"], ["c"], ["b"]]
    with pytest.raises(ValueError):
        CachedEmbedder(inner, capacity=0)


def test_concurrent_callers_share_the_next_model_call() -> None:
    gate = threading.Event()
    inner = Counting(gate)
    cached = CachedEmbedder(inner, parallel=1)
    results: dict[int, np.ndarray] = {}
    leader = threading.Thread(target=lambda: results.__setitem__(0, cached(["first"])))
    leader.start()
    while not inner.calls:  # the leader's model call is running (held at the gate)
        pass
    followers = [threading.Thread(target=lambda k=k: results.__setitem__(k, cached([f"t{k}", "shared"])))
                 for k in range(1, 6)]  # fmt: skip
    for thread in followers:
        thread.start()
    while len(cached._queue) < 6:  # every follower has queued its texts behind the running call
        pass
    gate.set()
    for thread in [leader, *followers]:
        thread.join(5)
    assert len(inner.calls) == 2, "the five followers' texts went into one call"
    assert sorted(inner.calls[1]) == sorted([f"t{k}" for k in range(1, 6)] + ["shared"])
    for k in range(1, 6):
        assert np.array_equal(results[k], HashingEmbedder(32)([f"t{k}", "shared"]))


def test_up_to_parallel_model_calls_run_at_once() -> None:
    gate = threading.Event()
    inner = Counting(gate)
    cached = CachedEmbedder(inner, parallel=2)
    threads = [threading.Thread(target=cached, args=([f"t{k}"],)) for k in range(3)]
    for thread in threads:
        thread.start()
    while len(inner.calls) < 2 or len(cached._queue) < 1:  # two calls held at the gate, the third text queued
        pass
    assert len(inner.calls) == 2
    gate.set()
    for thread in threads:
        thread.join(5)
    assert sorted(t for call in inner.calls for t in call) == ["t0", "t1", "t2"] and len(inner.calls) == 3
    with pytest.raises(ValueError):
        CachedEmbedder(inner, parallel=0)


def test_a_failed_call_reaches_its_waiters_and_caches_nothing() -> None:
    class Failing(Counting):
        def __call__(self, texts: Sequence[str]) -> np.ndarray:
            self.calls.append(list(texts))
            if len(self.calls) == 1:
                raise RuntimeError("model down")
            return self.inner(texts)

    inner = Failing()
    cached = CachedEmbedder(inner)
    with pytest.raises(RuntimeError, match="model down"):
        cached(["x"])
    assert np.array_equal(cached(["x"]), HashingEmbedder(32)(["x"])), "asked again, not a cached failure"
    assert cached.stats()["cached"] == 1


def _memory(embedder: object) -> AgentMemory:
    config = MemoryConfig(implementation="long_term_only", sensory=False, score_importance=False, reflection=False)
    return AgentMemory(config, llm=None, embedder=embedder, agent_name="Ann")  # type: ignore[arg-type]


def _retrievals(embedder: object) -> list[list[str]]:
    memory = _memory(embedder)
    notes = [
        f"Ann watched movie {k} about {('space', 'crime', 'love', 'sharks')[k % 4]} and liked it" for k in range(40)
    ]
    for hour, note in enumerate(notes):
        memory.observe([note], float(hour))
        memory.flush(float(hour))
    return [[r.content for r in memory.retrieve(q, 50.0, top_n=5)] for q in ("space", "crime movies", "sharks", "x")]


def test_retrieval_is_the_same_with_the_shared_embedder() -> None:
    assert _retrievals(CachedEmbedder(HashingEmbedder(32))) == _retrievals(HashingEmbedder(32))


@pytest.mark.slow
def test_minilm_exact_batches_give_each_text_its_own_vector(sentence_embedder) -> None:  # type: ignore[no-untyped-def]
    from recagent_gym.llm.embedder import SentenceEmbedder

    texts = [
        "Ann watched Heat (1995), a tense crime thriller, and rated it 5.",
        "what to do in free time",
        "Ben browsed a page and left without watching anything at all because nothing appealed to him today.",
        "funny adventure movies",
        "Cid chatted with Dee about Toy Story.",
    ]
    together = sentence_embedder(texts)
    for k, text in enumerate(texts):
        assert np.array_equal(together[k], sentence_embedder([text])[0]), text
        assert np.array_equal(together[k], sentence_embedder(texts[k:] + texts[:k])[0])
    padded = SentenceEmbedder(n_threads=1, exact=False)
    alone = np.stack([padded([t])[0] for t in texts])
    assert np.array_equal(together, alone), "a text alone is never padded: exact equals sentence-transformers"
    assert np.abs(padded(texts) - together).max() < 1e-6  # a padded mixed batch differs by float noise only
    assert _retrievals(CachedEmbedder(sentence_embedder)) == _retrievals(padded)


@pytest.mark.slow
def test_minilm_packed_call_is_bitwise_the_length_grouped_one(sentence_embedder) -> None:  # type: ignore[no-untyped-def]
    from recagent_gym.llm import packed_encoder

    assert sentence_embedder.packed, "MiniLM under SDPA embeds packed (checked bitwise at load)"
    rng = np.random.default_rng(0)
    words = [
        "Ann",
        "Ben",
        "watched",
        "Heat",
        "Toy",
        "Story",
        "loved",
        "it",
        "a",
        "tense",
        "crime",
        "thriller",
        "and",
        "rated",
        "chatted",
        "about",
        "the",
        "films",
    ]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 40)))) for _ in range(70)]  # many lengths, > a batch
    before, cpu = sentence_embedder.texts_embedded, sentence_embedder.cpu_s
    packed = sentence_embedder(texts)
    assert sentence_embedder.texts_embedded == before + 70 and sentence_embedder.cpu_s > cpu  # read by efficiency
    assert np.array_equal(packed, sentence_embedder._encode_by_length(texts))
    assert np.array_equal(packed[3], sentence_embedder([texts[3]])[0])
    # the model's padded ``encode`` still runs SDPA with its mask: float noise from the exact vectors, as before
    assert np.abs(sentence_embedder._model.encode(texts[:8]) - packed[:8]).max() < 1e-6
    # a model the packed path does not fit keeps the grouped one
    assert not packed_encoder.attach(object(), sentence_embedder._encode_by_length, 384)


def _at(level: int, cached: CachedEmbedder, texts: list[str]) -> threading.Thread:
    from recagent_gym.llm.priority import request_priority

    def run() -> None:
        with request_priority(level):
            cached(texts)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_queued_texts_go_to_the_model_by_priority_one_level_a_call() -> None:
    gate = threading.Event()
    inner = Counting(gate)
    cached = CachedEmbedder(inner, urgent_lane=False)
    threads = [_at(0, cached, ["first"])]
    while not inner.calls:  # the first call is held at the gate
        pass
    threads.append(_at(0, cached, ["low", "shared"]))
    while len(cached._queue) < 2:
        pass
    threads.append(_at(2, cached, ["high", "shared"]))  # "shared" moves up to level 2
    while len(cached._queue) < 3:
        pass
    gate.set()
    for thread in threads:
        thread.join(5)
    assert inner.calls == [["first"], ["high", "shared"], ["low"]]


def test_an_urgent_caller_runs_its_call_beside_a_less_urgent_one() -> None:
    gate = threading.Event()
    inner = Counting(gate)
    cached = CachedEmbedder(inner)  # one call at a time, and the urgent lane
    threads = [_at(1, cached, ["writes"])]
    while not inner.calls:
        pass
    threads.append(_at(2, cached, ["query"]))  # more urgent than the call in progress: its own call, at once
    while len(inner.calls) < 2:
        pass
    threads.append(_at(1, cached, ["more writes"]))  # not more urgent: waits for the next call
    while len(cached._queue) < 1:
        pass
    assert inner.calls == [["writes"], ["query"]]
    gate.set()
    for thread in threads:
        thread.join(5)
    assert inner.calls[2] == ["more writes"] and cached.stats()["urgent_calls"] == 1
