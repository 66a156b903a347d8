"""LLM-written profiles, the paper's third method: each user's history in, name, gender, age, traits and career
out; every unusable field falls back to the dataset-aligned value, counted."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.prompts import profile_generation
from recagent_gym.users.dataset_profiles import profiles_from_dataset
from recagent_gym.users.profiles import Profile

logger = logging.getLogger(__name__)


class GeneratedProfiles(NamedTuple):
    """LLM-written profiles, and the fallbacks to dataset-aligned values (counted, with the reasons)."""

    profiles: list[Profile]
    fallback_profiles: int
    """Profiles where no field of the LLM output was usable (wholly dataset-aligned)."""
    fallback_fields: int
    """Fields, over all profiles, taken from the dataset-aligned profile because the output was unusable."""
    problems: list[str]


def generate_profiles(
    dataset: Dataset,
    generate: Callable[[list[str]], list[str]],
    rng: np.random.Generator,
    *,
    batch_size: int = 16,
    n_titles: int = 5,
) -> GeneratedProfiles:
    """Profiles written by an LLM from each user's history (prompt contract: :mod:`recagent_gym.prompts.
    profile_generation`).

    ``generate`` maps a batch of prompts to one continuation each (bind the model, ``max_tokens`` ~ 60 and
    ``stop=["\\n\\n"]`` in it). Interests, features and statistics stay dataset-aligned; name, gender, age, traits and
    career come from the output, and each field that is missing or invalid falls back to the dataset-aligned value
    (listed in ``synthesized``, counted in the result and logged).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, not {batch_size}")
    base = profiles_from_dataset(dataset, rng)
    prompts = [
        profile_generation.build(p.interests, _recent_titles(dataset, p.user_id, n_titles), p.features) for p in base
    ]
    outputs: list[str] = []
    for start in range(0, len(prompts), batch_size):
        batch = prompts[start : start + batch_size]
        answers = list(generate(batch))
        if len(answers) != len(batch):
            raise ValueError(f"generate returned {len(answers)} outputs for {len(batch)} prompts")
        outputs.extend(answers)
    profiles: list[Profile] = []
    problems: list[str] = []
    fallback_profiles = fallback_fields = 0
    for profile, text in zip(base, outputs, strict=True):
        fields, issues = profile_generation.parse(text)
        fallback_fields += len(issues)
        fallback_profiles += not fields
        problems.extend(f"user {profile.user_id}: {issue}" for issue in issues)
        values = {**profile.to_dict(), **fields, "source": "llm"}
        values["synthesized"] = [k for k in profile_generation.FIELDS if k not in fields]
        profiles.append(Profile.from_dict(values))
    if fallback_fields:
        logger.warning(
            "profile generation: %d of %d fields fell back to dataset-aligned values (%d whole profiles); first: %s",
            fallback_fields,
            len(base) * len(profile_generation.FIELDS),
            fallback_profiles,
            "; ".join(problems[:3]),
        )
    return GeneratedProfiles(profiles, fallback_profiles, fallback_fields, problems)


def _recent_titles(dataset: Dataset, user_id: int, n: int) -> list[str]:
    history = dataset.user_history(user_id)
    return [str(dataset.items.at[int(i), "title"]) for i in history["item_id"].to_numpy()[::-1][:n]]
