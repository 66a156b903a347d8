"""Datasets: typed tables (:mod:`~recagent_gym.data.schema`), loaders for the MovieLens formats and RecAgent CSV,
the bundled MovieLens latest-small, download, and splits."""

from recagent_gym.data.descriptions import attach_descriptions
from recagent_gym.data.load import BUNDLED_DIR, FORMATS, detect_format, load_dataset, load_dataset_from_config
from recagent_gym.data.schema import BEHAVIOUR_FEATURES, DataError, Dataset

__all__ = [
    "BEHAVIOUR_FEATURES",
    "BUNDLED_DIR",
    "FORMATS",
    "DataError",
    "Dataset",
    "attach_descriptions",
    "detect_format",
    "load_dataset",
    "load_dataset_from_config",
]
