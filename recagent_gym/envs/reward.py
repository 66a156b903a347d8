"""The env's reward: a pure function of what the user did in one step, configured by ``EnvConfig``.

Default (``EnvConfig`` defaults): ``+1`` for a watch from the recommended page, plus ``0.25`` per rating point above 3
(negative below); ``0`` for a watch found through search; ``0`` for next; ``0`` when the user leaves. Pass any
``RewardFn`` as ``reward_fn=`` to the env to build your own from the same :class:`StepOutcome` (every raw signal is
in ``info`` too).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from recagent_gym.envs.config import EnvConfig
from recagent_gym.session.outcome import StepOutcome
from recagent_gym.users.protocol import Action

__all__ = ["RewardFn", "StepOutcome", "reward_from_config", "step_reward"]

RewardFn = Callable[[StepOutcome], float]


def step_reward(
    outcome: StepOutcome,
    *,
    watch: float = 1.0,
    search_watch: float = 0.0,
    rating_bonus: float = 0.25,
    leave: float = 0.0,
) -> float:
    """Reward of one step (pure): page watch (+ rating bonus), search watch, or leave."""
    first = outcome.response
    if first.action == Action.WATCH:
        bonus = rating_bonus * (first.rating - 3.0) if first.rating is not None else 0.0
        return watch + bonus
    final = outcome.search_response if first.action == Action.SEARCH else first
    if final is None:
        return 0.0
    if final.action == Action.WATCH:
        return search_watch
    if final.action == Action.LEAVE:
        return leave
    return 0.0


def reward_from_config(config: EnvConfig) -> RewardFn:
    """The default reward with the weights of ``config``."""
    return partial(
        step_reward,
        watch=config.reward_watch,
        search_watch=config.reward_search_watch,
        rating_bonus=config.reward_rating_bonus,
        leave=config.reward_leave,
    )
