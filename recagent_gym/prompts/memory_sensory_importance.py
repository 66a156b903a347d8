"""Contract of the ``memory_sensory_importance`` prompt: the sensory sentence and its importance in ONE reply
(``<sentence> | Importance: <level>``), for remote models (``memory.importance_with_summary``).

The instructions and examples come first and the observation last, so servers with prefix caching reuse the static
part. Parse: the sentence before the last ``|`` (valid under :func:`memory_sensory.validate`) and the level after it
(``1`` .. ``levels``). A reply whose sentence is invalid is re-asked once, then the sensory fallback applies; a valid
sentence without a usable level keeps the sentence and its importance comes from the importance ``choose`` (both
counted by the writer).
"""

from __future__ import annotations

import re

from recagent_gym.prompts import memory_importance, memory_sensory
from recagent_gym.prompts.memory_common import REMINDER
from recagent_gym.prompts.template import load_template

NAME = "memory_sensory_importance"
STOP = ("\n",)
_LEVEL = re.compile(r"(?:importance)?\s*[:=]?\s*(\d{1,2})\b", re.IGNORECASE)


def build(observation: str, levels: int, *, retry: bool = False) -> str:
    flat = " ".join(observation.split())
    text = load_template(NAME).render(observation=flat, levels=levels, reminder=REMINDER if retry else "")
    return text.rstrip()


def parse(text: str, observation: str, max_chars: int, levels: int) -> tuple[str, float | None] | None:
    """``(sentence, importance in [0, 1] or None)``, or None when the sentence is invalid."""
    line = text.strip().split("\n", 1)[0] if text.strip() else ""
    head, sep, tail = line.rpartition("|")
    if not sep:
        head, tail = line, ""
    sentence = memory_sensory.parse(head)
    if memory_sensory.validate(sentence, observation, max_chars) is not None:
        return None
    match = _LEVEL.match(tail.strip())
    return sentence, memory_importance.from_level(int(match.group(1)), levels) if match else None
