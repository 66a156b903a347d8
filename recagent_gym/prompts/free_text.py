"""Shared checks of free-text answers (feeling, chat, post, interview, search query): clean, then validate.

A small base model often echoes a line of its prompt, answers with nothing, or runs on for lines; these helpers turn
an answer into one clean line or ``None`` (invalid), so each contract module can re-ask once and then fall back.
"""

from __future__ import annotations

import re

_SPACE = re.compile(r"\s+")
_HAS_WORD = re.compile(r"[^\W\d_]{2,}", re.UNICODE)


def first_line(text: str) -> str:
    """The first non-empty line, whitespace collapsed, surrounding quotes stripped."""
    for line in text.splitlines():
        line = _SPACE.sub(" ", line).strip().strip("\"'“”").strip()
        if line:
            return line
    return ""


def truncate_words(text: str, max_chars: int) -> str:
    """``text`` cut at a word boundary so that it fits in ``max_chars`` (a single long word is cut hard)."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars].rsplit(" ", 1)[0]
    return cut or text[:max_chars]


def clean_answer(text: str, prompt: str, *, max_chars: int, min_words: int = 1) -> str | None:
    """One usable line from ``text``, or ``None`` when it is empty, wordless, too short or an echo of the prompt."""
    line = first_line(text)
    if not line or not _HAS_WORD.search(line) or len(line.split()) < min_words:
        return None
    prompt_lines = {_SPACE.sub(" ", p).strip() for p in prompt.splitlines()}
    if line in prompt_lines:
        return None
    return truncate_words(line, max_chars)
