"""Profiles by the configured method (``data.profile_source``): dataset-aligned, handwritten or LLM-written."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from recagent_gym.data.config import DataConfig
from recagent_gym.data.schema import Dataset
from recagent_gym.settings_section import ConfigError
from recagent_gym.users.dataset_profiles import profiles_from_dataset
from recagent_gym.users.handwritten_profiles import load_profiles
from recagent_gym.users.llm_profiles import generate_profiles
from recagent_gym.users.profiles import Profile


def profiles_from_config(
    data: DataConfig, dataset: Dataset, generate: Callable[[list[str]], list[str]] | None
) -> list[Profile]:
    """Profiles by the configured method (``data.profile_source``): dataset-aligned, handwritten, or LLM-written.

    ``generate`` is the batch text generator used for ``llm`` profiles (unused otherwise).
    """
    rng = np.random.default_rng(data.seed)
    if data.profile_source == "handwritten":
        if not data.profiles_path:
            raise ConfigError("data.profile_source=handwritten needs data.profiles_path")
        loaded = load_profiles(data.profiles_path)
        if len(loaded) < dataset.n_users:
            raise ConfigError(f"{data.profiles_path}: {len(loaded)} profiles for {dataset.n_users} users")
        return loaded[: dataset.n_users]
    if data.profile_source == "llm":
        if generate is None:
            raise ConfigError("data.profile_source=llm needs a language model")
        return generate_profiles(dataset, generate, rng).profiles
    return profiles_from_dataset(dataset, rng)
