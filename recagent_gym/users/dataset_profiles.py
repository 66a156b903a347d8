"""Dataset-aligned profiles, the paper's first method.

Interests are the user's top genres, features come from the history statistics (rules in
:mod:`recagent_gym.data.stats`), and demographics come from the dataset. Fields the dataset lacks are drawn from the
given generator and listed in ``Profile.synthesized``: a name from a small built-in list (first names by gender,
unique within the call), gender uniform over female/male, age uniform in 18..65, three traits from
:data:`~recagent_gym.users.profile_vocabulary.TRAITS`, a career from the MovieLens-1M occupation names.
"""

from __future__ import annotations

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.users.profile_vocabulary import CAREERS, TRAITS, draw_name
from recagent_gym.users.profiles import Profile


def profiles_from_dataset(dataset: Dataset, rng: np.random.Generator) -> list[Profile]:
    """One dataset-aligned profile per user, in user-id order (see the module docstring)."""
    used: set[str] = set(n for n in dataset.users["name"] if n)
    profiles = []
    for row in dataset.users.itertuples(index=False):
        synthesized = []
        gender = row.gender
        if not gender:
            gender = str(rng.choice(("female", "male")))
            synthesized.append("gender")
        name = row.name
        if not name:
            name = draw_name(gender, used, rng)
            synthesized.append("name")
        age = int(row.age)
        if age < 0:
            age = int(rng.integers(18, 66))
            synthesized.append("age")
        traits = row.traits
        if not traits:
            traits = ", ".join(str(t) for t in rng.choice(TRAITS, size=3, replace=False))
            synthesized.append("traits")
        career = row.career
        if not career:
            career = str(rng.choice(CAREERS))
            synthesized.append("career")
        profiles.append(
            Profile(
                user_id=int(row.user_id),
                name=name,
                gender=gender,
                age=age,
                traits=traits,
                career=career,
                interests=tuple(row.interests),
                features=tuple(row.features),
                activity=float(row.activity),
                diversity=float(row.diversity),
                conformity=float(row.conformity),
                source="dataset",
                synthesized=tuple(synthesized),
            )
        )
    return profiles
