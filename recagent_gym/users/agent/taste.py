"""Embedding relevance: cosine of an item to the user's taste vector, relative to unseen items.

The taste vector is the normalised mean embedding of the user's positive examples (recent history plus what the
agent watched in the simulation). Relevance of an item is ``(cos(item, taste) - mean cos(unseen examples, taste))
/ scale``: zero means "as relevant as a random unseen item", one means ``scale`` more cosine than that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.users.config import UserConfig

Embedder = Callable[[Sequence[str]], np.ndarray]


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
