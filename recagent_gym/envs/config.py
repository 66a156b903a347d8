"""Configuration of the Gymnasium environment."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recagent_gym.settings_section import Section

DEFAULT_MAX_EPISODE_STEPS = 10
"""Pages per session by default: ``EnvConfig.max_pages`` and the registered env's ``max_episode_steps``."""


class EnvConfig(Section):
    page_size: int = Field(5, ge=1, le=100)
    """Items per page (the policy's action is one page)."""

    max_pages: int = Field(DEFAULT_MAX_EPISODE_STEPS, ge=1)
    """Pages per session before truncation."""

    hide_quality: bool = False
    """RecAgent-v1: hide the items' quality (the ``quality`` column of the item features, the shrunk mean rating's
    quantile, is 0.5 for every item), as RecSim's interest-evolution env hides document quality: a policy then
    learns which items pay from the returns, and sorting by a public column no longer solves the chocolate-vs-kale
    trade-off (the quality-greedy baseline reads a constant)."""

    history_length: int = Field(10, ge=1)
    """Last watched items in the observation."""

    social: bool = True
    """Run the social world between sessions."""

    activation: Literal["pareto", "uniform", "marginal"] = "pareto"
    """How the next session's user is drawn."""

    duplicate_rule: Literal["replace", "allow"] = "replace"
    """Duplicated or already-watched items in a page: ``replace`` with the next most popular unseen item, or
    ``allow`` as given; either way they are reported in ``info``."""

    reward_watch: float = 1.0
    """Reward for a watch from the recommended page."""

    reward_search_watch: float = 0.0
    """Reward for a watch from search results (the user found it without the policy)."""

    reward_rating_bonus: float = 0.25
    """Added per rating point above 3 (negative below)."""

    reward_leave: float = 0.0
    """Reward when the user leaves."""

    session_hours: float = Field(1.0, ge=0.0)
    """Simulated hours between the starts of two sessions (the clock the social world runs on)."""

    user_model_reset_on_seed: bool = True
    """``reset(seed=...)`` also restores every user's state (interest, memory) to its initial value, so that two
    runs with the same seed are identical even within one process."""
