"""Contract of the ``memory_sensory`` prompt: compress one observation into one sentence.

The prompt (trailing whitespace stripped) ends in ``Sentence:``. build -> ``generate(max_tokens=sensory_max_tokens,
stop=["\\n"])``; parse the first line; valid when non-empty, not longer than the observation nor ``max_chars``, not
an echo of the prompt, and naming no title, name or number absent from the observation; invalid -> one re-ask (with a
reminder), then :func:`fallback`: the observation's first sentence, truncated (counted by the caller).
"""

from __future__ import annotations

from recagent_gym.prompts.memory_common import (
    REMINDER,
    clean_line,
    echoes_prompt,
    first_sentence,
    invented_names,
)
from recagent_gym.prompts.template import load_template

NAME = "memory_sensory"
STOP = ("\n",)


def build(observation: str, *, retry: bool = False) -> str:
    flat = " ".join(observation.split())
    return load_template(NAME).render(observation=flat, reminder=REMINDER if retry else "").rstrip()


def parse(text: str) -> str:
    return clean_line(text.strip().split("\n", 1)[0]) if text.strip() else ""


def validate(sentence: str, observation: str, max_chars: int) -> str | None:
    """None when ``sentence`` is acceptable, else the reason it is not."""
    if not sentence:
        return "empty"
    if len(sentence) > max_chars:
        return f"longer than {max_chars} characters"
    if len(sentence) > len(" ".join(observation.split())):
        return "longer than the observation"
    if echoes_prompt(sentence, NAME, [observation]):
        return "echoes the prompt"
    invented = invented_names(sentence, [observation])
    if invented:
        return f"names what the observation does not: {', '.join(invented)}"
    return None


def fallback(observation: str, max_chars: int) -> str:
    return first_sentence(observation, max_chars)
