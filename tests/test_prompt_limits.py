"""Replies far longer than any token cap (a server ignoring ``max_tokens``) are cut before fuzzy matching."""

from __future__ import annotations

import pytest

from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.prompts import checked, memory_common, memory_reflection

MEMORIES = ["Ann watched Alien and loved the horror.", "Ann left a comedy after ten minutes."]
# A 3.7 MB reflection reply: statement-shaped lines that each need the fuzzy echo check, none of them valid.
HUGE_REPLY = "Ann prefers horror films to comedies on most evenings at home now.\n" * 56_000


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Lengths of the answers that reach the fuzzy matcher."""
    lengths: list[int] = []
    real = memory_common.coverage

    def spy(answer: str, text: str, min_block: int = 4) -> float:
        lengths.append(len(answer))
        return real(answer, text, min_block)

    monkeypatch.setattr(memory_common, "coverage", spy)
    return lengths


def test_a_huge_reflection_reply_is_capped_before_fuzzy_matching(compared: list[int]) -> None:
    assert len(HUGE_REPLY) > 3_500_000
    candidates = memory_reflection.parse(HUGE_REPLY)
    assert len(candidates) <= memory_reflection.MAX_CANDIDATES
    memory_reflection.valid_insights(candidates, MEMORIES, 2, 240, "Ann")
    fragments = len(memory_common.fixed_fragments(memory_reflection.NAME)) + len(MEMORIES) + 1
    # Without the cap every one of the 56,000 lines is compared with every fragment.
    assert 0 < len(compared) <= memory_reflection.MAX_CANDIDATES * 2 * fragments
    assert sum(compared) <= checked.MAX_REPLY_CHARS * 2 * fragments


def test_one_huge_line_reaches_the_echo_check_capped(compared: list[int]) -> None:
    memory_common.echoes_prompt("Each observation is rewritten " * 100_000, "memory_sensory", ["x"])
    assert compared and max(compared) <= memory_common.MAX_ECHO_CHARS


def test_generate_checked_validates_a_capped_reply() -> None:
    seen: list[int] = []

    def validate(text: str, prompt: str) -> str | None:
        seen.append(len(text))
        return None

    llm = ScriptedLLM(default=lambda prompt: "x" * 4_000_000)
    (result,) = checked.generate_checked(llm, ["p"], validate, seed=0, max_tokens=16)
    assert seen and max(seen) == checked.MAX_REPLY_CHARS
    assert len(result.raw) == checked.MAX_REPLY_CHARS and result.value is None
