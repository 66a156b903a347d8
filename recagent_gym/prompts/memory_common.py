"""Helpers shared by the memory prompts' contracts: cleaning a model line, spotting prompt echo, truncation."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from functools import cache, lru_cache

from recagent_gym.prompts.template import load_template

REMINDER = "(Answer with one new sentence; do not copy the text above.)\n"
"""Added to a prompt when it is asked again after an invalid answer."""

_PREFIX = re.compile(
    r"^\s*(?:[-*\u2022]+|\(?\d+[.)]|(?:sentence|insight|summary|answer|memory)\s*\d*\s*:)\s*", re.IGNORECASE
)
_QUOTES = "\"'`\u201c\u201d\u2018\u2019"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def clean_line(text: str) -> str:
    """A model line without list markers, a leading ``Label:``, surrounding quotes or extra spaces."""
    line = _PREFIX.sub("", text.strip(), count=1).strip()
    line = line.strip(_QUOTES).strip()
    return " ".join(line.split())


ECHO_CHARS = 20
"""Answers shorter than this are never called echoes; template lines shorter than this are not compared."""

ECHO_COVERAGE = 0.6
"""Share of an answer matched by a template line above which (and above its match with the inputs) it is an echo."""

MAX_ECHO_CHARS = 1024
"""Longest answer :func:`echoes_prompt` compares (its first characters); longer ones are judged by them."""


@cache
def fixed_fragments(template_name: str) -> tuple[str, ...]:
    """The template's lines with placeholders removed, lower-cased, of at least ECHO_CHARS (plus the reminder)."""
    literal = "".join(chunk for chunk, _, _, _ in string.Formatter().parse(load_template(template_name).text))
    pieces = [" ".join(line.lower().split()) for line in literal.splitlines()]
    pieces.append(REMINDER.strip().lower())
    return tuple(p for p in pieces if len(p) >= ECHO_CHARS)


def coverage(answer: str, text: str, min_block: int = 4) -> float:
    """Share of ``answer``'s characters inside a run of at least ``min_block`` characters that also occurs in
    ``text``: every ``min_block``-gram of ``answer`` found in ``text`` covers its characters. Linear time (a set of
    the text's n-grams, cached for the fixed template lines), unlike a longest-match alignment, which cost 1.6 s
    per 100-agent round in the echo check."""
    n = len(answer)
    if not n or n < min_block:
        return 0.0
    grams = _grams(text, min_block)
    covered = bytearray(n)
    for i in range(n - min_block + 1):
        if answer[i : i + min_block] in grams:
            covered[i : i + min_block] = b"\x01" * min_block
    return sum(covered) / n


@lru_cache(maxsize=4096)
def _grams(text: str, size: int) -> frozenset[str]:
    return frozenset(text[i : i + size] for i in range(len(text) - size + 1))


def echoes_prompt(answer: str, template_name: str, inputs: Sequence[str] = ()) -> bool:
    """True when the answer is mostly the template's own wording (a small base model's favourite failure): a
    template line covers at least ECHO_COVERAGE of it, and more of it than any of the prompt's ``inputs`` (the
    observation, the memories) does, so faithful answers that reuse the input's words are not echoes."""
    low = " ".join(answer[: 2 * MAX_ECHO_CHARS].lower().split())[:MAX_ECHO_CHARS]
    if len(low) < ECHO_CHARS:
        return False
    from_template = max((coverage(low, f) for f in fixed_fragments(template_name)), default=0.0)
    if from_template < ECHO_COVERAGE:
        return False
    from_inputs = max((coverage(low, " ".join(t.lower().split())) for t in inputs), default=0.0)
    return from_template > from_inputs


_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")
_STARTERS = frozenset(
    {"a", "an", "the", "he", "she", "they", "it", "i", "his", "her", "their", "its", "this", "that", "these"}
    | {"those", "in", "on", "at", "after", "before", "when", "while", "one", "some", "most", "all", "both"}
)


def _norm(word: str) -> str:
    low = word.lower()
    return low[:-2] if low.endswith("'s") else low


def invented_names(answer: str, sources: Sequence[str]) -> list[str]:
    """Capitalised words and numbers of ``answer`` found in none of ``sources`` (a small model's invented titles
    and names). A sentence's first word counts only when it is not a common sentence starter."""
    known = {_norm(w) for text in sources for w in _WORD.findall(text)}
    invented = []
    for position, word in enumerate(_WORD.findall(answer)):
        if not (word[0].isupper() or any(ch.isdigit() for ch in word)):
            continue
        if position == 0 and word.lower() in _STARTERS:
            continue
        if _norm(word) not in known:
            invented.append(word)
    return invented


_THIRD_PERSON = frozenset({"he", "she", "they", "his", "her", "their", "him", "them"})
_COMMON = frozenset({"that", "this", "with", "about", "from", "have", "like", "likes", "very", "more", "most", "were"})


def grounded(answer: str, sources: Sequence[str], agent_name: str) -> str | None:
    """None when ``answer`` is about the agent (its name or a third-person pronoun) and shares a content word (four
    letters or more) with ``sources``; else what is missing."""
    words = [_norm(w) for w in _WORD.findall(answer)]
    names = {_norm(w) for w in _WORD.findall(agent_name)}
    if not (names.intersection(words) or _THIRD_PERSON.intersection(words)):
        return "not about the agent"
    known = {_norm(w) for text in sources for w in _WORD.findall(text)}
    if not any(len(w) >= 4 and w not in _COMMON and w not in names and w in known for w in words):
        return "shares no word with the memories"
    return None


def is_statement(text: str) -> bool:
    """At least three words and not a heading (``Ann's tastes are:``)."""
    return len(text.split()) >= 3 and not text.rstrip().endswith(":")


def first_sentence(text: str, max_chars: int) -> str:
    """The first sentence of ``text`` (whitespace collapsed), cut at a word boundary to ``max_chars``."""
    flat = " ".join(text.split())
    sentence = _SENTENCE_END.split(flat, maxsplit=1)[0]
    if len(sentence) <= max_chars:
        return sentence
    cut = sentence[: max_chars - 3].rsplit(" ", 1)[0] or sentence[: max_chars - 3]
    return cut.rstrip(" ,;:") + "..."
