"""Canonical decoding (``llm.decoding: canonical``, the default): a score or a generation of the real embedded model is
a function of its prompt alone, bit for bit, whatever else the call held, whatever earlier calls left resident, and
whichever prompts a response cache already answered (so a cache hit returns what recomputation would give)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from recagent_gym.llm.cache import CachedLLM
from recagent_gym.llm.canonical_decode import boundaries
from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.embedded import EmbeddedLLM

PROFILE = "Ann, 34, likes horror and sci-fi films and dislikes musicals.\n"
PROMPTS = [
    PROFILE + "Movie: Alien (1979)\nWould she watch it? Answer:",
    PROFILE + "Movie: Heat (1995)\nWould she watch it? Answer:",
    "Ben prefers comedies and romance. Page: Notting Hill (1999), Seven (1995). Would he watch Seven? Answer:",
    PROFILE + "Movie: Toy Story (1995)\nWould she watch it? Answer:",
]
OPTIONS = [" Yes", " No", " Maybe"]


def test_segment_boundaries_depend_on_the_sequence_alone() -> None:
    assert boundaries(10, 4) == [0, 4, 8]
    assert boundaries(10, 4, [6, 0, 10, 12]) == [0, 4, 6, 8]  # marks outside (0, length) add nothing
    assert boundaries(3, 64, [2]) == [0, 2]


@pytest.fixture(scope="module")
def llm() -> Iterator[EmbeddedLLM]:
    model = EmbeddedLLM(LLMConfig(n_threads=2, kv_size=2048, canonical_block=16))  # small blocks: many segments
    yield model
    model.close()


def _scores(llm: object, prompts: list[str]) -> list[tuple[float, ...]]:
    return [tuple(c.scores or ()) for c in llm.choose(prompts, [OPTIONS] * len(prompts))]  # type: ignore[attr-defined]


@pytest.mark.embedded_llm
@pytest.mark.slow
def test_scores_do_not_depend_on_batch_order_or_resident_prefixes(llm: EmbeddedLLM) -> None:
    llm.forget_prefixes()
    alone = []
    for prompt in PROMPTS:
        llm.forget_prefixes()
        alone.append(_scores(llm, [prompt])[0])
    llm.forget_prefixes()
    together = _scores(llm, PROMPTS)
    again = _scores(llm, PROMPTS)  # every prefix now resident
    backwards = _scores(llm, PROMPTS[::-1])[::-1]
    llm.generate(["Write one word about rain:"], max_tokens=3)  # something else resident in between
    after_other = _scores(llm, PROMPTS)
    assert together == alone
    assert again == alone and backwards == alone and after_other == alone
    assert llm.stats["tokens_reused"] > 0, "nothing was reused: the comparison would not exercise resident prefixes"


@pytest.mark.embedded_llm
@pytest.mark.slow
def test_generation_does_not_depend_on_batch_or_resident_prefixes(llm: EmbeddedLLM) -> None:
    prompts = [PROFILE + "In one sentence, her favourite film:", PROFILE + "In one sentence, a film she hated:"]
    for temperature in (0.0, 0.9):
        llm.forget_prefixes()
        together = [g.text for g in llm.generate(prompts, max_tokens=8, temperature=temperature, seed=5)]
        _scores(llm, PROMPTS)
        alone = [llm.generate([p], max_tokens=8, temperature=temperature, seed=5)[0].text for p in prompts[::-1]]
        assert together == alone[::-1]


@pytest.mark.embedded_llm
@pytest.mark.slow
def test_a_partly_filled_response_cache_changes_no_score(llm: EmbeddedLLM, tmp_path: Path) -> None:
    """The misses of a call are sent to the model without the hits: with batched decoding their batch (and so their
    scores) would depend on what an earlier run cached."""
    llm.forget_prefixes()
    fresh = _scores(llm, PROMPTS)
    cached = CachedLLM(llm, tmp_path / "responses.sqlite", mode="read_write")
    _scores(cached, PROMPTS[1::2])  # an earlier run asked for half of them
    llm.forget_prefixes()
    mixed = _scores(cached, PROMPTS)  # half hits, half computed in a smaller batch
    cached._db.close()  # not cached.close(): that closes the module's model too
    assert cached.hits == 2 and cached.misses == 4
    assert mixed == fresh
