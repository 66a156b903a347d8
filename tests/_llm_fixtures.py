"""Session-wide heavy objects for the LLM-layer tests (and for other packages' tests that need the real models).

``conftest.py`` registers this module as a plugin, so every test module that names a fixture gets the same instance,
loaded once per session. Do not import the fixtures into a test module: pytest would then give that module its own
instance (one more model load, and one more model held in memory until the session ends).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from recagent_gym.llm.config import LLMConfig


@pytest.fixture(scope="session")
def sentence_embedder():  # type: ignore[no-untyped-def]
    from recagent_gym.llm.embedder import SentenceEmbedder

    return SentenceEmbedder(n_threads=1)


def load_embedded_llm(decoding: str = "canonical") -> Any:
    """The real Gemma 3 270M backend with a small KV cache (loads in about a second once assembled)."""
    from recagent_gym.llm.embedded import EmbeddedLLM

    return EmbeddedLLM(LLMConfig(n_threads=2, kv_size=4096, prefix_slots=2, decoding=decoding))


@pytest.fixture(scope="session")
def embedded_llm() -> Iterator[object]:
    """:func:`load_embedded_llm`, shared by every test module that names it."""
    llm = load_embedded_llm()
    yield llm
    llm.close()
