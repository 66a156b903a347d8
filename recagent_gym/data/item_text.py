"""The item text users read and the embedders embed, composed from whatever a dataset has.

MovieLens-1M and -100K have titles, years and genres only; MovieLens-latest adds user tags; RecAgent's CSV (or
:func:`recagent_gym.data.descriptions.attach_descriptions` on MovieLens-1M) adds descriptions. One function turns
any of these into one line, so a dataset without descriptions still gives the embedding user and the memory
retrieval more than a title::

    Toy Story (1995) [Animation, Children's, Comedy]: A cowboy doll is threatened by a new toy. Tags: pixar, fun.

Order: title, ``(year)`` when known, ``[genres]``, ``: description`` when given, ``Tags: ...`` when the item has tags
that the description does not already carry (MovieLens-latest templates its tags into the description, see
``data/fields.py::tags_description``; they are not repeated). The prefix ``Title (year) [genres]`` is the one the
project always used, so existing embedding caches of description-less items stay valid.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_TAGS = 10
"""Tags kept (in the dataset's order: most frequent first for MovieLens-latest)."""


def compose_item_text(
    *,
    title: str,
    year: int | None = None,
    genres: Sequence[str] = (),
    description: str = "",
    tags: str = "",
    max_tags: int = MAX_TAGS,
) -> str:
    """One line describing an item from its title, year, genres, description and comma-separated tags."""
    text = str(title).strip()
    if year is not None and int(year) > 0:
        text += f" ({int(year)})"
    text += f" [{', '.join(str(g) for g in genres)}]"
    description = description.strip() if isinstance(description, str) else ""  # NaN from a sparse table
    tags = tags if isinstance(tags, str) else ""
    if description:
        text += f": {description}"
    kept = [t.strip() for t in tags.split(",") if t.strip()][:max_tags]
    if kept and not all(t.lower() in description.lower() for t in kept):
        text += (" " if description else ": ") + f"Tags: {', '.join(kept)}."
    return text
