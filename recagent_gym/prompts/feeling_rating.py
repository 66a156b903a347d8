"""Contract of ``templates/feeling_rating.txt``: the feeling line and the 1..5 rating of a watched movie in ONE reply
(``<rating> | <sentence>``), for remote models that follow a format; the embedded model keeps the two prompts
``feeling.txt`` and ``rating.txt`` (its ``choose`` scores options by likelihood).

With ``levels`` (the agent's memory scores importance on ``1..levels``), the same reply also says how memorable the
movie was (``templates/feeling_rating_memory.txt``: ``<rating> | <sentence> | <level>``): the agent's memory then
stores its feeling note as written, at that importance, without a compression call of its own. A reply without a
usable level keeps its rating and feeling; the note is then compressed and scored as any observation.

Build: the agent's feeling-relevant profile (static part first, so servers with prefix caching reuse it) and the item
line. Generate with a newline stop. Validate: a rating digit 1..5 (``4``, ``4/5``), a separator (``|``, ``:``, ``-``),
and a feeling line valid under the feeling contract. Fallback (after one re-ask): both the feeling's and the
rating's documented fallbacks, each counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from recagent_gym.prompts import feeling, memory_importance
from recagent_gym.prompts.template import load_template

STOP: tuple[str, ...] = ("\n",)
EXAMPLE = "I enjoyed the story but the ending dragged."
"""The template's example sentence: a reply that copies it is an echo, hence invalid."""
_REPLY = re.compile(r"^\W*([1-5])(?:\s*/\s*5)?\s*(?:stars?)?\s*[|:\-\u2013\u2014,.]\s*(.+)$", re.IGNORECASE)


_LEVEL = re.compile(r"^\s*(?:importance|memorable)?\s*[:=]?\s*(\d{1,2})\s*(?:/\s*\d{1,2})?\W*$", re.IGNORECASE)


@dataclass(frozen=True)
class Reply:
    rating: float
    feeling: str
    level: int | None = None
    """How memorable, as written (None: not asked, or no number at the end of the reply)."""

    def importance(self, levels: int) -> float | None:
        """The level as the memory's importance in [0, 1]; None without a level in ``1..levels``."""
        return None if self.level is None else memory_importance.from_level(self.level, levels)


def build(*, profile: str, name: str, item: str, levels: int | None = None) -> str:
    if levels is None:
        return load_template("feeling_rating").render(profile=profile, name=name, item=item)
    return load_template("feeling_rating_memory").render(profile=profile, name=name, item=item, levels=levels)


def parse(text: str, prompt: str, levels: int | None = None) -> Reply | None:
    """The rating, feeling (and, with ``levels``, the level) of a reply; None when the rating or the feeling is
    missing or invalid."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    match = _REPLY.match(line.strip())
    if match is None:
        return None
    rest, level = match.group(2), None
    if levels is not None:
        head, sep, tail = rest.rpartition("|")
        found = _LEVEL.match(tail) if sep else None
        if found is not None:  # a tail that is only a number; any other tail belongs to the sentence
            rest, level = head, int(found.group(1))
    sentence = feeling.validate(rest.strip().rstrip("|").strip(), prompt)
    if sentence is None or sentence.rstrip(".") == EXAMPLE.rstrip("."):
        return None
    return Reply(float(match.group(1)), sentence, level)


def validate(text: str, prompt: str, levels: int | None = None) -> str | None:
    """The canonical ``"<rating> | <feeling>[ | <level>]"`` line of a valid reply (what :func:`parse` reads back),
    else None."""
    parsed = parse(text, prompt, levels)
    if parsed is None:
        return None
    line = f"{parsed.rating:g} | {parsed.feeling}"
    return line if parsed.level is None else f"{line} | {parsed.level}"
