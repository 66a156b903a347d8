"""The feelings (and ratings) of the items agents watched, written into their state and memories.

By default they are written at session end, for every ended session at once (one batch: :func:`write_pending`);
a per-agent pipeline may write one agent's ahead of its session end (:func:`prefetch_jobs`), and
``user.feeling_timing: inline`` writes them right after the page decision (:func:`with_inline_feelings`). The
generation itself is :func:`~recagent_gym.users.agent.feelings.write_feelings`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from recagent_gym.llm.seeding import SEED_HIGH
from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.stages import Observation
from recagent_gym.memory.writer import precompress
from recagent_gym.prompts import memory_notes
from recagent_gym.users.agent.agents import Agents
from recagent_gym.users.agent.feelings import FeelingJob, FeelingResult, write_feelings
from recagent_gym.users.agent.page import Prepared
from recagent_gym.users.agent.state import PendingFeeling, SessionState
from recagent_gym.users.protocol import Action, Response

Pending = Sequence[tuple[int, PendingFeeling]]
"""``(user, watched item's pending feeling)`` pairs."""
ReadyFeelings = dict[int, tuple[Any, Any]]
"""Feelings written ahead, by ``id`` of their pending entry: ``(entry, result or None while claimed)``."""


def feeling_levels(agents: Agents) -> int | None:
    """The importance levels a combined feeling reply also answers for the agent's memory (None: not asked): only
    where the paper's memory scores importance, so that the feeling's note is stored as written."""
    cfg = getattr(agents.memory_backend, "config", None)
    if not (agents.combined and agents.config.rate_after_watch and isinstance(cfg, MemoryConfig)):
        return None
    return cfg.importance_levels if cfg.score_importance and cfg.implementation != "none" else None


def compute_feelings(agents: Agents, pending: Pending, seed: int) -> list[FeelingResult]:
    """The feelings (and ratings) of ``pending``, one batch; nothing is stored."""
    cfg = agents.config
    jobs = [
        FeelingJob(
            profile=agents.profile_text(u, "feeling"),
            name=agents.profiles[u].name,
            item_text=agents.item_line(p.item),
            title=agents.title(p.item),
            score=p.score,
        )
        for u, p in pending
    ]
    return write_feelings(
        agents.llm,
        jobs,
        rate=cfg.rate_after_watch,
        max_tokens=cfg.feeling_max_tokens,
        seed=seed,
        combined=agents.combined,
        importance_levels=feeling_levels(agents),
    )


def apply_feelings(agents: Agents, pending: Pending, results: Sequence[FeelingResult]) -> None:
    """Store each result: the agent's usage, counts, rating and feeling, and the feeling's memory note."""
    levels = feeling_levels(agents)
    for (u, p), result in zip(pending, results, strict=True):
        agent = agents.agent(u)
        agent.usage = agent.usage + result.usage
        agent.count("feeling", reasked=result.feeling_reasked, fallback=result.feeling_fallback)
        if agents.config.rate_after_watch:
            agent.count("rating", reasked=result.rating_reasked, fallback=result.rating_fallback)
            agent.ratings[p.item] = float(result.rating)
        agent.feelings[p.item] = result.feeling
        note, memory = feeling_note(agents, u, p, result), agents.memory(u)
        if levels is not None:
            agent.count("feeling_importance", fallback=result.importance_fallback)
        if result.importance is not None and hasattr(memory, "observe_written"):
            memory.observe_written(note, result.importance, p.time_h, kind="feeling")
        else:
            memory.observe([note], p.time_h, kind="feeling")


def feeling_note(agents: Agents, user_id: int, p: PendingFeeling, result: FeelingResult) -> str:
    return memory_notes.feeling(
        name=agents.profiles[user_id].name, title=agents.title(p.item), feeling=result.feeling, rating=result.rating
    )


def write_pending(agents: Agents, sessions: Sequence[SessionState], ready: ReadyFeelings) -> None:
    """Write the pending feelings of ``sessions``: those written ahead (taken out of ``ready``) and the rest as one
    batch, seeded by the first session's rng; then clear the sessions' pending lists."""
    if not agents.config.write_feelings:
        return
    pending = [(s.user_id, p) for s in sessions for p in s.pending]
    done = {id(p): ready.pop(id(p))[1] for _, p in pending if id(p) in ready}
    todo = [(u, p) for u, p in pending if id(p) not in done]
    if todo:  # everything not written ahead (prefetch): one batch, seeded as always
        done.update(
            zip(
                (id(p) for _, p in todo),
                compute_feelings(agents, todo, seed=int(sessions[0].rng.integers(0, SEED_HIGH))),
                strict=True,
            )
        )
    if pending:
        apply_feelings(agents, pending, [done[id(p)] for _, p in pending])
    for s in sessions:
        s.pending.clear()


def prefetch_jobs(agents: Agents, session: SessionState, ready: ReadyFeelings) -> list[Callable[[], None]]:
    """Work that ``session``'s end will need, to run now beside the agent's next page: one job per new watch (its
    feeling, and the compression of its note unless the feeling's reply scored it), and one job compressing the
    notes queued so far. The jobs are independent: they may run at once.

    Seeds and the notes each job takes are fixed here, in the agent's own order; the jobs only call the language
    model and keep the answers in ``ready`` (:func:`write_pending` uses them), so results do not depend on when
    they run.
    """
    user_id = session.user_id
    memory = agents.memory(user_id)
    new = [p for p in session.pending if id(p) not in ready] if agents.config.write_feelings else []
    seeds = [int(session.rng.integers(0, SEED_HIGH)) for _ in new]
    for p in new:
        ready[id(p)] = (p, None)  # claimed (the object stays referenced while its id is a key)
    paper = isinstance(memory, AgentMemory) and memory.enabled  # only the paper's memory compresses notes
    queued = list(memory.sensory.pending) if paper else []

    def feel(p: PendingFeeling, seed: int) -> None:
        [result] = compute_feelings(agents, [(user_id, p)], seed)
        ready[id(p)] = (p, result)
        if paper and result.importance is None:  # else the note is stored as written (apply_feelings)
            note = feeling_note(agents, user_id, p, result)
            precompress(memory, [Observation(" ".join(note.split()), p.time_h, "feeling")])

    jobs: list[Callable[[], None]] = [partial(feel, p, seed) for p, seed in zip(new, seeds, strict=True)]
    if queued:
        jobs.append(partial(precompress, memory, queued))
    return jobs


def with_inline_feelings(agents: Agents, prepared: Sequence[Prepared], responses: list[Response]) -> list[Response]:
    """``responses`` with each watch's feeling and rating written now (``user.feeling_timing: inline``)."""
    watchers = [k for k, r in enumerate(responses) if r.action == Action.WATCH]
    if not watchers:
        return responses
    pending = []
    for k in watchers:
        session = agents.session(prepared[k].ctx.user_id)
        pending.append((session.user_id, session.pending.pop()))
    results = compute_feelings(agents, pending, seed=prepared[watchers[0]].seed + 7)
    apply_feelings(agents, pending, results)
    out = list(responses)
    for k, result in zip(watchers, results, strict=True):
        r = out[k]
        fallback = r.fallback or result.feeling_fallback or result.rating_fallback
        out[k] = Response(
            action=r.action,
            item=r.item,
            rating=result.rating,
            feeling=result.feeling,
            query=r.query,
            text=r.text,
            usage=r.usage + result.usage,
            parse_ok=r.parse_ok,
            fallback=fallback,
            extra={**r.extra, "feeling_fallback": result.feeling_fallback},
        )
    return out
