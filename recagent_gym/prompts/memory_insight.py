"""Contract of the ``memory_insight`` prompt: one insight about a short-term record promoted after K enhancements.

build -> ``generate(max_tokens=insight_max_tokens, stop=["\\n"])``; parse the first line; valid when a statement (3+
words, no heading), at most ``max_chars``, not a copy of a memory, not an echo of the prompt, naming nothing absent
from the memories, and (given the agent's name) about the agent and sharing a content word with the memories;
invalid -> one re-ask, then
:func:`fallback`: no insight (the record moves to long-term memory alone; counted by the caller).
"""

from __future__ import annotations

from collections.abc import Sequence

from recagent_gym.prompts.memory_common import (
    REMINDER,
    clean_line,
    echoes_prompt,
    grounded,
    invented_names,
    is_statement,
)
from recagent_gym.prompts.template import load_template

NAME = "memory_insight"
STOP = ("\n",)


def build(agent_name: str, memories: Sequence[str], *, retry: bool = False) -> str:
    lines = "\n".join(f"- {' '.join(m.split())}" for m in memories)
    reminder = REMINDER if retry else ""
    return load_template(NAME).render(agent_name=agent_name, memories=lines, reminder=reminder).rstrip()


def parse(text: str) -> str:
    return clean_line(text.strip().split("\n", 1)[0]) if text.strip() else ""


def validate(insight: str, memories: Sequence[str], max_chars: int, agent_name: str = "") -> str | None:
    if not insight:
        return "empty"
    if not is_statement(insight):
        return "not a statement"
    if len(insight) > max_chars:
        return f"longer than {max_chars} characters"
    low = insight.lower().rstrip(".")
    if any(low == " ".join(m.split()).lower().rstrip(".") for m in memories):
        return "copies a memory"
    if echoes_prompt(insight, NAME, memories):
        return "echoes the prompt"
    invented = invented_names(insight, [*memories, agent_name])
    if invented:
        return f"names what the memories do not: {', '.join(invented)}"
    return grounded(insight, memories, agent_name) if agent_name else None


def fallback() -> None:
    return None
