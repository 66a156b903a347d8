"""Batched memory writing for many agents: one LLM call per stage, off the critical path.

:func:`flush_memories` takes every queued observation of every given memory through the stages

1. sensory compression (``generate``; invalid answers get one batched re-ask, then the counted fallback); with
   ``importance_with_summary`` the same reply carries the importance,
2. importance (``choose`` over ``"1"``..``"L"``, plus one content-free calibration prompt in the same call) of the
   records whose importance is still open (none, usually, with ``importance_with_summary``),
3. embedding (one embedder call), then storing, in observation order, into short-/long-term memory,
4. insights for short-term records promoted after K enhancements (``generate``, re-ask, fallback: none),
5. reflection for memories whose new importance passed the threshold (``generate``, re-ask, fallback: none),
   followed by merging near-duplicates,
6. forgetting, when an ``rng`` is passed.

Memories sharing a language model (or an embedder) share each call; distinct models are called once each.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from recagent_gym.llm.protocol import Usage
from recagent_gym.memory.asking import Ask, FlushReport, ask_all, embed_for, run_both
from recagent_gym.memory.insights import (
    insight_asks,
    insight_texts,
    reflect_memories,
    reflection_asks,
    reflection_texts,
    store_insights,
    store_reflection,
)
from recagent_gym.memory.record import MemoryRecord
from recagent_gym.memory.stages import Observation
from recagent_gym.memory.writable import WritableMemory
from recagent_gym.prompts import memory_importance, memory_sensory, memory_sensory_importance

__all__ = ["FlushReport", "flush_memories", "precompress", "reflect_memories"]

STAGE_SENSORY, STAGE_IMPORTANCE, STAGE_INSIGHT, STAGE_REFLECTION = 1, 2, 3, 4


def _compress(
    jobs: list[tuple[WritableMemory, Observation]], seed: int, report: FlushReport
) -> tuple[list[str], list[float | None]]:
    """Each observation's stored content, and its importance where the summary's own reply carried one
    (``importance_with_summary``); None: the importance ``choose`` decides."""
    contents = [obs.text for _, obs in jobs]
    levels: list[float | None] = [None] * len(jobs)
    asks: list[Ask] = []
    positions: list[int] = []
    used: list[tuple[WritableMemory, Observation]] = []
    for pos, (memory, obs) in enumerate(jobs):
        ready = memory.sensory.compressed.get(obs)
        if ready is not None:  # compressed ahead (precompress): the same prompt and seed, asked earlier
            contents[pos], levels[pos] = ready  # an identical observation twice (a repeated search) reuses it
            used.append((memory, obs))
            continue
        if not memory.sensory.needs_compression(obs):
            continue
        asks.append(_sensory_ask(memory, obs))
        positions.append(pos)
    for memory, obs in used:
        memory.sensory.compressed.pop(obs, None)
    ask_all(asks, seed, report, "sensory_fallbacks")
    for pos, ask in zip(positions, asks, strict=True):
        memory, obs = jobs[pos]
        value = ask.value
        if isinstance(value, tuple):
            value, levels[pos] = value
            if levels[pos] is None:  # a valid sentence without a usable level: the importance choose decides
                memory.stats["importance_fallbacks"] += 1
                report.fallbacks += 1
        if value is not None:
            contents[pos] = value
        else:
            contents[pos] = memory_sensory.fallback(obs.text, memory.config.sensory_max_chars)
        memory.stats["compressed"] += 1
    return contents, levels


def _sensory_ask(memory: WritableMemory, obs: Observation) -> Ask:
    """The question turning ``obs`` into one sentence (with its importance under ``importance_with_summary``)."""
    cfg = memory.config
    if cfg.importance_with_summary and cfg.score_importance:
        n = cfg.importance_levels

        def accept_both(
            text: str, _obs: Observation = obs, _max: int = cfg.sensory_max_chars, _n: int = n
        ) -> tuple[str, float | None] | None:
            return memory_sensory_importance.parse(text, _obs.text, _max, _n)

        return Ask(
            memory,
            memory_sensory_importance.build(obs.text, n),
            memory_sensory_importance.build(obs.text, n, retry=True),
            accept_both,
            cfg.sensory_max_tokens + 8,  # room for " | Importance: N"
            memory_sensory_importance.STOP,
        )

    def accept(text: str, _obs: Observation = obs, _max: int = cfg.sensory_max_chars) -> str | None:
        sentence = memory_sensory.parse(text)
        return sentence if memory_sensory.validate(sentence, _obs.text, _max) is None else None

    return Ask(
        memory,
        memory_sensory.build(obs.text),
        memory_sensory.build(obs.text, retry=True),
        accept,
        cfg.sensory_max_tokens,
        memory_sensory.STOP,
    )


def _importance(
    memories: Sequence[WritableMemory],
    contents: Sequence[str],
    seed: int,
    report: FlushReport,
    known: Sequence[float | None] = (),
) -> list[float]:
    """Importance of each record: ``known[i]`` where given, else one batched ``choose`` (default: scoring off)."""
    known = list(known) or [None] * len(memories)
    scores = [k if k is not None else m.config.default_importance for m, k in zip(memories, known, strict=True)]
    groups: dict[tuple[int, int, bool], list[int]] = {}
    for i, memory in enumerate(memories):
        if memory.config.score_importance and known[i] is None:
            key = (id(memory.llm), memory.config.importance_levels, memory.config.importance_calibration)
            groups.setdefault(key, []).append(i)
    for (_, levels, calibrate), members in groups.items():
        llm = memories[members[0]].llm
        prompts = [memory_importance.build(memories[i].agent_name, contents[i], levels) for i in members]
        if calibrate:
            prompts.append(memory_importance.calibration_prompt("someone", levels))
        options = [memory_importance.options(levels)] * len(prompts)
        choices = llm.choose(prompts, options, seed=seed)
        if len(choices) != len(prompts):
            raise RuntimeError(f"{llm.name}: choose returned {len(choices)} answers for {len(prompts)} prompts")
        report.llm_calls += 1
        report.prompts += len(prompts)
        baseline = choices[-1].scores if calibrate and choices[-1].answered else None
        for i, choice in zip(members, choices, strict=False):
            memories[i].usage += choice.usage
            if not choice.answered:  # a remote model named no level: the default importance, counted
                memories[i].stats["importance_fallbacks"] += 1
                report.fallbacks += 1
                continue
            scores[i] = memory_importance.parse(choice, levels, baseline)
        for choice in choices:
            report.usage += choice.usage
    return scores


def precompress(memory: WritableMemory, observations: Sequence[Observation]) -> None:
    """Compress ``observations`` of ``memory`` now, for its next flush (which then stores them without asking).

    The prompts and the seed are the flush's own (the memory's sensory seed for its next flush), so a backend that
    answers per prompt and seed (remote servers, the scripted model) gives the flush the same records either way;
    an agent's pipeline runs this beside its next page, off the round's critical path.

    Several of these may run at once on one memory (one per page of a session): each claims, under the memory's
    lock, the observations nobody has claimed yet, and asks the model OUTSIDE the lock, with its usage and counters
    kept apart until they are merged. Jobs of one session therefore overlap instead of queueing behind each other's
    LLM calls. Which job takes an observation depends on which runs first, but not what the observation becomes:
    every job before a flush uses that flush's seed, and a backend that seeds each prompt by itself (remote servers)
    answers a prompt the same in any batch. (Per-agent pipelines, the only caller running jobs at once, are on for
    remote backends only by default.)
    """
    lock = getattr(memory, "lock", None) or threading.RLock()
    sensory = memory.sensory
    with lock:
        mine = [o for o in dict.fromkeys(observations) if o not in sensory.compressed and o not in sensory.claimed]
        if not mine:
            return
        sensory.claimed.update(mine)
        seed = memory.next_seed(STAGE_SENSORY)
    tally = _Tally(memory)
    done: list[tuple[str, float | None]] = []
    try:
        done = list(zip(*_compress([(tally, o) for o in mine], seed, FlushReport()), strict=True))
    finally:
        with lock:  # results stored before the claims go, so no other job can take these observations meanwhile
            if done:  # (none when the model call failed: the flush asks again)
                sensory.compressed.update(zip(mine, done, strict=True))
            sensory.claimed.difference_update(mine)
            memory.usage += tally.usage
            memory.stats.update(tally.stats)


class _Tally:
    """A memory as the asks of :func:`precompress` see it: its model, config and queues, with the usage and the
    counters of these asks kept here (merged into the memory under its lock afterwards)."""

    def __init__(self, memory: WritableMemory) -> None:
        self._memory = memory
        self.usage = Usage()
        self.stats: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memory, name)


def flush_memories(
    memories: Sequence[WritableMemory],
    time_h: float,
    *,
    rng: np.random.Generator | None = None,
) -> FlushReport:
    """Write every queued observation of ``memories`` (batched across agents); forget afterwards if ``rng``.

    If a model or embedder call fails before anything is stored, the observations go back to their queues and the
    error propagates; a failure in the insight or reflection stage loses only those insights.
    """
    memories = list({id(m): m for m in memories}.values())
    report = FlushReport()
    if not memories:
        return report
    lead = memories[0]
    jobs = [(m, obs) for m in memories for obs in m.sensory.take()]
    report.observations = len(jobs)
    if jobs:
        owners = [m for m, _ in jobs]
        try:
            contents, known = _compress(jobs, lead.next_seed(STAGE_SENSORY), report)
            importance = _importance(owners, contents, lead.next_seed(STAGE_IMPORTANCE), report, known)
            vectors = embed_for(owners, contents, report)
        except BaseException:
            # Nothing is stored yet: put the observations back so that a failed call (LLMError, budget) loses none.
            for memory in memories:
                memory.sensory.pending[:0] = [obs for m, obs in jobs if m is memory]
            raise
        promotions: list[tuple[Any, Any]] = []
        for (memory, obs), content, imp, vec in zip(jobs, contents, importance, vectors, strict=True):
            record = MemoryRecord(content, float(imp), obs.time_h, obs.time_h, kind=obs.kind)
            promotions.extend((memory, p) for p in memory.store(record, vec))
        report.promoted = len(promotions)
    else:
        promotions = []
    # Insights of the promoted records and reflection are independent questions: both are asked at once (the
    # reflection reads its window before this flush's insights are stored), and their answers stored in that order.
    insights = insight_asks(promotions)
    reflection = reflection_asks(memories, force=False)
    insight_seed, reflection_seed = lead.next_seed(STAGE_INSIGHT), lead.next_seed(STAGE_REFLECTION)
    reflection_report = FlushReport()
    run_both(
        lambda: ask_all(insights, insight_seed, report, "insight_fallbacks"),
        lambda: ask_all(reflection[0], reflection_seed, reflection_report, "reflection_fallbacks"),
    )
    # Both sets of insights are known now: one embedder call for them all (a text's vector does not depend on its
    # batch), stored in the same order as before.
    owners, texts = insight_texts(insights)
    more_owners, more_texts = reflection_texts(reflection[0])
    vectors = embed_for(owners + more_owners, texts + more_texts, report) if texts or more_texts else []
    store_insights(insights, promotions, report, vectors[: len(texts)])
    store_reflection(*reflection, time_h, reflection_report, vectors[len(texts) :])
    report += reflection_report
    if rng is not None:
        for memory in memories:
            report.forgotten += len(memory.forget(rng, time_h))
    for memory in memories:
        memory.flushes += 1
    return report
