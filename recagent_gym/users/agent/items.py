"""How the agents see items: the texts their prompts quote (:class:`ItemTexts`) and the embeddings their taste is
measured with (:class:`ItemVectors`).

Embedding relevance is the cosine of an item to the user's taste vector, relative to unseen items. The taste vector
is the normalised mean embedding of the user's positive examples (recent history plus what the agent watched in the
simulation). Relevance of an item is ``(cos(item, taste) - mean cos(unseen examples, taste)) / scale``: zero means
"as relevant as a random unseen item", one means ``scale`` more cosine than that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.users.config import UserConfig

Embedder = Callable[[Sequence[str]], np.ndarray]


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


class ItemVectors:
    """Item embeddings computed on demand (one embedder call per batch of unseen items) and cached."""

    def __init__(self, dataset: Dataset, embedder: Embedder, text: Callable[[int], str] | None = None) -> None:
        self._dataset = dataset
        self._embedder = embedder
        self._text = text or dataset.item_text
        self._cache: dict[int, np.ndarray] = {}

    def get(self, items: Sequence[int]) -> np.ndarray:
        missing = sorted({int(i) for i in items} - self._cache.keys())
        if missing:
            vectors = np.asarray(self._embedder([self._text(i) for i in missing]), dtype=np.float32)
            if vectors.shape[0] != len(missing):
                raise ValueError(f"embedder returned {vectors.shape[0]} rows for {len(missing)} texts")
            for i, vec in zip(missing, vectors, strict=True):
                self._cache[i] = vec
        if not items:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[int(i)] for i in items])


def relevance(
    vectors: ItemVectors, positives: Sequence[int], negatives: Sequence[int], items: Sequence[int], scale: float
) -> np.ndarray:
    """Relevance of each of ``items`` (zeros when there are no positives to build a taste from)."""
    if not positives or not items:
        return np.zeros(len(items))
    taste = vectors.get(positives).mean(axis=0)
    norm = float(np.linalg.norm(taste))
    if norm == 0.0:
        return np.zeros(len(items))
    taste = taste / norm
    base = float((vectors.get(negatives) @ taste).mean()) if negatives else 0.0
    return (vectors.get(items) @ taste - base) / scale


def combine_scores(config: UserConfig, llm_scores: np.ndarray, embedding_scores: np.ndarray) -> np.ndarray:
    """The decision score: ``score_llm_weight * LLM score + score_embedding_weight * embedding relevance``."""
    return config.score_llm_weight * np.asarray(llm_scores) + config.score_embedding_weight * embedding_scores
