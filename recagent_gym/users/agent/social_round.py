"""The social world between sessions: activation, take action, chats and posts, all batched.

1. Each agent (of ``users``, default all; not in a session, not in ``exclude``) is active with probability
   ``social.activation_rate * (0.5 + activity)``; at most ``social.max_active_agents`` are kept (seeded sample).
2. Active agents take an action (one batched ``choose`` with behaviour priors, ``prompts/take_action.py``).
3. Those who enter the social media chat with one random friend (weight ``1 + Chatter``) or post to all friends
   (weight ``1 + Poster``); agents without friends are reported as ``no_friends``.
4. Chats: each whole chat in one reply for remote models (``user.combined_replies``), else turn by turn (one
   ``generate`` per turn for all chats); posts in one ``generate``, or, turn by turn, in the first turn's.
5. Both chatters' memories receive the dialogue; every friend's memory receives a post; titles found in what a
   friend said are added to the listener's recently heard items. All touched memories are flushed in one batch.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recagent_gym.llm.protocol import LanguageModel
from recagent_gym.llm.seeding import SEED_HIGH
from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.memory.stages import Observation
from recagent_gym.memory.writer import precompress
from recagent_gym.prompts import memory_notes
from recagent_gym.social.chat import ChatResult, Speaker
from recagent_gym.social.post import PostResult, chats_and_posts
from recagent_gym.users.agent.agents import Agents
from recagent_gym.users.agent.clock import clock_text
from recagent_gym.users.agent.take_action import choose_actions

Settle = Callable[[Collection[int]], None]
"""Writes the unwritten ended sessions of these agents before their memories are used (``write_ended_of``)."""

RECENT_TITLES = 3


SPEAKER_QUERY = "movies worth talking about"


def speaker(agents: Agents, user_id: int, time_h: float) -> Speaker:
    return speakers(agents, [user_id], time_h)[0]


def speakers(agents: Agents, users: Sequence[int], time_h: float) -> list[Speaker]:
    """The speakers' inputs; their memories are read with one batched retrieval."""
    blocks = agents.memory_blocks([(u, SPEAKER_QUERY, time_h) for u in users])
    return [
        Speaker(
            user_id=u,
            name=agents.profiles[u].name,
            profile=agents.profile_text(u, "social"),
            memory=block,
            recent=tuple([agents.title(i) for i in agents.history(u)[-RECENT_TITLES:]][::-1]),
        )
        for u, block in zip(users, blocks, strict=True)
    ]


def active_agents(
    agents: Agents, rng: np.random.Generator, exclude: set[int], users: Sequence[int] | None
) -> list[int]:
    cfg = agents.social_config
    pool = list(range(len(agents.profiles))) if users is None else sorted({int(u) for u in users})
    activity = np.array([agents.profiles[u].activity for u in pool], dtype=float)
    chance = np.clip(cfg.activation_rate * (0.5 + activity), 0.0, 1.0)
    drawn = rng.random(len(pool)) < chance
    active = [u for u, on in zip(pool, drawn, strict=True) if on and u not in exclude]
    if len(active) > cfg.max_active_agents:
        active = sorted(rng.choice(active, size=cfg.max_active_agents, replace=False).tolist())
    return active


def social_round(
    agents: Agents,
    rng: np.random.Generator,
    time_h: float,
    incoming: Collection[int] = (),
    users: Sequence[int] | None = None,
    *,
    settle: Settle,
) -> list[dict[str, Any]]:
    """One round for everyone but ``incoming`` (users about to start a session: they neither act nor receive
    posts) and those in a session (they receive posts, but do not act or chat)."""
    cfg = agents.social_config
    if not cfg.enabled:
        return []
    incoming = {int(u) for u in incoming}
    busy = agents.open_users() | incoming
    active = active_agents(agents, rng, busy, users)
    settle(active)
    choices = choose_actions(agents, active, rng, time_h)
    events: list[dict[str, Any]] = [
        {"type": "take_action", "user": u, "choice": c, "time_h": time_h} for u, c in zip(active, choices, strict=True)
    ]
    social = [u for u, choice in zip(active, choices, strict=True) if choice == "social"]
    return events + chat_or_post(agents, social, rng, time_h, settle=settle, exclude=busy, exclude_recipients=incoming)


@dataclass
class SocialPlan:
    """Who chats with whom and who posts this round, with every input their prompts read (drawn and retrieved
    up front), so that :meth:`generate` only calls the language model and may run beside other work."""

    time_h: float
    chats: list[tuple[int, int]]
    posters: list[int]
    pairs: list[tuple[Speaker, Speaker]]
    authors: list[Speaker]
    chat_seed: int
    post_seed: int
    exclude_recipients: frozenset[int]
    events: list[dict[str, Any]] = field(default_factory=list)
    """``no_friends`` events of the plan."""

    def generate(self, llm: LanguageModel, *, turns: int, max_tokens: int, one_call: bool) -> SocialReplies:
        """The chats' and posts' LLM calls (nothing else is read or written): the posts ride with the chats' first
        turn (:func:`~recagent_gym.social.post.chats_and_posts`)."""
        chats, posts = chats_and_posts(
            llm, self.pairs, self.authors, turns=turns, max_tokens=max_tokens, clock=clock_text(self.time_h),
            chat_seed=self.chat_seed, post_seed=self.post_seed, one_call=one_call,
        )  # fmt: skip
        return SocialReplies(chats, posts)


@dataclass
class SocialReplies:
    chats: list[ChatResult]
    posts: list[PostResult]


def plan_social(
    agents: Agents,
    users: Sequence[int],
    rng: np.random.Generator,
    time_h: float,
    *,
    settle: Settle,
    exclude: set[int] | frozenset[int] = frozenset(),
    exclude_recipients: set[int] | frozenset[int] = frozenset(),
    chat_weight: float = 1.0,
    post_weight: float = 1.0,
) -> SocialPlan:
    """Step 3 of the module docstring: chat partners and posters drawn, speakers' memories read (see
    :func:`chat_or_post` for the arguments)."""
    events: list[dict[str, Any]] = []
    chats: list[tuple[int, int]] = []
    posters: list[int] = []
    for u in users:
        friends = [f for f in agents.friends(u) if f not in exclude]
        if not friends:
            events.append({"type": "no_friends", "user": u, "time_h": time_h})
            continue
        profile = agents.profiles[u]
        w_chat, w_post = chat_weight + profile.has("Chatter"), post_weight + profile.has("Poster")
        if w_chat + w_post > 0 and rng.random() < w_chat / (w_chat + w_post):
            chats.append((u, int(friends[rng.integers(len(friends))])))
        else:
            posters.append(u)
    # Every memory this round reads or writes: an agent's unwritten last session goes in first.
    settle(
        {u for pair in chats for u in pair}
        | {f for u in posters for f in (u, *agents.friends(u)) if f not in exclude_recipients}
    )
    said = speakers(agents, [u for pair in chats for u in pair] + posters, time_h)
    pairs = [(said[2 * k], said[2 * k + 1]) for k in range(len(chats))]
    chat_seed = int(rng.integers(0, SEED_HIGH)) if chats else 0
    authors = said[2 * len(chats) :]
    post_seed = int(rng.integers(0, SEED_HIGH)) if posters else 0
    return SocialPlan(
        time_h, chats, posters, pairs, authors, chat_seed, post_seed, frozenset(exclude_recipients), events
    )


@dataclass(frozen=True)
class Delivery:
    """What one agent receives from the round's social media: a memory note, then the titles it heard."""

    note: str
    kind: str
    heard: tuple[int, ...]
    source: int
    heard_kind: str


def deliver(agents: Agents, user_id: int, deliveries: Sequence[Delivery], time_h: float) -> None:
    """Put ``deliveries`` into ``user_id``'s memory and heard items, in order (no flush)."""
    for d in deliveries:
        agents.memory(user_id).observe([d.note], time_h, kind=d.kind)
        if d.heard or d.heard_kind:
            agents.hear(user_id, list(d.heard), time_h, source=d.source, kind=d.heard_kind)


def precompress_deliveries(memory: Any, deliveries: Sequence[Delivery], time_h: float) -> None:
    """Compress the notes of ``deliveries`` ahead of their delivery (the paper's memory only): the same
    observations :func:`deliver` will queue, so the flush after it finds them done."""
    if isinstance(memory, AgentMemory) and memory.enabled and deliveries:
        precompress(memory, [Observation(" ".join(d.note.split()), float(time_h), d.kind) for d in deliveries])  # type: ignore[arg-type]


@dataclass
class SocialApplied:
    events: list[dict[str, Any]]
    touched: set[int]
    """Agents whose memories received notes now (flush them)."""
    deferred: dict[int, list[Delivery]]
    """Deliveries held back for the agents in ``defer`` (see :func:`apply_social`)."""


def apply_social(
    agents: Agents, plan: SocialPlan, replies: SocialReplies, *, defer: Collection[int] = ()
) -> SocialApplied:
    """Step 5 without the flush: memories, heard items, usage and counts, and the events.

    Agents in ``defer`` (in a session while this runs) receive nothing now: their notes and heard titles come back
    in ``deferred``, for :func:`deliver` at a point of their own chain, so what they read never depends on timing.
    """
    time_h = plan.time_h
    events = list(plan.events)
    touched: set[int] = set()
    held = {int(u) for u in defer}
    deferred: dict[int, list[Delivery]] = {}

    def give(user: int, delivery: Delivery) -> None:
        if user in held:
            deferred.setdefault(user, []).append(delivery)
        else:
            deliver(agents, user, [delivery], time_h)
            touched.add(user)

    for (a, b), result in zip(plan.chats, replies.chats, strict=True):
        names = {a: agents.profiles[a].name, b: agents.profiles[b].name}
        transcript = result.transcript(names)
        heard: dict[int, list[int]] = {a: [], b: []}
        for who, line in result.lines:
            listener = b if who == a else a
            heard[listener] += [i for i in agents.titles.find(line) if i not in heard[listener]]
        for me, other in ((a, b), (b, a)):
            note = memory_notes.chat(name=names[me], other=names[other], transcript=transcript)
            give(me, Delivery(note, "dialogue", tuple(heard[me]), other, "chat"))
        initiator = agents.agent(a)  # the chat's usage and counts go to the agent who started it
        initiator.usage = initiator.usage + result.usage
        initiator.count("chat", reasked=result.reasked > 0, fallback=result.fallbacks > 0)
        events.append(
            {
                "type": "chat",
                "users": [a, b],
                "lines": [[w, t] for w, t in result.lines],
                "heard": {str(k): v for k, v in heard.items()},
                "fallbacks": result.fallbacks,
                "tokens": result.usage.total_tokens,
                "latency_s": result.usage.latency_s,
                "time_h": time_h,
            }
        )
    for post in replies.posts:
        u = post.user_id
        agent = agents.agent(u)
        agent.usage = agent.usage + post.usage
        agent.count("post", reasked=post.reasked, fallback=post.fallback)
        recipients, items = post_deliveries(agents, u, post.text, exclude=plan.exclude_recipients)
        for user, delivery in recipients:
            give(user, delivery)
        events.append(
            {
                "type": "post",
                "user": u,
                "text": post.text,
                "recipients": [user for user, _ in recipients[1:]],
                "items": items,
                "fallback": post.fallback,
                "tokens": post.usage.total_tokens,
                "latency_s": post.usage.latency_s,
                "time_h": time_h,
            }
        )
    return SocialApplied(events, touched, deferred)


def generate_social(agents: Agents, plan: SocialPlan) -> SocialReplies:
    """:meth:`SocialPlan.generate` with the agents' language model and social settings."""
    cfg = agents.social_config
    return plan.generate(
        agents.llm, turns=cfg.max_chat_turns, max_tokens=cfg.utterance_max_tokens, one_call=agents.combined
    )


def chat_or_post(
    agents: Agents,
    users: Sequence[int],
    rng: np.random.Generator,
    time_h: float,
    *,
    settle: Settle,
    exclude: set[int] | frozenset[int] = frozenset(),
    exclude_recipients: set[int] | frozenset[int] = frozenset(),
    chat_weight: float = 1.0,
    post_weight: float = 1.0,
) -> list[dict[str, Any]]:
    """Steps 3-5 of the module docstring for ``users``, who chose the social media.

    Each chats with one random friend (weight ``chat_weight + Chatter``) or posts to all friends (``post_weight +
    Poster``); friends in ``exclude`` are never chat partners, those in ``exclude_recipients`` never receive posts.
    Events are plain dicts (``chat``, ``post``, ``no_friends``) carrying tokens and latency. Nothing happens
    when ``social.enabled`` is off. (:func:`plan_social`, :func:`generate_social`, :func:`apply_social`, flush.)
    """
    if not agents.social_config.enabled:
        return []
    plan = plan_social(
        agents, users, rng, time_h, settle=settle, exclude=exclude, exclude_recipients=exclude_recipients,
        chat_weight=chat_weight, post_weight=post_weight,
    )  # fmt: skip
    applied = apply_social(agents, plan, generate_social(agents, plan))
    if applied.touched:
        agents.memory_backend.flush([agents.memory(u) for u in sorted(applied.touched)], time_h)
    return applied.events


def post_deliveries(
    agents: Agents, author: int, text: str, *, exclude: set[int] | frozenset[int] = frozenset()
) -> tuple[list[tuple[int, Delivery]], list[int]]:
    """A post's deliveries: the author's own note first, then each friend's (not in ``exclude``) with the titles
    it names. Returns ``([(user, delivery), ...], items named)``."""
    name = agents.profiles[author].name
    items = agents.titles.find(text)
    note = memory_notes.post(name=name, text=text)
    out = [(author, Delivery(note, "dialogue", (), author, ""))]
    out += [
        (f, Delivery(note, "dialogue", tuple(items), author, "post"))
        for f in agents.friends(author)
        if f not in exclude
    ]
    return out, items


def post_to_friends(
    agents: Agents, author: int, text: str, time_h: float, *, exclude: set[int] | frozenset[int] = frozenset()
) -> tuple[list[int], list[int]]:
    """Put a post into the author's and every friend's memory (friends in ``exclude`` skipped); friends hear the
    titles it names. No flush. Returns ``(recipients, items named)``."""
    deliveries, items = post_deliveries(agents, author, text, exclude=exclude)
    for user, delivery in deliveries:
        deliver(agents, user, [delivery], time_h)
    return [user for user, _ in deliveries[1:]], items
