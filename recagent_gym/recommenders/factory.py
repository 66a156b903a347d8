"""Build a baseline recommender by name for the env's page size."""

from __future__ import annotations

from typing import Any

from recagent_gym.data.schema import Dataset
from recagent_gym.recommenders.baselines import PopularityRecommender, RandomRecommender
from recagent_gym.recommenders.config import RecommenderConfig

BASELINES: tuple[str, ...] = ("random", "popularity", "mf")


def build_recommender(name: str, dataset: Dataset, config: RecommenderConfig, page_size: int, seed: int = 0) -> Any:
    """``random``, ``popularity`` or ``mf`` (trained on the dataset at construction; ``config`` is the recommender
    section)."""
    if name == "random":
        return RandomRecommender(dataset.n_items, page_size, seed)
    if name == "popularity":
        return PopularityRecommender(dataset, page_size)
    if name == "mf":
        from recagent_gym.recommenders.mf import MFRecommender  # torch is imported only when needed

        return MFRecommender(dataset, page_size, config, seed)
    raise ValueError(f"unknown recommender {name!r}; expected one of {', '.join(BASELINES)}")
