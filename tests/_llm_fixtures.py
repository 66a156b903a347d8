"""Session-wide heavy objects for the LLM-layer tests (and for other packages' tests that need the real models).

Import the fixtures into a test module (``from tests._llm_fixtures import embedded_llm, sentence_embedder``); pytest
then shares one instance per session.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recagent_gym.llm.config import LLMConfig


@pytest.fixture(scope="session")
def sentence_embedder():  # type: ignore[no-untyped-def]
    from recagent_gym.llm.embedder import SentenceEmbedder

    return SentenceEmbedder(n_threads=1)


@pytest.fixture(scope="session")
def embedded_llm() -> Iterator[object]:
    """The real Gemma 3 270M backend with a small KV cache (loads in about a second once assembled)."""
    from recagent_gym.llm.embedded import EmbeddedLLM

    llm = EmbeddedLLM(LLMConfig(n_threads=2, kv_size=4096, prefix_slots=2))
    yield llm
    llm.close()
