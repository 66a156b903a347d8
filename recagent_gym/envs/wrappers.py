"""Gymnasium wrappers around :class:`RecAgentEnv`: flat observations, a scoring action, a genre action for DQN."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from recagent_gym.envs.adapters import TRAINING_KEYS, GenrePageAdapter, ObsFlattener, PageAdapter, ScorePageAdapter
from recagent_gym.envs.recagent_env import RecAgentEnv


class FlatObservation(gym.ObservationWrapper):
    """The ``Dict`` observation as one float32 vector of the chosen keys (default: all but raw ids)."""

    def __init__(self, env: gym.Env, keys: Sequence[str] | None = TRAINING_KEYS) -> None:
        super().__init__(env)
        space = env.observation_space
        assert isinstance(space, gym.spaces.Dict), "FlatObservation needs the env's Dict observation"
        self.flattener = ObsFlattener(space, tuple(space.spaces) if keys is None else keys)
        self.observation_space = self.flattener.space

    def observation(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return self.flattener.flatten(observation)


class PageActionWrapper(gym.ActionWrapper):
    """Acts through a :class:`PageAdapter`: the wrapped action becomes a page of unseen items."""

    def __init__(self, env: gym.Env, adapter: PageAdapter) -> None:
        super().__init__(env)
        self.adapter = adapter
        self.action_space = adapter.space

    def action(self, action: Any) -> np.ndarray:
        core: RecAgentEnv = self.env.unwrapped  # type: ignore[assignment]
        return self.adapter.to_page(action, core.seen_mask)


class ScoreActionWrapper(PageActionWrapper):
    """Continuous action: a query vector over item features; the page is the top-k unseen items by score.

    Scales to large catalogues (the action has ``n_genres + 2`` dimensions by default); pass
    ``features=np.eye(n_items)`` for one score per item.
    """

    def __init__(self, env: gym.Env, features: np.ndarray | None = None) -> None:
        core: RecAgentEnv = env.unwrapped  # type: ignore[assignment]
        super().__init__(env, ScorePageAdapter(core.tables, core.page_size, features))


class GenreActionWrapper(PageActionWrapper):
    """Discrete action: one genre per page, filled with its best unseen items (for DQN)."""

    def __init__(self, env: gym.Env) -> None:
        core: RecAgentEnv = env.unwrapped  # type: ignore[assignment]
        super().__init__(env, GenrePageAdapter(core.tables, core.page_size))


def page_adapter(kind: str, env: RecAgentEnv) -> PageAdapter | None:
    """The adapter of a training action kind: ``score``, ``genre``, or ``page`` (None: the raw page)."""
    if kind == "score":
        return ScorePageAdapter(env.tables, env.page_size)
    if kind == "genre":
        return GenrePageAdapter(env.tables, env.page_size)
    if kind == "page":
        return None
    raise ValueError(f"unknown action kind {kind!r}; expected score, genre or page")


def wrap_for_training(env: gym.Env, action: str = "score") -> gym.Env:
    """The single-env form of what the trainer sees: a page adapter and flat observations."""
    adapter = page_adapter(action, env.unwrapped)  # type: ignore[arg-type]
    if adapter is not None:
        env = PageActionWrapper(env, adapter)
    return FlatObservation(env)
