"""Configuration of the friendship graph and of chat and post."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recagent_gym.config.base import Section


class SocialConfig(Section):
    enabled: bool = True
    """Run the social world (chat and post) between sessions."""

    generator: Literal["similarity", "random"] = "similarity"
    """How a graph is generated when the dataset has none: by taste similarity, or uniformly at random."""

    mean_friends: int = Field(4, ge=0)
    """Average number of friends per user in a generated graph."""

    social_random_k: int = Field(0, ge=0)
    """Random extra friends per user (the paper's ``social_random_k``)."""

    max_chat_turns: int = Field(4, ge=1)
    """Utterances in one chat between two friends."""
