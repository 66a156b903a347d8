"""Configuration of the friendship graph and of chat and post."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recagent_gym.settings_section import Section


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

    activation_rate: float = Field(0.05, ge=0.0, le=1.0)
    """Base chance that an agent is active between two sessions; scaled by ``0.5 + activity`` of its profile."""

    max_active_agents: int = Field(16, ge=0)
    """Most agents acting in one social round (keeps each social round's LLM batch bounded)."""

    utterance_max_tokens: int = Field(40, ge=4, le=512)
    """Token cap of one chat utterance or post."""
