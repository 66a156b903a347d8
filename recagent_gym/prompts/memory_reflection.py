"""Contract of the ``memory_reflection`` prompt: up to ``count`` high-level insights from recent memories.

The template ends with ``1.`` so a base model continues a numbered list. build -> ``generate(stop=["\\n\\n"])``;
parse one insight per line (list markers stripped); keep the lines valid by :func:`memory_insight.validate` and not
echoing this prompt, at most ``count``; none valid -> one re-ask, then :func:`fallback`: no insight (counted by the
caller).
"""

from __future__ import annotations

from collections.abc import Sequence

from recagent_gym.prompts import memory_insight
from recagent_gym.prompts.checked import cap_reply
from recagent_gym.prompts.memory_common import REMINDER, clean_line, echoes_prompt
from recagent_gym.prompts.template import load_template

NAME = "memory_reflection"
STOP = ("\n\n",)


def build(agent_name: str, memories: Sequence[str], count: int, *, retry: bool = False) -> str:
    lines = "\n".join(f"- {' '.join(m.split())}" for m in memories)
    return (
        load_template(NAME)
        .render(agent_name=agent_name, memories=lines, count=count, reminder=REMINDER if retry else "")
        .rstrip()
    )


MAX_CANDIDATES = 16
"""Lines of a reply considered as insights (a reply holds at most ``count`` <= 5 of them; the rest is noise)."""


def parse(text: str) -> list[str]:
    """The reply's non-empty lines, cleaned: at most :data:`MAX_CANDIDATES`, read from its capped start."""
    lines = [line for line in (clean_line(raw) for raw in cap_reply(text).split("\n")) if line]
    return lines[:MAX_CANDIDATES]


def valid_insights(
    candidates: Sequence[str], memories: Sequence[str], count: int, max_chars: int, agent_name: str = ""
) -> list[str]:
    """The acceptable candidates, without repeats, at most ``count``."""
    kept: list[str] = []
    for text in candidates:
        valid = memory_insight.validate(text, memories, max_chars, agent_name) is None and not echoes_prompt(
            text, NAME, memories
        )
        if valid and text.lower() not in (k.lower() for k in kept):
            kept.append(text)
        if len(kept) == count:
            break
    return kept


def fallback() -> list[str]:
    return []
