"""Configuration of the round-based RecAgent simulator (the paper's own mode of use)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recagent_gym.settings_section import Section


class SimulationConfig(Section):
    agents: int = Field(20, ge=1, le=1000)
    """Number of agents (the paper's ``agent_num``): the dataset's first N users (``data.max_users`` is set to it)."""

    rounds: int = Field(5, ge=1)
    """Rounds to simulate (the paper's ``round``/``epoch``)."""

    interval_hours: float = Field(5.0, gt=0.0)
    """Simulated time per round (the paper's ``interval``, e.g. 5h)."""

    activation: Literal["pareto", "uniform", "marginal"] = "pareto"
    """Activation method (the paper's ``active_method``): ``pareto``: an agent with Pareto-distributed activity level
    ``x`` is active with probability ``min(1, x)``; ``uniform``: probability ``active_prob``; ``marginal``: the agent's
    share of the dataset's interactions, scaled to ``active_prob * agents`` expected active agents
    (see ``simulator/activation.py``)."""

    active_prob: float = Field(0.5, ge=0.0, le=1.0)
    """Activation probability for the ``uniform`` method (the paper's ``active_prob``)."""

    pareto_alpha: float = Field(1.5, gt=0.0)
    """Shape alpha of the Pareto activity distribution ``p(x) = alpha x_min^alpha / x^(alpha+1)``."""

    pareto_x_min: float = Field(0.1, gt=0.0)
    """Scale x_min of the Pareto activity distribution."""

    fit_activity: bool = True
    """Fit the Pareto shape alpha by maximum likelihood to the agents' interaction counts in the dataset (instead of
    ``pareto_alpha``) and hand the drawn levels out in the rank order of those counts; ``pareto_x_min`` still sets
    the scale."""

    active_threshold: int = Field(1000, ge=1)
    """Most agents active in one round (the paper's ``active_agent_threshold``)."""

    execution: Literal["serial", "parallel"] = "parallel"
    """``parallel`` sends the LLM requests of all active agents together (batched or concurrent)."""

    overlap_social: Literal["auto", "on", "off"] = "auto"
    """Run the social agents' LLM calls (chats, posts) beside the recommender sessions' page loop, in a worker
    thread; they read only what was drawn before the sessions and write after them, so results are the same either
    way. ``auto``: on for ``llm.backend: openai`` (a concurrent server); the embedded model runs them after."""

    pipelines: Literal["auto", "on", "off"] = "auto"
    """Run each active agent's round as its own chain (per-agent pipelines: its pages, then its feelings and memory
    writes; or its chat or post), all chains at once under the backend's concurrency limit, so a round costs about
    the longest chain instead of the sum of stages. Results do not depend on which chain finishes first (the
    recommender learns the round's watches in agent order after the round; social notes reach an agent in a
    session after its last page). ``auto``: on for ``llm.backend: openai``; the embedded model keeps the stages
    (all agents' requests of a stage in one batch). Never with a human player."""

    page_size: int = Field(5, ge=1, le=100)
    """Items per recommender page."""

    max_pages: int = Field(5, ge=1)
    """Pages per recommender session."""

    seed: int = Field(0, ge=0)
    """Seed of the whole run."""

    keep_checkpoints: int = Field(0, ge=0)
    """Round checkpoints kept in ``<out>/checkpoints`` (the newest N); 0 keeps every round (any round can branch)."""

    progress: bool = True
    """Show a progress bar per round (rate and ETA over the round's agents) on stderr."""

    chat_weight: float = Field(1.0, ge=0.0)
    """Base weight of chatting (vs posting) for an agent who enters the social media; a Chatter adds 1."""

    post_weight: float = Field(1.0, ge=0.0)
    """Base weight of posting (vs chatting) for an agent who enters the social media; a Poster adds 1."""

    action_choice: Literal["llm", "prior"] = "llm"
    """How an active agent picks recommender / social / nothing: ``llm``: the agent's ``take_action`` (one batched
    ``choose``, combined with its behaviour priors); ``prior``: the behaviour priors alone (``prompts/take_action.py``),
    no LLM call."""
