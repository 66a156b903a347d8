"""The agent's profile as the prompts see it, and the paper's per-behaviour *relevant profile*.

The paper filters the profile per behaviour with an extra LLM call. Here the filter is a fixed template per
behaviour (:data:`VIEWS` and :data:`FEATURE_VIEWS`): no LLM call, and each text is computed once per agent and
cached by :class:`ProfileTexts`, so it costs nothing on the critical path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recagent_gym.data.schema import Dataset
from recagent_gym.users.profiles import Profile

FEATURE_TEXT: dict[str, str] = {
    "Watcher": "watches and rates movies often",
    "Explorer": "likes to search for and discover new movies",
    "Critic": "has high standards and is hard to please",
    "Chatter": "enjoys chatting with friends about movies",
    "Poster": "likes to post about movies on social media",
}

VIEWS: dict[str, tuple[str, ...]] = {
    "recommender": ("identity", "interests", "features"),
    "social": ("identity", "traits", "career", "interests", "features"),
    "feeling": ("identity", "traits", "interests", "features"),
    "take_action": ("identity", "traits", "features"),
    "interview": ("identity", "traits", "career", "interests", "features"),
}
"""Profile parts quoted for each behaviour."""

FEATURE_VIEWS: dict[str, tuple[str, ...]] = {
    "recommender": ("Watcher", "Explorer", "Critic"),
    "social": ("Chatter", "Poster"),
    "feeling": ("Critic",),
    "take_action": ("Watcher", "Explorer", "Chatter", "Poster"),
    "interview": tuple(FEATURE_TEXT),
}
"""Behaviour features that matter to each behaviour (the others are left out of its prompt)."""


def _from_record(user_id: int, record: Any) -> Profile:
    """From a ``users`` table row, a mapping, or a :class:`Profile` (missing fields take neutral defaults)."""
    if isinstance(record, Profile):
        return record

    def get(key: str, default: Any) -> Any:
        value = record.get(key, default) if isinstance(record, Mapping) else getattr(record, key, default)
        return default if value is None else value

    return Profile(
        user_id=user_id,
        name=str(get("name", "") or f"User {user_id}"),
        gender=str(get("gender", "")),
        age=int(get("age", -1)),
        traits=str(get("traits", "")),
        career=str(get("career", "")),
        interests=tuple(str(g) for g in get("interests", ())),
        features=tuple(str(f) for f in get("features", ())),
        activity=float(get("activity", 0.5)),
        diversity=float(get("diversity", 0.5)),
        conformity=float(get("conformity", 0.5)),
    )


def agent_profiles(dataset: Dataset, profiles: Sequence[Any] | Mapping[int, Any] | None) -> list[Profile]:
    """One profile per dataset user: from ``profiles`` (indexed by dense user id) or the dataset's users table."""
    if profiles is None:
        records: Sequence[Any] = dataset.users.to_dict("records")
        return [_from_record(i, rec) for i, rec in enumerate(records)]
    if len(profiles) != dataset.n_users:
        raise ValueError(f"got {len(profiles)} profiles for {dataset.n_users} users of dataset {dataset.name!r}")
    return [_from_record(i, profiles[i]) for i in range(dataset.n_users)]


def relevant_profile(profile: Profile, behaviour: str) -> str:
    """The profile text for one behaviour (a key of :data:`VIEWS`)."""
    if behaviour not in VIEWS:
        raise KeyError(f"unknown behaviour {behaviour!r}; expected one of {sorted(VIEWS)}")
    parts = []
    for part in VIEWS[behaviour]:
        if part == "identity":
            who = [profile.name]
            if profile.age > 0:
                who.append(f"{profile.age} years old")
            if profile.gender:
                who.append(profile.gender.lower())
            parts.append(", ".join(who) + ".")
        elif part == "traits" and profile.traits:
            parts.append(f"Traits: {profile.traits}.")
        elif part == "career" and profile.career:
            parts.append(f"Career: {profile.career}.")
        elif part == "interests" and profile.interests:
            parts.append(f"Likes {', '.join(g.lower() for g in profile.interests)} movies.")
        elif part == "features":
            said = [FEATURE_TEXT[f] for f in FEATURE_VIEWS[behaviour] if f in profile.features]
            if said:
                parts.append(f"{profile.name} {' and '.join(said)}.")
    return " ".join(parts)


class ProfileTexts:
    """Per-agent, per-behaviour profile texts, computed once (precomputed relevant profile)."""

    def __init__(self, profiles: Sequence[Profile]) -> None:
        self._profiles = profiles
        self._cache: dict[tuple[int, str], str] = {}

    def __call__(self, user_id: int, behaviour: str) -> str:
        key = (user_id, behaviour)
        if key not in self._cache:
            self._cache[key] = relevant_profile(self._profiles[user_id], behaviour)
        return self._cache[key]
