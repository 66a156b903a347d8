"""The embedded Gemma 3 270M backend for real (one model shared by the session)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from recagent_gym.llm.embedded import EmbeddedLLM, options_grammar
from recagent_gym.llm.protocol import LanguageModel, LLMError
from tests._llm_fixtures import load_embedded_llm

pytestmark = pytest.mark.embedded_llm


@pytest.fixture(scope="module")
def embedded_llm() -> Iterator[EmbeddedLLM]:
    """This module's own model, its prefix cache filled by these tests alone: they reason about the cache's contents,
    and seeded sampling repeats exactly only from the same cache state (a prefix reused from the cache is computed
    in other batches than a fresh one, which moves the logits by a few hundredths: enough to change a sample). Batched
    decoding: these tests are about its prefix slots (canonical decoding: ``test_llm_canonical.py``)."""
    llm = load_embedded_llm(decoding="batched")
    yield llm
    llm.close()


HISTORY = "".join(
    f"Movie: Film number {i} about {w}\nWatched: {'Yes' if i % 2 else 'No'}\n"
    for i, w in enumerate(["space", "love", "war", "dogs", "ghosts", "money", "ships", "kings"])
)


@pytest.mark.slow
def test_protocol_and_greedy_generation_is_repeatable(embedded_llm: EmbeddedLLM) -> None:
    assert isinstance(embedded_llm, LanguageModel)
    prompts = ["The capital of France is", "Ten minus three equals"]
    first = embedded_llm.generate(prompts, max_tokens=6)
    again = embedded_llm.generate(prompts, max_tokens=6)
    assert [g.text for g in first] == [g.text for g in again]
    assert all(g.text and g.usage.completion_tokens <= 6 and g.usage.prompt_tokens > 3 for g in first)
    assert first[0].finish_reason in ("length", "stop")


@pytest.mark.slow
def test_stop_strings_and_seeded_sampling(embedded_llm: EmbeddedLLM) -> None:
    (g,) = embedded_llm.generate(["List: apples, pears, plums, cherries, figs,"], max_tokens=24, stop=[","])
    assert "," not in g.text and g.finish_reason == "stop"
    kwargs = {"max_tokens": 8, "temperature": 1.0}
    a = embedded_llm.generate(["Once upon a time"], seed=11, **kwargs)[0].text
    b = embedded_llm.generate(["Once upon a time"], seed=11, **kwargs)[0].text
    assert a == b
    others = {embedded_llm.generate(["Once upon a time"], seed=s, **kwargs)[0].text for s in range(4)}
    assert len(others) > 1


@pytest.mark.slow
def test_grammar_constrains_generation(embedded_llm: EmbeddedLLM) -> None:
    options = [" watch 2", " next page", ' say "hi"']
    outs = embedded_llm.generate(
        ["You see a page of films. You decide to", "Pick one:"], max_tokens=8, grammar=options_grammar(options)
    )
    assert all(g.text in options for g in outs)
    with pytest.raises(LLMError, match="grammar"):
        embedded_llm.generate(["x"], grammar="root ::= (")
    (choice,) = embedded_llm._choose_by_grammar(["Is water wet? Answer:"], [[" Yes", " No"]], seed=None)
    assert choice.option in (" Yes", " No") and choice.extra["method"] == "grammar"


@pytest.mark.slow
def test_shared_prefix_scores_match_separate_scoring(embedded_llm: EmbeddedLLM) -> None:
    candidates = ["Film about space wars", "Film about a quiet love", "Film about ghosts"]
    prompts = [f"{HISTORY}Movie: {c}\nWatched:" for c in candidates]
    options = [[" Yes", " No"]] * len(prompts)
    before = embedded_llm.stats["tokens_decoded"]
    batched = embedded_llm.choose(prompts, options)
    decoded = embedded_llm.stats["tokens_decoded"] - before
    total_tokens = sum(len(embedded_llm._rt.tokenize(p)) for p in prompts)
    assert decoded < 0.6 * total_tokens  # the shared history was decoded once, not three times
    for prompt, choice in zip(prompts, batched, strict=True):
        embedded_llm._rt.reset()  # score alone, from an empty cache
        (alone,) = embedded_llm.choose([prompt], [[" Yes", " No"]])
        # llama.cpp's kernels depend on the batch size, so the same tokens computed in other batches differ by a
        # few hundredths of a nat (measured up to 0.1 with n_batch 64 vs 512); a wrong mask or position would be off
        # by far more
        np.testing.assert_allclose(choice.scores, alone.scores, atol=0.25)
        assert choice.index == int(np.argmax(choice.scores))
        assert sum(choice.extra["probs"]) == pytest.approx(1.0)


@pytest.mark.slow
def test_repeated_prefix_is_reused_across_calls(embedded_llm: EmbeddedLLM) -> None:
    embedded_llm._rt.reset()
    embedded_llm.choose([f"{HISTORY}Movie: Film about rain\nWatched:"], [[" Yes", " No"]])
    reused, decoded = embedded_llm.stats["tokens_reused"], embedded_llm.stats["tokens_decoded"]
    embedded_llm.choose([f"{HISTORY}Movie: Film about snow and ice\nWatched:"], [[" Yes", " No"]])
    history_tokens = len(embedded_llm._rt.tokenize(HISTORY))
    assert embedded_llm.stats["tokens_reused"] - reused >= history_tokens - 2
    assert embedded_llm.stats["tokens_decoded"] - decoded < 20


YES_NO = [[" Yes", " No"]]


def _reused_by(llm: EmbeddedLLM, prompt: str) -> int:
    before = llm.stats["tokens_reused"]
    llm.choose([prompt], YES_NO)
    return llm.stats["tokens_reused"] - before


@pytest.mark.slow
def test_a_users_next_pages_replace_its_own_prefix_not_another_users(embedded_llm: EmbeddedLLM) -> None:
    assert embedded_llm.config.prefix_slots == 2
    embedded_llm._rt.reset()
    other = "Profile of a second viewer, fond of silent comedies.\n" + HISTORY.replace("Film", "Picture")
    embedded_llm.choose([f"{other}Movie: Film about rain\nWatched:"], YES_NO)
    for page in range(4):  # more pages than slots; each page's memory line differs, profile and examples do not
        embedded_llm.choose([f"{HISTORY}Memory: page {page} was about {'tides ' * page}\nMovie: Film {page}\nWatched:"],
                            YES_NO)  # fmt: skip
    other_tokens = len(embedded_llm._rt.tokenize(other))
    assert _reused_by(embedded_llm, f"{other}Movie: Film about snow\nWatched:") >= other_tokens - 2


@pytest.mark.slow
def test_higher_priority_prefix_outlives_background_prompts(embedded_llm: EmbeddedLLM) -> None:
    from recagent_gym.llm.factory import build_llm
    from recagent_gym.llm.protocol import prefix_hint

    history_tokens = len(embedded_llm._rt.tokenize(HISTORY))
    notes = [f"Note {i}: " + "background chatter " * (10 + i) for i in range(4)]
    for priority, survives in ((1, True), (0, False)):
        embedded_llm._rt.reset()
        with prefix_hint(build_llm(embedded_llm.config, backend=embedded_llm), priority):  # each wrapper forwards it
            assert embedded_llm._priority() == priority
            embedded_llm.choose([f"{HISTORY}Movie: Film about rain\nWatched:"], YES_NO)
        assert embedded_llm._priority() == 0
        for note in notes:
            embedded_llm.generate([note], max_tokens=1)
        reused = _reused_by(embedded_llm, f"{HISTORY}Movie: Film about snow\nWatched:")
        assert (reused >= history_tokens - 2) is survives, (priority, reused, history_tokens)


@pytest.mark.slow
def test_ended_sessions_prefixes_do_not_starve_other_prompts(embedded_llm: EmbeddedLLM) -> None:
    rt = embedded_llm._rt
    assert rt.high_slots == 1  # of 2 slots
    rt.reset()
    sessions = [f"Viewer {name} profile.\n" + HISTORY.replace("Film", name) for name in ("Ann", "Bob", "Cy")]
    with embedded_llm.prefix_priority(1):  # three users' sessions, one after the other
        for prefix in sessions:
            embedded_llm.choose([f"{prefix}Movie: Film about rain\nWatched:"], YES_NO)
    note = "Note: " + "background chatter " * 12
    embedded_llm.generate([note], max_tokens=1)  # a priority-0 prompt still finds a slot ...
    assert _reused_by(embedded_llm, note + " and more") >= len(rt.tokenize(note)) - 2
    last = len(rt.tokenize(sessions[-1]))  # ... and the latest session's prefix is still resident
    assert _reused_by(embedded_llm, f"{sessions[-1]}Movie: Film about snow\nWatched:") >= last - 2


def test_too_small_batch_is_refused_not_aborted() -> None:
    from recagent_gym.llm.config import LLMConfig

    with pytest.raises(LLMError, match="n_batch"):
        EmbeddedLLM(LLMConfig(n_batch=32, max_sequences=64))


@pytest.mark.slow
def test_option_validation_and_length_limit(embedded_llm: EmbeddedLLM) -> None:
    with pytest.raises(ValueError):
        embedded_llm.choose(["p"], [[]])
    with pytest.raises(ValueError):
        embedded_llm.choose(["p"], [["a", ""]])
    with pytest.raises(LLMError, match="n_ctx"):
        embedded_llm.generate(["word " * 3000], max_tokens=4)
    state = embedded_llm.get_state()
    embedded_llm.generate(["Hello"], max_tokens=2, temperature=1.0)
    embedded_llm.set_state(state)
    assert embedded_llm.get_state() == state


@pytest.mark.slow
def test_llm_check_command_runs_offline() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "recagent_gym.runs.cli", "llm", "check", "--set", "llm.n_threads=2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "embedded:gemma-3-270m" in result.stdout
    assert "choose" in result.stdout and "latency" in result.stdout
