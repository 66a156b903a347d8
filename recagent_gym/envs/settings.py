"""What an env face reads of the configuration: the sections it takes, as a protocol that the root configuration
(:class:`recagent_gym.runs.config.Config`) satisfies.

The env faces never load configuration: the run layer (:mod:`recagent_gym.runs.make_env`, whose functions are the
registered entry points of ``gymnasium.make`` and ``make_vec``) turns ``config=`` (a name, a YAML path, a mapping
or nothing) into settings and hands them over.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from recagent_gym.data.config import DataConfig
from recagent_gym.envs.config import EnvConfig
from recagent_gym.social.config import SocialConfig
from recagent_gym.users.config import UserConfig


class WorldSettings(Protocol):
    """The sections of one env world: data, env rules and reward, users (with the sections a user model is built
    from), social, and the activation shape (``simulation``: ``active_threshold``, ``pareto_alpha``,
    ``pareto_x_min``, ``fit_activity``)."""

    data: DataConfig
    env: EnvConfig
    user: UserConfig
    social: SocialConfig
    simulation: Any

    def user_model_sections(self) -> dict[str, Any]: ...


def require_settings(config: Any, face: str) -> WorldSettings:
    """``config`` as given when it carries the sections; otherwise a one-line TypeError saying how to build ``face``."""
    if config is None or isinstance(config, str | bytes | dict) or not hasattr(config, "user_model_sections"):
        raise TypeError(
            f"{face} takes resolved settings (the root Config); to build it from a configuration name, YAML path or "
            f"mapping use gymnasium.make / make_vec with its registered id, or recagent_gym.runs.make_env "
            f"(got config={type(config).__name__})"
        )
    return config


def vector_page_limit(
    face: str, num_envs: int, render_mode: str | None, max_pages: int | None, max_episode_steps: int | None, config: Any
) -> int | None:
    """A vector env's argument checks and its page limit: ``max_pages`` (default ``config.env.max_pages``) capped by
    ``max_episode_steps``, which ``gymnasium.make_vec`` passes from the registration's TimeLimit."""
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if render_mode is not None:
        raise ValueError(f"{face} does not render (render_mode={render_mode!r})")
    if max_episode_steps is None:
        return max_pages
    pages = max_pages if max_pages is not None else require_settings(config, face).env.max_pages
    return min(int(pages), int(max_episode_steps))


def hold_ended_per_sub_env(kernel: Any, num_envs: int) -> None:
    """A vector env's kernel writes ended sessions once ``num_envs x user.session_end_batch`` are pending: each
    sub-env holds back as many as one env does, as ``num_envs`` separate envs would, and their writes go to the LLM
    together. An agent's pending session is still written before its memory is used again (``write_ended_of``)."""
    kernel.rules = replace(kernel.rules, end_batch=kernel.rules.end_batch * int(num_envs))
