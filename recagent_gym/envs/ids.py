"""The environments' ids, and their earlier ids ``recagent_gym/RecAgent-v0`` and ``-v1``.

An old id builds what its new id builds, after a ``DeprecationWarning`` (once per id and process) naming the new
id. Nothing here imports an environment until one is made: ``import recagent_gym`` stays quick.
"""

from __future__ import annotations

import warnings
from typing import Any

CATALOGUE_ENV_ID = "recagent_gym/RecAgentCatalogue-v0"
""":class:`~recagent_gym.envs.recagent_env.RecAgentEnv`: each page is chosen from the whole catalogue."""
CANDIDATES_ENV_ID = "recagent_gym/RecAgentCandidates-v0"
""":class:`~recagent_gym.envs.candidate_slate_env.RecAgentCandidateEnv`: each page is chosen among K retrieved
candidates."""

RENAMED: dict[str, str] = {
    "recagent_gym/RecAgent-v0": CATALOGUE_ENV_ID,
    "recagent_gym/RecAgent-v1": CANDIDATES_ENV_ID,
}
"""Old id -> new id."""

_warned: set[str] = set()
"""Old ids already warned about in this process."""


def warn_renamed(old: str) -> None:
    """The one-time ``DeprecationWarning`` of ``old`` (set only once shown: where warnings are errors, each use
    raises)."""
    if old in _warned:
        return
    new = RENAMED[old]
    # stacklevel 4: past this function, the creator, and Gymnasium's make/make_vec: at the caller's line
    warnings.warn(
        f"the environment id {old} is deprecated: use {new} (the same environment)", DeprecationWarning, stacklevel=4
    )
    _warned.add(old)


class OldIdCreator:
    """The entry point of an old id: warns, then calls the new id's creator (loaded on first use)."""

    def __init__(self, old: str, target: str) -> None:
        self.old = old
        self.target = target

    def _creator(self) -> Any:
        from gymnasium.envs.registration import load_env_creator

        return load_env_creator(self.target)

    @property
    def metadata(self) -> dict[str, Any]:
        """The environment's (Gymnasium reads its render modes before it calls the creator)."""
        return self._creator().metadata

    def __call__(self, **kwargs: Any) -> Any:
        warn_renamed(self.old)
        return self._creator()(**kwargs)
