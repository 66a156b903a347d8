"""MiniLM in a process of its own (``llm.embedder_process``): bitwise the in-process vectors, calls from many threads
at once, a clear error when the child cannot load its model or has stopped, and its CPU and memory counted."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from recagent_gym.llm.embedder_process import ProcessEmbedder
from recagent_gym.llm.shared_embedder import CachedEmbedder
from recagent_gym.llm.testing import HashingEmbedder

TEXTS = [f"Alice watched movie {k} and liked it {'very ' * (k % 7)}much" for k in range(24)]


@pytest.fixture(scope="module")
def process_embedder() -> Iterator[ProcessEmbedder]:
    embedder = ProcessEmbedder(n_threads=1)
    yield embedder
    embedder.close()


@pytest.mark.slow
def test_vectors_and_identity_are_the_in_process_ones(
    process_embedder: ProcessEmbedder, sentence_embedder: Any
) -> None:
    assert np.array_equal(process_embedder(TEXTS), sentence_embedder(TEXTS))
    assert process_embedder.store_identity == sentence_embedder.store_identity
    assert (process_embedder.name, process_embedder.dim) == (sentence_embedder.name, sentence_embedder.dim)
    assert process_embedder([]).shape == (0, 384)
    with pytest.raises(TypeError):
        process_embedder("one string")


@pytest.mark.slow
def test_calls_from_many_threads_each_get_their_own_vectors(
    process_embedder: ProcessEmbedder, sentence_embedder: Any
) -> None:
    expected = sentence_embedder(TEXTS)
    before, cpu_before = process_embedder.texts_embedded, process_embedder.cpu_s
    got: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda k=k: got.__setitem__(k, process_embedder(TEXTS[k : k + 3])))
               for k in range(0, 24, 3)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert all(np.array_equal(got[k], expected[k : k + 3]) for k in range(0, 24, 3))
    assert process_embedder.texts_embedded - before == 24 and process_embedder.cpu_s > cpu_before
    assert process_embedder.process_cpu_s > 0 and process_embedder.peak_rss_mb > 50


@pytest.mark.slow
def test_a_stopped_child_and_a_bad_model_give_clear_errors() -> None:
    embedder = ProcessEmbedder(n_threads=1)
    embedder.close()
    embedder.close()  # idempotent
    with pytest.raises(RuntimeError, match="embedder process has stopped"):
        embedder(["a text"])
    with pytest.raises(RuntimeError, match="could not load the model"):
        ProcessEmbedder(model_path="/no/such/model")


@pytest.mark.slow
def test_the_shared_embedder_closes_the_child_it_wraps() -> None:
    """What ``Simulation.close()`` calls: the cache answers what it holds, new texts get the child's reason."""
    cached = CachedEmbedder(ProcessEmbedder(n_threads=1))
    kept = cached(["a text"])
    cached.close()
    assert np.array_equal(cached(["a text"]), kept)
    with pytest.raises(RuntimeError, match="embedder process has stopped"):
        cached(["another text"])
    CachedEmbedder(HashingEmbedder(8)).close()  # nothing to close: no error
