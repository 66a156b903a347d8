"""Item texts of the agents' prompts: title, ``Title (year) [genres]``, the scoring line, the description."""

from __future__ import annotations

from recagent_gym.data.schema import Dataset


class ItemTexts:
    """Item texts from the catalogue, cached; ``scoring_genres``: the few-shot scoring line carries genres."""

    def __init__(self, dataset: Dataset, *, scoring_genres: bool = False) -> None:
        self.dataset = dataset
        self.scoring_genres = scoring_genres
        self._lines: dict[int, str] = {}

    def title(self, item: int) -> str:
        return str(self.dataset.items["title"].iat[item])

    def line(self, item: int) -> str:
        """Short item text for prompts: ``Title (year) [genres]`` (no description: keeps the prefix small)."""
        if item not in self._lines:
            row = self.dataset.items.iloc[item]
            year = f" ({row.year})" if row.year and row.year > 0 else ""
            self._lines[item] = f"{row.title}{year} [{', '.join(row.genres)}]"
        return self._lines[item]

    def scoring_line(self, item: int) -> str:
        """Item text in the few-shot scoring prompt: ``Title (year)``, with genres if ``scoring_genres``."""
        if self.scoring_genres:
            return self.line(item)
        row = self.dataset.items.iloc[item]
        return f"{row.title} ({row.year})" if row.year and row.year > 0 else str(row.title)

    def description(self, item: int) -> str:
        """The catalogue's full text of the item (``Dataset.item_text``)."""
        return self.dataset.item_text(item)
