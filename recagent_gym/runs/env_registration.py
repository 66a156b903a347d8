"""Registers the environments with Gymnasium (``import recagent_gym`` does it): each id's entry point and vector
entry point are the functions of :mod:`recagent_gym.runs.make_env`, which turn ``config=`` into the env's settings.
Nothing here imports an environment until one is made: ``import recagent_gym`` stays quick.

The earlier ids ``recagent_gym/RecAgent-v0`` and ``-v1`` build what their new ids build, after a one-time
``DeprecationWarning`` (:class:`~recagent_gym.envs.ids.OldIdCreator`).
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from recagent_gym.envs.config import DEFAULT_MAX_EPISODE_STEPS
from recagent_gym.envs.ids import CANDIDATES_ENV_ID, CATALOGUE_ENV_ID, RENAMED, OldIdCreator

ENTRY_POINTS: dict[str, tuple[str, str | None]] = {
    CATALOGUE_ENV_ID: ("recagent_gym.runs.make_env:catalogue_env", "recagent_gym.runs.make_env:catalogue_vector_env"),
    CANDIDATES_ENV_ID: (
        "recagent_gym.runs.make_env:candidates_env",
        "recagent_gym.runs.make_env:candidates_vector_env",
    ),
}
"""Id -> (entry point, vector entry point)."""


def old_entry_points(old: str) -> tuple[OldIdCreator, OldIdCreator | None]:
    """The (entry point, vector entry point) to register ``old`` with."""
    entry, vector = ENTRY_POINTS[RENAMED[old]]
    return OldIdCreator(old, entry), (OldIdCreator(old, vector) if vector is not None else None)


for _id, (_entry, _vector) in ENTRY_POINTS.items():
    if _id not in registry:
        register(id=_id, entry_point=_entry, vector_entry_point=_vector, max_episode_steps=DEFAULT_MAX_EPISODE_STEPS)

for _old in RENAMED:
    if _old not in registry:
        _entry_point, _vector_point = old_entry_points(_old)
        register(
            id=_old,
            entry_point=_entry_point,
            vector_entry_point=_vector_point,
            max_episode_steps=DEFAULT_MAX_EPISODE_STEPS,
        )
# Not a later version of RecAgent-v0 for Gymnasium's "is out of date, upgrade to v1" check on every make of v0
# (``find_highest_version`` reads ``spec.version``): the two old ids name different environments. Set after both are
# registered (registration refuses a versioned id beside an unversioned one); ``make`` finds a spec by its id.
registry["recagent_gym/RecAgent-v1"].version = None
