"""Configuration of the round-based RecAgent simulator (the paper's own mode of use)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recagent_gym.config.base import Section


class SimulationConfig(Section):
    agents: int = Field(20, ge=1, le=1000)
    """Number of agents (the paper's ``agent_num``)."""

    rounds: int = Field(5, ge=1)
    """Rounds to simulate (the paper's ``round``/``epoch``)."""

    interval_hours: float = Field(5.0, gt=0.0)
    """Simulated time per round (the paper's ``interval``, e.g. 5h)."""

    activation: Literal["pareto", "uniform", "marginal"] = "pareto"
    """Activation method (the paper's ``active_method``)."""

    active_prob: float = Field(0.5, ge=0.0, le=1.0)
    """Activation probability for the ``uniform`` method (the paper's ``active_prob``)."""

    pareto_alpha: float = Field(1.5, gt=0.0)
    """Shape alpha of the Pareto activity distribution ``p(x) = alpha x_min^alpha / x^(alpha+1)``."""

    pareto_x_min: float = Field(0.1, gt=0.0)
    """Scale x_min of the Pareto activity distribution."""

    fit_activity: bool = True
    """Fit the Pareto parameters to the dataset's per-user activity instead of using ``pareto_alpha``/``x_min``."""

    active_threshold: int = Field(1000, ge=1)
    """Most agents active in one round (the paper's ``active_agent_threshold``)."""

    execution: Literal["serial", "parallel"] = "parallel"
    """``parallel`` sends the LLM requests of all active agents together (batched or concurrent)."""

    page_size: int = Field(5, ge=1, le=100)
    """Items per recommender page."""

    max_pages: int = Field(5, ge=1)
    """Pages per recommender session."""

    seed: int = 0
    """Seed of the whole run."""
