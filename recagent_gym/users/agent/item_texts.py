"""Item texts of the agents' prompts: title, ``Title (year) [genres]``, the scoring line, the description."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from recagent_gym.data.item_text import compose_item_text
from recagent_gym.data.schema import Dataset


class ItemTexts:
    """Item texts from the catalogue, cached. The columns are read into lists once: a row of the items table costs
    about half a millisecond to read, and every page prompt quotes ten items. ``scoring_genres``: the few-shot
    scoring line carries genres."""

    def __init__(self, dataset: Dataset, *, scoring_genres: bool = False) -> None:
        self.dataset = dataset
        self.scoring_genres = scoring_genres
        self._lines: dict[int, str] = {}
        self._descriptions: dict[int, str] = {}

    @cached_property
    def _columns(self) -> dict[str, list[Any]]:
        items = self.dataset.items
        return {c: items[c].tolist() for c in ("title", "year", "genres", "description", "tags") if c in items}

    def _year(self, item: int) -> int | None:
        year = self._columns["year"][item]
        return int(year) if year and year > 0 else None

    def title(self, item: int) -> str:
        return str(self._columns["title"][item])

    def line(self, item: int) -> str:
        """Short item text for prompts: ``Title (year) [genres]`` (no description: keeps the prefix small)."""
        if item not in self._lines:
            year = self._year(item)
            genres = ", ".join(self._columns["genres"][item])
            self._lines[item] = f"{self.title(item)}{'' if year is None else f' ({year})'} [{genres}]"
        return self._lines[item]

    def scoring_line(self, item: int) -> str:
        """Item text in the few-shot scoring prompt: ``Title (year)``, with genres if ``scoring_genres``."""
        if self.scoring_genres:
            return self.line(item)
        year = self._year(item)
        return self.title(item) if year is None else f"{self.title(item)} ({year})"

    def description(self, item: int) -> str:
        """The catalogue's full text of the item (as ``Dataset.item_text`` composes it)."""
        if item not in self._descriptions:
            cols = self._columns
            self._descriptions[item] = compose_item_text(
                title=cols["title"][item], year=self._year(item), genres=cols["genres"][item],
                description=cols["description"][item] or "", tags=cols["tags"][item] or "",
            )  # fmt: skip
        return self._descriptions[item]
