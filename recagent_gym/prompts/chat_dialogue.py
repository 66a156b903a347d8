"""Contract of ``templates/chat_dialogue.txt``: a whole chat between two friends in ONE reply (as the paper's own
chat prompt writes it), for remote models; the embedded model writes one utterance per call (``chat.py``).

Build: the instructions first (static, for prefix caching), then both speakers' social profile, memory and recent
movies; the reply continues after ``<first>:``. Generate without a newline stop, ``turns`` utterances' worth of
tokens. Parse: the first line is the first speaker's, every further line ``<name>: <text>`` with the two names
alternating; each utterance valid under the chat contract (``chat.validate``); lines past ``turns`` are dropped.
Valid: at least two utterances, starting with the first speaker. Fallback (after one re-ask): the template lines of
``chat.fallback`` for every turn; counted.
"""

from __future__ import annotations

from collections.abc import Callable

from recagent_gym.prompts import chat
from recagent_gym.prompts.template import load_template

MIN_LINES = 2


def build(*, first: dict[str, str], second: dict[str, str], turns: int, clock: str) -> str:
    """``first``/``second``: ``name``, ``profile``, ``memory``, ``recent`` of each speaker."""
    return load_template("chat_dialogue").render(
        turns=turns,
        clock=clock,
        first=first["name"],
        first_profile=first["profile"],
        first_memory=first["memory"],
        first_recent=first["recent"],
        second=second["name"],
        second_profile=second["profile"],
        second_memory=second["memory"],
        second_recent=second["recent"],
    )


def parse(text: str, prompt: str, *, first: str, second: str, turns: int) -> list[tuple[int, str]] | None:
    """``[(speaker 0 or 1, utterance), ...]`` alternating from speaker 0, or None when unusable."""
    lines: list[tuple[int, str]] = []
    names = (first, second)
    for k, raw in enumerate(ln for ln in text.splitlines() if ln.strip()):
        if len(lines) == turns:
            break
        who = len(lines) % 2
        body = raw.strip()
        if k == 0 and not body.lower().startswith(names[who].lower() + ":"):
            pass  # the prompt already wrote the first speaker's name
        else:
            head, sep, rest = body.partition(":")
            if not sep or head.strip().lower() != names[who].lower():
                break  # a line by someone else, or out of turn: the dialogue ends here
            body = rest
        utterance = chat.validate(body, prompt)
        if utterance is None:
            break
        lines.append((who, utterance))
    return lines if len(lines) >= MIN_LINES else None


def validate_for(*, first: str, second: str, turns: int) -> Callable[[str, str], str | None]:
    """A ``generate_checked`` validator: the canonical transcript (one ``<0|1>\\t<utterance>`` per line) or None."""

    def validate(text: str, prompt: str) -> str | None:
        parsed = parse(text, prompt, first=first, second=second, turns=turns)
        return None if parsed is None else "\n".join(f"{who}\t{line}" for who, line in parsed)

    return validate


def read(canonical: str) -> list[tuple[int, str]]:
    """The ``(speaker, utterance)`` pairs of a canonical transcript from :func:`validate_for`."""
    out = []
    for row in canonical.splitlines():
        who, _, line = row.partition("\t")
        out.append((int(who), line))
    return out
