"""Recommender sessions of many agents, stepped page by page through the env's own page-step pieces.

Each session runs in a :class:`~recagent_gym.envs.recagent_env.RecAgentEnv` core (``begin_step`` -> user model ->
``search_request`` -> ``end_step``), the same code the Gymnasium env and its vector env run, sharing one dataset
table set, one search index and one user model. In parallel mode all open sessions answer each page in one
``respond_batch`` call and the sessions that end in a step end together (one feelings batch, one memory flush).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.simulator.events import Event
from recagent_gym.users.protocol import Page, Response


class DeferredEnds:
    """The user model as the env pool sees it: ``end_session`` calls are collected and run as one batch."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.pending: list[int] = []

    def end_session(self, user_id: int) -> None:
        self.pending.append(int(user_id))

    def flush(self) -> list[int]:
        ended, self.pending = self.pending, []
        if ended:
            batch = getattr(self.model, "end_sessions", None)
            if batch is not None:
                batch(ended)
            else:
                for u in ended:
                    self.model.end_session(u)
        return ended

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


@dataclass
class Slot:
    """One agent's open session."""

    user: int
    env: RecAgentEnv
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


def _respond(slots: Sequence[Slot], requests: Sequence[tuple[Page, Any]]) -> list[Response]:
    """One ``respond_batch`` per responder (the LLM agents together; a human alone)."""
    out: list[Response | None] = [None] * len(slots)
    groups: dict[int, list[int]] = {}
    for k, slot in enumerate(slots):
        groups.setdefault(id(slot.responder), []).append(k)
    for indices in groups.values():
        responder = slots[indices[0]].responder
        answers = responder.respond_batch([requests[k] for k in indices], [slots[k].env.session_rng for k in indices])
        for k, answer in zip(indices, answers, strict=True):
            out[k] = answer
    return [r for r in out if r is not None]


def run_sessions(
    slots: Sequence[Slot], deferred: DeferredEnds, ctx: SessionContext, rng: np.random.Generator, model: Any
) -> list[Event]:
    """Step ``slots`` together until every session has ended; returns their events in order."""
    events: list[Event] = []
    r, t = ctx.round_index, ctx.time_h
    open_slots = [s for s in slots if not s.done]
    while open_slots:
        requests: list[tuple[Page, Any]] = []
        randoms: list[set[int]] = []
        for slot in open_slots:
            items, random_items = ctx.page(slot, rng)
            page, context = slot.env.begin_step(items)
            requests.append((page, context))
            randoms.append(random_items)
            events.append(
                Event(
                    r,
                    t,
                    "page",
                    slot.user,
                    ctx.names[slot.user],
                    items=list(page.items),
                    titles=[ctx.titles(i) for i in page.items],
                    extra={"page_index": page.index, "random_items": sorted(random_items & set(page.items))},
                )
            )
        responses = _respond(open_slots, requests)
        searches = [slot.env.search_request(resp) for slot, resp in zip(open_slots, responses, strict=True)]
        asked = [k for k, req in enumerate(searches) if req is not None]
        search_answers: list[Response | None] = [None] * len(open_slots)
        if asked:
            answers = _respond([open_slots[k] for k in asked], [searches[k] for k in asked])  # type: ignore[misc]
            for k, answer in zip(asked, answers, strict=True):
                search_answers[k] = answer
        for k, slot in enumerate(open_slots):
            obs, _, terminated, truncated, info = slot.env.end_step(responses[k], search_answers[k])
            slot.obs = obs
            done = bool(terminated or truncated)
            if ctx.observe is not None:
                ctx.observe(info, done)
            events.extend(_step_events(slot, info, randoms[k], ctx, truncated and not terminated))
            slot.done = done
        ended = set(deferred.flush())
        for slot in open_slots:
            if slot.done:
                events.extend(_close(slot, model, ctx, slot.user in ended))
                ctx.on_done(slot)
        open_slots = [s for s in open_slots if not s.done]
    return events


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


def _close(slot: Slot, model: Any, ctx: SessionContext, ended_by_model: bool) -> list[Event]:
    """Ratings and feelings written at the end of the session (deferred mode) go into the rows and the log."""
    agent = model.agent(slot.user) if ended_by_model and hasattr(model, "agent") else None
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
