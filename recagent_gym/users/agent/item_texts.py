"""Item texts of the agents' prompts: title, ``Title (year) [genres]``, the scoring line, the description."""

from __future__ import annotations

from recagent_gym.data.schema import Dataset


class ItemTexts:
    """Item texts from the catalogue (read through the dataset's column lists), the composed ones cached;
    ``scoring_genres``: the few-shot scoring line carries genres."""

    def __init__(self, dataset: Dataset, *, scoring_genres: bool = False) -> None:
        self.dataset = dataset
        self.scoring_genres = scoring_genres
        self._lines: dict[int, str] = {}

    def _year(self, item: int) -> int | None:
        year = self.dataset.item_column("year")[item]
        return int(year) if year and year > 0 else None

    def title(self, item: int) -> str:
        return self.dataset.title(item)

    def line(self, item: int) -> str:
        """Short item text for prompts: ``Title (year) [genres]`` (no description: keeps the prefix small)."""
        if item not in self._lines:
            year = self._year(item)
            genres = ", ".join(self.dataset.item_column("genres")[item])
            self._lines[item] = f"{self.title(item)}{'' if year is None else f' ({year})'} [{genres}]"
        return self._lines[item]

    def scoring_line(self, item: int) -> str:
        """Item text in the few-shot scoring prompt: ``Title (year)``, with genres if ``scoring_genres``."""
        if self.scoring_genres:
            return self.line(item)
        year = self._year(item)
        return self.title(item) if year is None else f"{self.title(item)} ({year})"

    def description(self, item: int) -> str:
        """The catalogue's full text of the item (``Dataset.item_text``)."""
        return self.dataset.item_text(item)
