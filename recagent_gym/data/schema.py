"""The typed tables every loader produces and every other module consumes.

A :class:`Dataset` holds four pandas tables with fixed columns. Ids are dense: ``item_id`` is ``0..n_items-1`` and
``user_id`` is ``0..n_users-1`` (row ``i`` of the table has id ``i``); the dataset's own ids are kept in ``raw_id``.

========================  =============================================================================
table / column            meaning
========================  =============================================================================
items.item_id             int, dense 0..n_items-1 (also the row number)
items.raw_id              the dataset's own id (str)
items.title               title without the year
items.genres              tuple[str, ...]
items.year                int, or -1 when unknown
items.description         short text (may be empty)
items.tags                user tags folded into one string (may be empty)
users.user_id             int, dense 0..n_users-1
users.raw_id              the dataset's own id (str)
users.name/gender/age     profile fields of the paper (age: int, -1 when unknown)
users.traits/career       free text
users.interests           tuple[str, ...] (dataset-aligned: the user's top genres)
users.features            tuple[str, ...] behaviour features among :data:`BEHAVIOUR_FEATURES`
users.activity            interactions per active day, normalised to [0, 1] over the dataset (Agent4Rec)
users.diversity           genre entropy of the history, normalised to [0, 1]
users.conformity          1 - mean |rating - item mean rating| / 4, in [0, 1]
interactions.user_id      int (dense)
interactions.item_id      int (dense)
interactions.rating       float (NaN when implicit)
interactions.timestamp    int, seconds since the epoch
social.user_1 / user_2    int (dense user ids)
social.relationship       str, e.g. ``friend``
========================  =============================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from recagent_gym.errors import RecAgentError

BEHAVIOUR_FEATURES: tuple[str, ...] = ("Watcher", "Explorer", "Critic", "Chatter", "Poster")

ITEM_COLUMNS = ("item_id", "raw_id", "title", "genres", "year", "description", "tags")
USER_COLUMNS = (
    "user_id",
    "raw_id",
    "name",
    "gender",
    "age",
    "traits",
    "career",
    "interests",
    "features",
    "activity",
    "diversity",
    "conformity",
)
INTERACTION_COLUMNS = ("user_id", "item_id", "rating", "timestamp")
SOCIAL_COLUMNS = ("user_1", "user_2", "relationship")
MAX_TAGS = 10
"""Tags kept in an item text (in the dataset's order: most frequent first for MovieLens-latest)."""


class DataError(RecAgentError, ValueError):
    """Malformed or inconsistent data; the message names the file, the line and the problem."""

    label = "data error"


@dataclass
class Dataset:
    """Items, users, interactions and social links, with dense ids (see the module docstring for columns)."""

    name: str
    items: pd.DataFrame
    users: pd.DataFrame
    interactions: pd.DataFrame
    social: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(SOCIAL_COLUMNS)))
    skipped_rows: int = 0
    """Malformed rows skipped while loading (only with ``on_bad_row='skip'``)."""
    _item_lists: tuple[int, dict[str, list[Any]]] = field(
        default_factory=lambda: (0, {}), init=False, repr=False, compare=False
    )  # (id of the items table they were read from, its columns read as lists)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_users(self) -> int:
        return len(self.users)

    @property
    def genres(self) -> tuple[str, ...]:
        """All genres, sorted."""
        return tuple(sorted({g for gs in self.items["genres"] for g in gs}))

    def genre_matrix(self) -> np.ndarray:
        """``(n_items, n_genres)`` float32 multi-hot matrix in the order of :attr:`genres`."""
        index = {g: j for j, g in enumerate(self.genres)}
        matrix = np.zeros((self.n_items, len(index)), dtype=np.float32)
        for i, gs in enumerate(self.items["genres"]):
            for g in gs:
                matrix[i, index[g]] = 1.0
        return matrix

    def item_popularity(self) -> np.ndarray:
        """Interaction count per item, ``(n_items,)`` int64."""
        return np.bincount(self.interactions["item_id"].to_numpy(), minlength=self.n_items).astype(np.int64)

    def user_history(self, user_id: int) -> pd.DataFrame:
        """The user's interactions in time order."""
        rows = self.interactions[self.interactions["user_id"] == user_id]
        return rows.sort_values("timestamp", kind="stable")

    def item_column(self, name: str) -> list[Any]:
        """Column ``name`` of the items table as a list, read once per table: prompts quote items one by one, and
        a list index costs far less than a pandas row (about 26 µs per ``iloc`` row on the bundled data)."""
        table, lists = self._item_lists
        if table != id(self.items):  # a new items table (``dataclasses.replace`` resets this anyway)
            lists = {}
            self._item_lists = (id(self.items), lists)
        if name not in lists:
            lists[name] = self.items[name].tolist()
        return lists[name]

    def title(self, item_id: int) -> str:
        return str(self.item_column("title")[item_id])

    def item_text(self, item_id: int) -> str:
        """One line describing an item (:func:`compose_item_text`)."""
        col = self.item_column
        return compose_item_text(title=col("title")[item_id], year=col("year")[item_id] or None,
                                 genres=col("genres")[item_id], description=col("description")[item_id] or "",
                                 tags=col("tags")[item_id] or "")  # fmt: skip

    def validate(self) -> None:
        """Raise :class:`DataError` when a table misses columns or ids are not dense and consistent."""
        for table, columns in (
            ("items", ITEM_COLUMNS),
            ("users", USER_COLUMNS),
            ("interactions", INTERACTION_COLUMNS),
            ("social", SOCIAL_COLUMNS),
        ):
            missing = set(columns) - set(getattr(self, table).columns)
            if missing:
                raise DataError(f"{self.name}: table {table} misses columns {sorted(missing)}")
        if not np.array_equal(self.items["item_id"].to_numpy(), np.arange(self.n_items)):
            raise DataError(f"{self.name}: item ids are not dense 0..n_items-1")
        if not np.array_equal(self.users["user_id"].to_numpy(), np.arange(self.n_users)):
            raise DataError(f"{self.name}: user ids are not dense 0..n_users-1")
        inter = self.interactions
        if len(inter) and (inter["item_id"].max() >= self.n_items or inter["user_id"].max() >= self.n_users):
            raise DataError(f"{self.name}: interactions refer to unknown users or items")


def compose_item_text(
    *,
    title: str,
    year: int | None = None,
    genres: Sequence[str] = (),
    description: str = "",
    tags: str = "",
    max_tags: int = MAX_TAGS,
) -> str:
    """One line describing an item from its title, year, genres, description and comma-separated tags: the item
    text users read and embedders embed, composed from whatever a dataset has.

    MovieLens-1M and -100K have titles, years and genres only; MovieLens-latest adds user tags; RecAgent's CSV (or
    :func:`recagent_gym.data.descriptions.attach_descriptions` on MovieLens-1M) adds descriptions. One function turns
    any of these into one line, so a dataset without descriptions still gives the embedding user and the memory
    retrieval more than a title::

        Toy Story (1995) [Animation, Children's, Comedy]: A cowboy doll is threatened by a new toy. Tags: pixar, fun.

    Order: title, ``(year)`` when known, ``[genres]``, ``: description`` when given, ``Tags: ...`` when the item has
    tags that the description does not already carry (MovieLens-latest templates its tags into the description, see
    ``data/fields.py::tags_description``; they are not repeated). The prefix ``Title (year) [genres]`` is the one the
    project always used, so existing embedding caches of description-less items stay valid.
    """
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
