"""Recommender sessions of many agents, stepped page by page by the session kernel with the recommender's pages.

Each open session is a lane of :class:`~recagent_gym.session.SessionKernel` (the pipeline the env and the vector
env run). In parallel mode all open sessions answer each page in one ``respond_batch`` call. End-of-session writes
(feelings, ratings, memory) never run inside the page loop: the simulator's rules defer them
(:data:`DEFERRED_END_BATCH`) and :func:`finish_sessions` writes every ended session of the round in one batch, so a
page step costs one LLM wave, not one plus the writing waves of the sessions that just ended.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recagent_gym.llm.priority import at_priority, request_priority
from recagent_gym.runs.simulator.events import Event
from recagent_gym.session import SessionKernel, SessionStream, StepResult, observe
from recagent_gym.users.protocol import Context, Page, Response

DEFERRED_END_BATCH = 1 << 30
"""``SessionRules.end_batch`` of the simulator: the kernel never writes ended sessions itself (see the module)."""


class HumanUser:
    """A human player in the user-model protocol: no end-of-session writing, no social round (the simulator runs
    the human's social turn itself)."""

    social = False

    def __init__(self, player: Any) -> None:
        self.player = player

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        self.player.start_session(user_id, rng)

    def respond_batch(
        self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[np.random.Generator]
    ) -> list[Response]:
        return self.player.respond_batch(requests, rngs)

    def end_sessions(self, user_ids: Sequence[int]) -> None:
        for user_id in user_ids:
            self.player.end_session(user_id)

    def write_ended(self, *, at_least: int = 1) -> list[int]:
        return []

    def social_round(self, rng: np.random.Generator, time_h: float, incoming: Sequence[int]) -> list[dict[str, Any]]:
        return []


@dataclass
class Slot:
    """One agent's open session."""

    user: int
    lane: SessionStream
    responder: Any
    """The user model answering this agent's pages (the LLM agents, or a human in role play)."""
    obs: dict[str, np.ndarray]
    done: bool = False
    watches: list[dict[str, Any]] = field(default_factory=list)
    """Interaction rows of this session (ratings filled when the session ends, if the model rates then)."""


@dataclass
class SessionContext:
    """What one round's sessions need from the simulation."""

    round_index: int
    time_h: float
    names: Sequence[str]
    titles: Callable[[int], str]
    page: Callable[[Slot, np.random.Generator], tuple[np.ndarray, set[int]]]
    """The page to show (recommender plus random items) and which of its items are the random ones."""
    observe: Callable[[dict[str, Any], bool], None] | None
    """The recommender's online-learning hook (``MFRecommender.observe``), if any."""
    on_done: Callable[[Slot], None]


def open_sessions(
    kernel: SessionKernel, users: Sequence[int], responders: Sequence[Any], seeds: Sequence[int], time_h: float
) -> list[Slot]:
    """Start one session per user at the simulator's clock (``seeds``: each session's lane seed)."""
    lanes = [SessionStream(np.random.default_rng(seed)) for seed in seeds]
    kernel.restart(lanes, list(range(len(lanes))), responders, user_ids=list(users), time_h=time_h)
    return [
        Slot(u, lane, responder, observe(lane.session, kernel.tables, kernel.rules.max_pages))  # type: ignore[arg-type]
        for u, lane, responder in zip(users, lanes, responders, strict=True)
    ]


def run_sessions(
    kernel: SessionKernel, slots: Sequence[Slot], ctx: SessionContext, rng: np.random.Generator
) -> list[Event]:
    """Step ``slots`` together until every session has ended; returns their page events in order (the sessions'
    writes wait for :func:`finish_sessions`)."""
    events: list[Event] = []
    open_slots = [s for s in slots if not s.done]
    while open_slots:
        pages = [ctx.page(slot, rng) for slot in open_slots]
        sessions = [slot.lane.session for slot in open_slots]
        results = kernel.step_sessions(sessions, [p for p, _ in pages], [s.responder for s in open_slots])  # type: ignore[arg-type]
        for slot, result, (_, randoms) in zip(open_slots, results, pages, strict=True):
            events.append(_page_event(slot, result, randoms, ctx))
        for slot, result, (_, randoms) in zip(open_slots, results, pages, strict=True):
            info = result.info()
            slot.obs = observe(slot.lane.session, kernel.tables, kernel.rules.max_pages)  # type: ignore[arg-type]
            if ctx.observe is not None:
                ctx.observe(info, result.done)
            events.extend(_step_events(slot, info, randoms, ctx, result.truncated))
            slot.done = result.done
        open_slots = [s for s in open_slots if not s.done]
    return events


@dataclass
class ChainResult:
    """What one agent's pipeline produced: its page events, and the recommender observations it owes, in order."""

    events: list[Event]
    observed: list[tuple[dict[str, Any], bool]]


CHAIN_PRIORITY = 2
"""The LLM requests of a chain's pages (and of the social agents' chain) go first when the backend is full: the
round lasts as long as its longest chain, and each page waits on the one before."""
WRITES_PRIORITY = 1
"""A chain's end (its social notes and memory writes, after its last page)."""
AHEAD_PRIORITY = 0
"""Work prepared beside a chain's next page (feelings, compressions): it has until the chain's last page (the
last page's own work goes at :data:`WRITES_PRIORITY`: the chain's end waits on it)."""


def run_chain(
    kernel: SessionKernel,
    slot: Slot,
    ctx: SessionContext,
    rng: np.random.Generator,
    model: Any,
    before_writes: Callable[[int], None] | None = None,
    background: Executor | None = None,
) -> ChainResult:
    """One agent's round as its own chain (the per-agent pipeline): its pages one after the other until its session
    ends, then (after ``before_writes(user)``: the social notes it receives) its feelings and memory writes. With
    ``background``, what those writes need is prepared beside the next page (the model's ``prefetch``: each watch's
    feeling, the compression of the queued notes, as independent jobs), so the end of the chain is short.

    Many chains run at once in threads; each touches only its own agent's state, and the recommender's online
    learning is returned (``observed``) for the caller to apply in a fixed order, so the result does not depend
    on which chain's requests come back first.
    """
    with request_priority(CHAIN_PRIORITY):
        return _chain(kernel, slot, ctx, rng, model, before_writes, background)


def _chain(
    kernel: SessionKernel,
    slot: Slot,
    ctx: SessionContext,
    rng: np.random.Generator,
    model: Any,
    before_writes: Callable[[int], None] | None,
    background: Executor | None,
) -> ChainResult:
    events: list[Event] = []
    observed: list[tuple[dict[str, Any], bool]] = []
    ahead: list[Future[None]] = []
    prefetch = getattr(model, "prefetch", None) if background is not None and slot.responder is model else None
    while not slot.done:
        page, randoms = ctx.page(slot, rng)
        [result] = kernel.step_sessions([slot.lane.session], [page], [slot.responder])  # type: ignore[list-item]
        events.append(_page_event(slot, result, randoms, ctx))
        info = result.info()
        slot.obs = observe(slot.lane.session, kernel.tables, kernel.rules.max_pages)  # type: ignore[arg-type]
        observed.append((info, result.done))
        events.extend(_step_events(slot, info, randoms, ctx, result.truncated))
        slot.done = result.done
        level = WRITES_PRIORITY if slot.done else AHEAD_PRIORITY
        for job in prefetch(slot.user) if prefetch is not None else ():
            ahead.append(background.submit(at_priority(level, job)))  # type: ignore[union-attr]
    with request_priority(WRITES_PRIORITY):
        for future in ahead:
            future.result()
        if before_writes is not None:
            before_writes(slot.user)
        write = getattr(model, "write_sessions_of", None)
        if write is not None and slot.responder is model:
            write([slot.user])
    return ChainResult(events, observed)


def close_sessions(slots: Sequence[Slot], ctx: SessionContext, model: Any) -> list[Event]:
    """The sessions' feeling events and rows (their writes are done)."""
    events: list[Event] = []
    for slot in slots:
        events.extend(_close(slot, model, ctx))
        ctx.on_done(slot)
    return events


def finish_sessions(
    slots: Sequence[Slot], ctx: SessionContext, model: Any, *, also: Collection[int] = (), time_h: float = 0.0
) -> list[Event]:
    """Write every ended session's feelings, ratings and memory in one batch (with the memories of ``also``: the
    round's social notes), then the sessions' feeling events and rows."""
    write = getattr(model, "write_ended", None)
    if write is not None and also:
        write(also=also, time_h=time_h)
    elif write is not None:
        write()
    return close_sessions(slots, ctx, model)


def _page_event(slot: Slot, result: StepResult, randoms: set[int], ctx: SessionContext) -> Event:
    page = result.page
    return Event(
        ctx.round_index,
        ctx.time_h,
        "page",
        slot.user,
        ctx.names[slot.user],
        items=list(page.items),
        titles=[ctx.titles(i) for i in page.items],
        extra={"page_index": page.index, "random_items": sorted(randoms & set(page.items))},
    )


def _step_events(slot: Slot, info: dict[str, Any], randoms: set[int], ctx: SessionContext, cut: bool) -> list[Event]:
    r, t, name = ctx.round_index, ctx.time_h, ctx.names[slot.user]
    usage = info["usage"]
    common = {"tokens": usage.total_tokens, "latency_s": usage.latency_s}
    extra = {"parse_ok": info["parse_ok"], "fallbacks": info["fallbacks"], "page_index": info["page_index"]}
    out = []
    if info["action"] == "search":
        found = list(info["search_page"] or ())
        out.append(
            Event(
                r,
                t,
                "search",
                slot.user,
                name,
                items=found,
                titles=[ctx.titles(i) for i in found],
                text=info["query"] or "",
                extra=extra,
                **common,
            )
        )
        common = {"tokens": 0, "latency_s": 0.0}
    item = info["item"]
    if item is not None:
        source = "search" if info["from_search"] else ("random" if item in randoms else "recommender")
        row = {
            "user_id": slot.user,
            "item_id": int(item),
            "rating": info["rating"],
            "timestamp": round(t * 3600) + len(slot.watches),
            "round": r,
            "source": source,
        }
        slot.watches.append(row)
        out.append(
            Event(
                r,
                t,
                "watch",
                slot.user,
                name,
                items=[int(item)],
                titles=[ctx.titles(int(item))],
                text=info["text"],
                extra={**extra, "source": source, "rating": info["rating"]},
                **common,
            )
        )
    elif info["response"] == "leave":
        out.append(Event(r, t, "leave", slot.user, name, text=info["text"], extra=extra, **common))
    else:
        out.append(Event(r, t, "next", slot.user, name, text=info["text"], extra=extra, **common))
    if cut:
        out.append(Event(r, t, "leave", slot.user, name, extra={"truncated": True}))
    return out


def _close(slot: Slot, model: Any, ctx: SessionContext) -> list[Event]:
    """Ratings and feelings written at the end of the session (deferred mode) go into the rows and the log."""
    agent = model.agent(slot.user) if slot.responder is model and hasattr(model, "agent") else None
    events = []
    for row in slot.watches:
        feeling = None
        if agent is not None:
            if row["rating"] is None and row["item_id"] in agent.ratings:
                row["rating"] = float(agent.ratings[row["item_id"]])
            feeling = agent.feelings.get(row["item_id"])
        if feeling:
            events.append(
                Event(
                    ctx.round_index,
                    ctx.time_h,
                    "feeling",
                    slot.user,
                    ctx.names[slot.user],
                    items=[row["item_id"]],
                    titles=[ctx.titles(row["item_id"])],
                    text=feeling,
                    extra={"rating": row["rating"]},
                )
            )
    return events
