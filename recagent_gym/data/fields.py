"""Field conventions shared by the loaders: titles and years, genres, tags, and MovieLens demographic codes."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

NO_GENRES = frozenset({"", "(no genres listed)", "unknown"})
"""Genre labels that mean "none": they give an empty genre tuple."""

# "Title (1995)", "Title (2006–2007)" (series), "Title (1995) " (trailing space in some MovieLens rows).
_TITLE_YEAR = re.compile(r"^(?P<title>.*?)\s*\((?P<year>[0-9]{4})(?:\s*[–-]\s*[0-9]{0,4})?\)\s*$")

# "Usual Suspects, The" -> "The Usual Suspects" (also before an alternative title in parentheses), as RecAgent's
# item file writes titles and as people (and language models) read them.
_TRAILING_ARTICLE = re.compile(
    r"^(?P<body>.+?), (?P<article>The|A|An|Les|La|Le|L'|Il|El|Das|Der|Die)(?P<rest> \(.*\))?$"
)

ML1M_OCCUPATIONS: dict[int, str] = {
    0: "other",
    1: "academic/educator",
    2: "artist",
    3: "clerical/admin",
    4: "college/grad student",
    5: "customer service",
    6: "doctor/health care",
    7: "executive/managerial",
    8: "farmer",
    9: "homemaker",
    10: "K-12 student",
    11: "lawyer",
    12: "programmer",
    13: "retired",
    14: "sales/marketing",
    15: "scientist",
    16: "self-employed",
    17: "technician/engineer",
    18: "tradesman/craftsman",
    19: "unemployed",
    20: "writer",
}
"""MovieLens-1M occupation codes (its README); code 0 is "other or not specified"."""

WHOLE_STARS: tuple[float, float] = (1.0, 5.0)
"""The rating scale of MovieLens-1M and -100K (1 to 5 stars); a rating off it is a malformed row."""

HALF_STARS: tuple[float, float] = (0.5, 5.0)
"""The rating scale of MovieLens latest (0.5 to 5 stars), also required of RecAgent CSV ratings: the users'
statistics (conformity, :mod:`recagent_gym.data.stats`) assume a 5-star scale."""

ML1M_AGE_BANDS: dict[int, int] = {1: 15, 18: 21, 25: 30, 35: 40, 45: 47, 50: 53, 56: 60}
"""MovieLens-1M age-band codes mapped to an age inside the band (its middle; 15 for "under 18", 60 for "56+")."""

ML100K_GENRES: tuple[str, ...] = (
    "unknown",
    "Action",
    "Adventure",
    "Animation",
    "Children's",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Fantasy",
    "Film-Noir",
    "Horror",
    "Musical",
    "Mystery",
    "Romance",
    "Sci-Fi",
    "Thriller",
    "War",
    "Western",
)
"""The 19 genre flags of MovieLens-100K ``u.item``, in file order (``u.genre``)."""

MAX_TAGS = 5
"""Tags kept per item (the most frequent ones)."""


def split_title(title: str) -> tuple[str, int]:
    """``"Usual Suspects, The (1995)"`` -> ``("The Usual Suspects", 1995)``; without a year, -1."""
    title, year = title.strip(), -1
    match = _TITLE_YEAR.match(title)
    if match and match.group("title"):
        title, year = match.group("title"), int(match.group("year"))
    article = _TRAILING_ARTICLE.match(title)
    if article:
        sep = "" if article.group("article").endswith("'") else " "
        title = f"{article.group('article')}{sep}{article.group('body')}{article.group('rest') or ''}"
    return title, year


def split_genres(text: str, sep: str = "|") -> tuple[str, ...]:
    """``"A|B"`` -> ``("A", "B")``; ``"(no genres listed)"`` and empty -> ``()``; duplicates dropped."""
    genres = (g.strip() for g in text.split(sep))
    return tuple(dict.fromkeys(g for g in genres if g not in NO_GENRES))


def split_list(text: str) -> tuple[str, ...]:
    """A free-text list such as ``"sci-fi; comedy"``: split on ``;`` or ``|`` when present, else on commas."""
    text = text.strip()
    if not text:
        return ()
    sep = ";" if ";" in text else "|" if "|" in text else ","
    return tuple(dict.fromkeys(part.strip() for part in text.split(sep) if part.strip()))


def gender_word(code: str) -> str:
    """``M``/``F`` (any case) -> ``male``/``female``; other text is kept as written, stripped."""
    value = code.strip()
    return {"m": "male", "f": "female"}.get(value.lower(), value)


def fold_tags(item_pos: Iterable[int], tags: Iterable[str], n_items: int, limit: int = MAX_TAGS) -> list[str]:
    """Per item, its ``limit`` most frequent tags (case-insensitive duplicates merged; ties alphabetical), joined.

    A merged tag keeps its most common spelling (ties: first seen). Returns one string per item (empty if untagged).
    """
    counts: dict[int, Counter[str]] = {}
    spellings: dict[tuple[int, str], Counter[str]] = {}
    for item, raw in zip(item_pos, tags, strict=True):
        tag = raw.strip()
        if not tag:
            continue
        key = tag.lower()
        counts.setdefault(int(item), Counter())[key] += 1
        spellings.setdefault((int(item), key), Counter())[tag] += 1
    folded = [""] * n_items
    for item, counter in counts.items():
        top = sorted(counter, key=lambda k: (-counter[k], k))[:limit]
        folded[item] = ", ".join(spellings[item, k].most_common(1)[0][0] for k in top)
    return folded


def tags_description(tags: str) -> str:
    """The templated description of a tagged item (so tags reach :meth:`Dataset.item_text`); empty if untagged."""
    return f"Viewers tag it: {tags}." if tags else ""
