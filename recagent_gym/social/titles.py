"""Find catalogue titles mentioned in free text (chat lines, posts): the "recently heard" items.

Titles are normalised (lower case, punctuation to spaces; MovieLens's trailing article ``"Matrix, The"`` also
indexed as ``"the matrix"``) and matched greedily, longest first, on word boundaries. To keep ordinary words from
counting as movies, a one-word title must have at least :data:`MIN_SINGLE_WORD_CHARS` letters and be capitalised
in the text. When several items share a title, the most popular one is taken (a documented choice: the text does
not say which; nothing is ever matched to an item whose title is not in the text).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

MIN_SINGLE_WORD_CHARS = 5
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_ARTICLE = re.compile(r"^(?P<body>.+), (?P<article>The|A|An)$")


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def _forms(title: str) -> list[str]:
    match = _ARTICLE.match(title.strip())
    if match:
        return [f"{match['article']} {match['body']}", match["body"]]
    return [title]


class TitleMatcher:
    """Index of catalogue titles; :meth:`find` returns item ids mentioned in a text, in order of mention."""

    def __init__(self, titles: Sequence[str], popularity: Sequence[float] | np.ndarray | None = None) -> None:
        pop = np.zeros(len(titles)) if popularity is None else np.asarray(popularity, dtype=float)
        self._index: dict[tuple[str, ...], int] = {}
        for item, title in enumerate(titles):
            for form in _forms(str(title)):
                key = tuple(_tokens(form))
                if not key or (len(key) == 1 and len(key[0]) < MIN_SINGLE_WORD_CHARS):
                    continue
                current = self._index.get(key)
                if current is None or pop[item] > pop[current]:
                    self._index[key] = item
        self._max_len = max((len(k) for k in self._index), default=0)

    def find(self, text: str) -> list[int]:
        words = _TOKEN.findall(text)
        lowered = [w.lower() for w in words]
        found: list[int] = []
        i = 0
        while i < len(words):
            for n in range(min(self._max_len, len(words) - i), 0, -1):
                item = self._index.get(tuple(lowered[i : i + n]))
                if item is None or (n == 1 and not words[i][0].isupper()):
                    continue
                if item not in found:
                    found.append(item)
                i += n
                break
            else:
                i += 1
        return found
