"""Configuration of the user model (the LLM agent and the classical baselines)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recagent_gym.config.base import Section


class UserConfig(Section):
    model: Literal["llm", "recsim", "embedding"] = "llm"
    """Which user model responds to pages; all three are interchangeable in the same env."""

    patience: float = Field(3.0, gt=0.0)
    """Mean number of unrewarding pages a user tolerates before leaving."""

    history_shots: int = Field(10, ge=0)
    """Watched titles shown to the LLM agent as positive examples when it scores items (few-shot)."""

    negative_shots: int = Field(10, ge=0)
    """Unseen titles shown as negative examples when the LLM agent scores items."""

    write_feelings: bool = True
    """After watching, the agent writes one line about the item (stored in memory)."""

    recsim_choice_temperature: float = Field(1.0, gt=0.0)
    """Temperature of the RecSim-style multinomial-logit choice."""

    recsim_no_click_mass: float = Field(1.0, ge=0.0)
    """Weight of the no-click option in the RecSim-style choice."""

    recsim_time_budget: float = Field(60.0, gt=0.0)
    """Session time budget (minutes) of the RecSim-style user."""

    recsim_interest_drift: float = Field(0.05, ge=0.0, le=1.0)
    """Step size of the RecSim-style user's interest drift towards consumed items."""
