"""Turn the env's flexible arguments (config as object, file or mapping; dataset as spec or object) into objects."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recagent_gym.config import Config, config_from_dict, load_config
from recagent_gym.data.schema import Dataset


def resolve_config(config: Config | str | Path | Mapping[str, Any] | None) -> Config:
    """``None`` -> defaults; a path or configs/ name -> loaded YAML; a mapping -> validated; a Config as is."""
    if config is None:
        return Config()
    if isinstance(config, Config):
        return config
    if isinstance(config, str | Path):
        return load_config(config)
    if isinstance(config, Mapping):
        return config_from_dict(config, source="config=")
    raise TypeError(f"config must be a Config, a YAML path or a mapping, got {type(config).__name__}")


def resolve_dataset(dataset: Dataset | str | None, config: Config) -> Dataset:
    """A :class:`Dataset` as is, or one loaded by the data package from a spec (``bundled`` or a folder)."""
    if isinstance(dataset, Dataset):
        return dataset
    from recagent_gym.data.load import load_dataset_from_config  # lazily: loaders are heavier than the env

    data_config = config.data if dataset is None else config.data.model_copy(update={"dataset": str(dataset)})
    return load_dataset_from_config(data_config)
