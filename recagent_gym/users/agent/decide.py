"""The few-shot strategy's decision rule: from item scores and the user's patience to watch / search / next / leave.

For a page whose eligible items (not yet watched this session) have scores ``s``:

1. ``best = max(s)``; the user watches it with probability ``sigmoid((best - threshold) / temperature)``, where
   ``threshold = user.watch_threshold + offset * (Critic - Watcher - (activity - 0.5))``.
2. Otherwise the page was unrewarding: patience drops by one; when it is spent the user **leaves**.
3. Otherwise, with probability ``search_heard_probability``, the user **searches** for the most recently heard item
   not watched yet (if any); else with ``search_interest_probability`` (doubled for Explorers, not on a search
   results page) for their interests; else **next** page.

Each step draws from the rng passed in, so the same inputs and rng state give the same decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recagent_gym.users.protocol import Action


@dataclass(frozen=True)
class RuleParams:
    threshold: float
    temperature: float
    search_heard_probability: float
    search_interest_probability: float


@dataclass(frozen=True)
class Decision:
    action: Action
    position: int | None = None
    """Index into the scored (shown) items, for WATCH."""
    query: str | None = None
    p_watch: float = 0.0


def threshold_for(base: float, offset: float, features: Sequence[str], activity: float) -> float:
    return base + offset * (("Critic" in features) - ("Watcher" in features) - (activity - 0.5))


def decide_page(
    scores: np.ndarray,
    eligible: np.ndarray,
    *,
    params: RuleParams,
    patience: int,
    heard_query: str | None,
    interest_query: str,
    on_search_page: bool,
    rng: np.random.Generator,
) -> tuple[Decision, int]:
    """The decision and the patience left after it."""
    p_watch = 0.0
    if eligible.any():
        masked = np.where(eligible, scores, -np.inf)
        position = int(np.argmax(masked))
        p_watch = float(1.0 / (1.0 + np.exp(-(masked[position] - params.threshold) / params.temperature)))
        if rng.random() < p_watch:
            return Decision(Action.WATCH, position=position, p_watch=p_watch), patience
    patience -= 1
    if patience <= 0:
        return Decision(Action.LEAVE, p_watch=p_watch), patience
    if heard_query and rng.random() < params.search_heard_probability:
        return Decision(Action.SEARCH, query=heard_query, p_watch=p_watch), patience
    if not on_search_page and rng.random() < params.search_interest_probability:
        return Decision(Action.SEARCH, query=interest_query, p_watch=p_watch), patience
    return Decision(Action.NEXT, p_watch=p_watch), patience
