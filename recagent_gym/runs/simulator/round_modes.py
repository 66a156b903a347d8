"""The two ways a round's sessions and social actions run once the agents have chosen (see :mod:`.simulation`).

- :func:`staged_round` (the embedded model): the stages in turn, each one batch for all agents: the page loop of
  every session (the social agents' LLM calls beside it with ``overlap_social``), the social actions applied, then
  the ended sessions' feelings and every memory touched this round in one batch.
- :func:`pipelined_round` (remote backends): each recommender agent's round is its own chain (pages; then its social
  notes, feelings and memory writes, prepared beside its pages) and the social agents' chain runs beside them, so a
  round costs about the longest chain; the recommender learns the round's watches in agent order afterwards. When
  the backend's slots are all taken, the chains' pages (and the social chain) go first, then a chain's end, then
  the work prepared beside the pages and the social notes' writes for agents outside a session
  (:data:`~.sessions.CHAIN_PRIORITY`; ``docs/speed.md``).

Both take the :class:`~.simulation.Simulation` and leave its state as the round's results require; the events come
back in the order the log keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from recagent_gym.llm.priority import at_priority, request_priority
from recagent_gym.llm.seeding import SEED_HIGH
from recagent_gym.runs.simulator.events import Event
from recagent_gym.runs.simulator.sessions import (
    AHEAD_PRIORITY,
    CHAIN_PRIORITY,
    HumanUser,
    Slot,
    close_sessions,
    finish_sessions,
    open_sessions,
    run_chain,
    run_sessions,
)
from recagent_gym.runs.simulator.social_step import apply_round_social
from recagent_gym.users.agent.social_round import Delivery, SocialPlan, deliver, generate_social, precompress_deliveries

if TYPE_CHECKING:
    from tqdm import tqdm

    from recagent_gym.runs.config import Config
    from recagent_gym.runs.simulator.clock import SimClock
    from recagent_gym.runs.simulator.sessions import SessionContext
    from recagent_gym.session import SessionKernel


class Simulation(Protocol):
    """What a round's modes use of :class:`~recagent_gym.runs.simulator.simulation.Simulation` (which imports them)."""

    config: Config
    clock: SimClock
    kernel: SessionKernel
    model: Any
    names: list[str]
    human: Any

    def session_context(self, bar: tqdm) -> SessionContext: ...

    def overlaps_social(self) -> bool: ...


PIPELINE_THREADS = 256
"""Most agent chains in flight at once (each waits on the backend, which bounds the requests in flight)."""


def staged_round(
    sim: Simulation, users: Sequence[int], plan: SocialPlan | None, rng: np.random.Generator, bar: tqdm
) -> list[Event]:
    """The round as stages, each one batch for all agents (see the module docstring)."""
    r, t = sim.clock.round, sim.clock.time_h
    events: list[Event] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="social") as pool:
        beside = plan is not None and sim.overlaps_social()
        replies = pool.submit(generate_social, sim.model, plan) if beside else None
        slots, session_events = run_page_loops(sim, users, rng, bar)
        events.extend(session_events)
        touched: set[int] = set()
        if plan is not None:
            answer = replies.result() if replies is not None else generate_social(sim.model, plan)
            social_events, applied = apply_round_social(sim.model, plan, answer, r)
            touched = applied.touched
            events.extend(social_events)
    events.extend(finish_sessions(slots, sim.session_context(bar), sim.model, also=touched, time_h=t))
    return events


def run_page_loops(
    sim: Simulation, users: Sequence[int], rng: np.random.Generator, bar: tqdm
) -> tuple[list[Slot], list[Event]]:
    """The page loop of every session (their end-of-session writes wait for :func:`finish_sessions`): all at once
    (``execution: parallel``) or one after the other."""
    if not users:
        return [], []
    r, t = sim.clock.round, sim.clock.time_h
    human = None if sim.human is None else HumanUser(sim.human)
    responders = [human if human is not None and u == sim.human.user_id else sim.model for u in users]
    seeds = [int(rng.integers(0, SEED_HIGH)) for _ in users]
    slots = open_sessions(sim.kernel, users, responders, seeds, t)  # the simulator's clock: agents live by it
    events = [Event(r, t, "enter", s.user, sim.names[s.user]) for s in slots]
    ctx = sim.session_context(bar)
    groups = [slots] if sim.config.simulation.execution == "parallel" else [[s] for s in slots]
    for group in groups:
        events.extend(run_sessions(sim.kernel, group, ctx, rng))
    return slots, events


def pipelined_round(
    sim: Simulation, users: Sequence[int], plan: SocialPlan | None, rng: np.random.Generator, bar: tqdm
) -> list[Event]:
    """Every recommender agent's chain (:func:`run_chain`) and the social agents' chain at once; events in agent
    order, then the social events (as the staged round writes them)."""
    r, t = sim.clock.round, sim.clock.time_h
    seeds = [int(rng.integers(0, SEED_HIGH)) for _ in users]
    page_seeds = [int(rng.integers(0, SEED_HIGH)) for _ in users]  # each chain's random page items
    slots = open_sessions(sim.kernel, users, [sim.model] * len(users), seeds, t)
    events = [Event(r, t, "enter", s.user, sim.names[s.user]) for s in slots]
    ctx = sim.session_context(bar)
    workers = max(2, min(len(users) + 1, PIPELINE_THREADS))
    # work ahead: each page may start a feeling and a compression per agent, and they must not queue (a queued
    # job lengthens its agent's chain), so the pool is several jobs per agent wide
    with (
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent") as pool,
        ThreadPoolExecutor(max_workers=min(4 * workers, PIPELINE_THREADS), thread_name_prefix="ahead") as ahead,
    ):
        handed: Future[Deliveries] = Future()
        social = (
            pool.submit(at_priority(CHAIN_PRIORITY, lambda: social_chain(sim, plan, frozenset(users), ahead, handed)))
            if plan is not None
            else None
        )
        receive = _receiver(sim, handed if plan is not None else None, t)
        chains = [
            pool.submit(run_chain, sim.kernel, slot, ctx, np.random.default_rng(seed), sim.model, receive, ahead)
            for slot, seed in zip(slots, page_seeds, strict=True)
        ]
        results = [c.result() for c in chains]
        social_events = social.result() if social is not None else []
    for result in results:
        events.extend(result.events)
        if ctx.observe is not None:  # the recommender learns the round's watches in agent order
            for info, done in result.observed:
                ctx.observe(info, done)
    events.extend(social_events)
    events.extend(close_sessions(slots, ctx, sim.model))
    return events


Deliveries = tuple[dict[int, list[Delivery]], dict[int, Future[None]]]
"""The social notes for agents in a session (delivered at their chain's end), and their compressions under way."""


def _receiver(sim: Simulation, handed: Future[Deliveries] | None, time_h: float) -> Any:
    def receive(user: int) -> None:  # an agent's social notes, after its last page and before its writes
        if handed is not None:
            deferred, compressing = handed.result()
            if user in compressing:
                compressing[user].result()
            deliver(sim.model, user, deferred.get(user, ()), time_h)

    return receive


def social_chain(
    sim: Simulation, plan: SocialPlan, in_session: frozenset[int], ahead: ThreadPoolExecutor, handed: Future[Deliveries]
) -> list[Event]:
    """The social agents' chain: their chats and posts, delivered to everyone not in a session now, whose memories
    are then written; the deliveries for agents in a session are handed to their chains (``handed``, before those
    writes), with the compression of those notes started ahead (``ahead``) for each of them. Returns the events."""
    try:
        answer = generate_social(sim.model, plan)
        events, applied = apply_round_social(sim.model, plan, answer, sim.clock.round, defer=in_session)
        compressing = {
            u: ahead.submit(precompress_deliveries, sim.model.memory(u), deliveries, plan.time_h)
            for u, deliveries in applied.deferred.items()
        }
        handed.set_result((applied.deferred, compressing))
    except BaseException as exc:
        if not handed.done():  # the chains waiting for their notes fail with it instead of waiting for ever
            handed.set_exception(exc)
        raise
    if applied.touched:  # nobody waits on these writes before the round's end
        with request_priority(AHEAD_PRIORITY):
            sim.model.memory_backend.flush([sim.model.memory(u) for u in sorted(applied.touched)], plan.time_h)
    return events
