"""Contract of ``templates/feeling_rating.txt``: the feeling line and the 1..5 rating of a watched movie in ONE reply
(``<rating> | <sentence>``), for remote models that follow a format; the embedded model keeps the two prompts
``feeling.txt`` and ``rating.txt`` (its ``choose`` scores options by likelihood).

Build: the agent's feeling-relevant profile (static part first, so servers with prefix caching reuse it) and the item
line. Generate with a newline stop. Validate: a rating digit 1..5 (``4``, ``4/5``), a separator (``|``, ``:``, ``-``),
and a feeling line valid under the feeling contract. Fallback (after one re-ask): both the feeling's and the
rating's documented fallbacks, each counted.
"""

from __future__ import annotations

import re

from recagent_gym.prompts import feeling
from recagent_gym.prompts.template import load_template

STOP: tuple[str, ...] = ("\n",)
EXAMPLE = "I enjoyed the story but the ending dragged."
"""The template's example sentence: a reply that copies it is an echo, hence invalid."""
_REPLY = re.compile(r"^\W*([1-5])(?:\s*/\s*5)?\s*(?:stars?)?\s*[|:\-\u2013\u2014,.]\s*(.+)$", re.IGNORECASE)


def build(*, profile: str, name: str, item: str) -> str:
    return load_template("feeling_rating").render(profile=profile, name=name, item=item)


def parse(text: str, prompt: str) -> tuple[float, str] | None:
    """``(rating, feeling)`` of a reply, or None when either part is missing or invalid."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    match = _REPLY.match(line.strip())
    if match is None:
        return None
    sentence = feeling.validate(match.group(2), prompt)
    if sentence is None or sentence.rstrip(".") == EXAMPLE.rstrip("."):
        return None
    return float(match.group(1)), sentence


def validate(text: str, prompt: str) -> str | None:
    """The canonical ``"<rating> | <feeling>"`` line of a valid reply (what :func:`parse` reads back), else None."""
    parsed = parse(text, prompt)
    return None if parsed is None else f"{parsed[0]:g} | {parsed[1]}"
