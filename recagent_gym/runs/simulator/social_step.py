"""Social actions of the agents who chose the social media this round, and delivery of injected posts/messages.

The chats and posts are the agent's own (:mod:`recagent_gym.users.agent.social_round`, batched over all social
agents of the round); the simulator has its own activation and turns the agent's events into its log. A round plans
them before the sessions start, generates them beside the sessions, and applies them after (see ``runner.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from recagent_gym.prompts import memory_notes
from recagent_gym.runs.config.simulation_section import SimulationConfig
from recagent_gym.session.events import Event, social_events
from recagent_gym.users.agent.social_round import (
    SocialApplied,
    SocialPlan,
    SocialReplies,
    apply_social,
    plan_social,
    post_to_friends,
)


def deliver_post(model: Any, author: int, text: str, time_h: float) -> list[int]:
    """:func:`post_to_friends`, then flush the touched memories (an injected or a human's post)."""
    friends, _ = post_to_friends(model, author, text, time_h)
    model.memory_backend.flush([model.memory(u) for u in sorted({author, *friends})], time_h)
    return friends


def deliver_message(model: Any, sender: int, receiver: int, text: str, time_h: float) -> None:
    """A one-line message from ``sender`` to ``receiver``: both memories get it, the receiver hears its titles."""
    names = model.profiles[sender].name, model.profiles[receiver].name
    line = memory_notes.message(sender=names[0], receiver=names[1], text=text)
    for u in (sender, receiver):
        model.memory(u).observe([line], time_h, kind="dialogue")
    model.hear(receiver, model.titles.find(text), time_h, source=sender, kind="chat")
    model.memory_backend.flush([model.memory(sender), model.memory(receiver)], time_h)


def plan_round_social(
    model: Any,
    users: Sequence[int],
    rng: np.random.Generator,
    time_h: float,
    config: SimulationConfig,
    *,
    exclude: Sequence[int] = (),
) -> SocialPlan:
    """Each user will chat with one random friend or post to all friends (the agent's own :func:`plan_social`, with
    the simulation's chat/post weights). Agents in ``exclude`` (a human player) are never picked as chat partners,
    whose lines the model would otherwise write for them."""
    return plan_social(
        model,
        users,
        rng,
        time_h,
        settle=model.write_ended_of,
        exclude=frozenset(exclude),
        chat_weight=config.chat_weight,
        post_weight=config.post_weight,
    )


def apply_round_social(
    model: Any, plan: SocialPlan, replies: SocialReplies, round_index: int, *, defer: Collection[int] = ()
) -> tuple[list[Event], SocialApplied]:
    """The plan's chats and posts into memories (not flushed yet) and simulator events; the agents in ``defer``
    get theirs later (``SocialApplied.deferred``)."""
    applied = apply_social(model, plan, replies, defer=defer)
    events = social_events(applied.events, round_index, plan.time_h, lambda u: model.profiles[u].name, model.title)
    return events, applied
