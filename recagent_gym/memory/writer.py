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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from recagent_gym.llm.protocol import Generation, Usage
from recagent_gym.memory.record import MemoryRecord
from recagent_gym.memory.sensory import Observation
from recagent_gym.memory.writable import WritableMemory
from recagent_gym.prompts import (
    memory_importance,
    memory_insight,
    memory_reflection,
    memory_sensory,
    memory_sensory_importance,
)

STAGE_SENSORY, STAGE_IMPORTANCE, STAGE_INSIGHT, STAGE_REFLECTION = 1, 2, 3, 4


@dataclass
class FlushReport:
    """What one flush did and cost. ``llm_calls`` counts batched ``generate``/``choose`` invocations; ``prompts``
    the prompts inside them."""

    observations: int = 0
    llm_calls: int = 0
    prompts: int = 0
    embed_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    reasks: int = 0
    fallbacks: int = 0
    promoted: int = 0
    insights: int = 0
    reflections: int = 0
    merged: int = 0
    forgotten: int = 0

    def __add__(self, other: FlushReport) -> FlushReport:
        return FlushReport(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "usage"}
        data.update(prompt_tokens=self.usage.prompt_tokens, completion_tokens=self.usage.completion_tokens)
        return data


@dataclass
class _Ask:
    """One free-text question for one memory, with its re-ask prompt and its parse+validate step."""

    memory: WritableMemory
    prompt: str
    retry_prompt: str
    accept: Callable[[str], Any]
    """Parsed, valid value of an answer, or None when the answer is invalid."""
    max_tokens: int
    stop: tuple[str, ...]
    value: Any = None


def _generate(asks: Sequence[_Ask], prompts: Sequence[str], temperature: float, seed: int, report: FlushReport) -> None:
    """Answer ``prompts[i]`` for ``asks[i]``: one ``generate`` per (model, max_tokens, stop) group."""
    groups: dict[tuple[int, int, tuple[str, ...]], list[int]] = {}
    for i, ask in enumerate(asks):
        groups.setdefault((id(ask.memory.llm), ask.max_tokens, ask.stop), []).append(i)
    for (_, max_tokens, stop), members in groups.items():
        llm = asks[members[0]].memory.llm
        outs: list[Generation] = llm.generate(
            [prompts[i] for i in members], max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed
        )
        if len(outs) != len(members):
            raise RuntimeError(f"{llm.name}: generate returned {len(outs)} answers for {len(members)} prompts")
        report.llm_calls += 1
        report.prompts += len(members)
        for i, out in zip(members, outs, strict=True):
            asks[i].memory.usage += out.usage
            report.usage += out.usage
            text = out.text
            if out.finish_reason == "length":  # cut at max_tokens: the last line is unfinished, never accept it
                text = text.rsplit("\n", 1)[0] if "\n" in text.strip() else ""
            asks[i].value = asks[i].accept(text)


def _ask_all(asks: Sequence[_Ask], seed: int, report: FlushReport, fallback_stat: str) -> None:
    """Ask everything once; re-ask the invalid ones once (one batch, reminder, ``reask_temperature``). Values left
    None are fallbacks, counted per memory under ``fallback_stat``."""
    if not asks:
        return
    _generate(asks, [a.prompt for a in asks], 0.0, seed, report)
    retry = [a for a in asks if a.value is None]
    if retry:
        report.reasks += len(retry)
        for ask in retry:
            ask.memory.stats["reasks"] += 1
        # Memories may differ in reask_temperature; the first one's applies to the shared batch.
        temperature = retry[0].memory.config.reask_temperature
        _generate(retry, [a.retry_prompt for a in retry], temperature, (seed + 1) & 0x7FFFFFFF, report)
        for ask in retry:
            if ask.value is None:
                ask.memory.stats[fallback_stat] += 1
                report.fallbacks += 1


def _embed(memories: Sequence[WritableMemory], texts: Sequence[str], report: FlushReport) -> list[np.ndarray]:
    """Unit embeddings of ``texts[i]`` with ``memories[i]``'s embedder, one call per distinct embedder."""
    groups: dict[int, list[int]] = {}
    for i, memory in enumerate(memories):
        groups.setdefault(id(memory.embedder), []).append(i)
    out: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(texts)
    for members in groups.values():
        matrix = memories[members[0]].embed([texts[i] for i in members])
        report.embed_calls += 1
        for row, i in enumerate(members):
            out[i] = matrix[row]
    return out


def _compress(
    jobs: list[tuple[WritableMemory, Observation]], seed: int, report: FlushReport
) -> tuple[list[str], list[float | None]]:
    """Each observation's stored content, and its importance where the summary's own reply carried one
    (``importance_with_summary``); None: the importance ``choose`` decides."""
    contents = [obs.text for _, obs in jobs]
    levels: list[float | None] = [None] * len(jobs)
    asks: list[_Ask] = []
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
        cfg = memory.config
        if cfg.importance_with_summary and cfg.score_importance:
            n = cfg.importance_levels

            def accept_both(
                text: str, _obs: Observation = obs, _max: int = cfg.sensory_max_chars, _n: int = n
            ) -> tuple[str, float | None] | None:
                return memory_sensory_importance.parse(text, _obs.text, _max, _n)

            asks.append(
                _Ask(
                    memory,
                    memory_sensory_importance.build(obs.text, n),
                    memory_sensory_importance.build(obs.text, n, retry=True),
                    accept_both,
                    cfg.sensory_max_tokens + 8,  # room for " | Importance: N"
                    memory_sensory_importance.STOP,
                )
            )
        else:

            def accept(text: str, _obs: Observation = obs, _max: int = cfg.sensory_max_chars) -> str | None:
                sentence = memory_sensory.parse(text)
                return sentence if memory_sensory.validate(sentence, _obs.text, _max) is None else None

            asks.append(
                _Ask(
                    memory,
                    memory_sensory.build(obs.text),
                    memory_sensory.build(obs.text, retry=True),
                    accept,
                    cfg.sensory_max_tokens,
                    memory_sensory.STOP,
                )
            )
        positions.append(pos)
    for memory, obs in used:
        memory.sensory.compressed.pop(obs, None)
    _ask_all(asks, seed, report, "sensory_fallbacks")
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
        done = list(zip(*_compress([(tally, o) for o in mine], seed, FlushReport()), strict=True))  # type: ignore[misc]
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
            vectors = _embed(owners, contents, report)
        except BaseException:
            # Nothing is stored yet: put the observations back so that a failed call (LLMError, budget) loses none.
            for memory in memories:
                memory.sensory.pending[:0] = [obs for m, obs in jobs if m is memory]
            raise
        promotions = []
        for (memory, obs), content, imp, vec in zip(jobs, contents, importance, vectors, strict=True):
            record = MemoryRecord(content, float(imp), obs.time_h, obs.time_h, kind=obs.kind)
            promotions.extend((memory, p) for p in memory.store(record, vec))
        report.promoted = len(promotions)
    else:
        promotions = []
    # Insights of the promoted records and reflection are independent questions: both are asked at once (the
    # reflection reads its window before this flush's insights are stored), and their answers stored in that order.
    insights = _insight_asks(promotions)
    reflection = _reflection_asks(memories, force=False)
    insight_seed, reflection_seed = lead.next_seed(STAGE_INSIGHT), lead.next_seed(STAGE_REFLECTION)
    reflection_report = FlushReport()
    _both(
        lambda: _ask_all(insights, insight_seed, report, "insight_fallbacks"),
        lambda: _ask_all(reflection[0], reflection_seed, reflection_report, "reflection_fallbacks"),
    )
    _store_insights(insights, promotions, report)
    _store_reflection(*reflection, time_h, reflection_report)
    report += reflection_report
    if rng is not None:
        for memory in memories:
            report.forgotten += len(memory.forget(rng, time_h))
    for memory in memories:
        memory.flushes += 1
    return report


def _both(first: Callable[[], None], second: Callable[[], None]) -> None:
    """Run two independent batches of LLM questions at once (a concurrent backend serves them together; the
    embedded model takes them one after the other behind its lock)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=threading.current_thread().name + "-memory") as pool:
        later = pool.submit(second)
        first()
        later.result()


def _insight_asks(promotions: list[tuple[WritableMemory, Any]]) -> list[_Ask]:
    asks = []
    for memory, promo in promotions:
        sources = [promo.record.content, *promo.related]
        cfg = memory.config

        def accept(
            text: str, _src: list[str] = sources, _max: int = cfg.insight_max_chars, _name: str = memory.agent_name
        ) -> str | None:
            insight = memory_insight.parse(text)
            return insight if memory_insight.validate(insight, _src, _max, _name) is None else None

        asks.append(
            _Ask(
                memory,
                memory_insight.build(memory.agent_name, sources),
                memory_insight.build(memory.agent_name, sources, retry=True),
                accept,
                cfg.insight_max_tokens,
                memory_insight.STOP,
            )
        )
    return asks


def _store_insights(asks: list[_Ask], promotions: list[tuple[WritableMemory, Any]], report: FlushReport) -> None:
    done = [(ask, promo) for ask, (_, promo) in zip(asks, promotions, strict=True) if ask.value is not None]
    if not done:
        return
    vectors = _embed([a.memory for a, _ in done], [a.value for a, _ in done], report)
    for (ask, promo), vec in zip(done, vectors, strict=True):
        rec = promo.record
        insight = MemoryRecord(ask.value, rec.importance, rec.last_access_h, rec.last_access_h, kind="insight")
        assert ask.memory.long_term is not None
        ask.memory.long_term.add([insight], vec.reshape(1, -1))
        ask.memory.stats["insights"] += 1
        report.insights += 1


def reflect_memories(
    memories: Sequence[WritableMemory], time_h: float, *, force: bool = False, seed: int | None = None
) -> FlushReport:
    """Reflection for the memories that want it (all that can, with ``force``): one batched ``generate``, insights
    stored in long-term memory as kind ``insight``, then near-duplicates merged."""
    report = FlushReport()
    asks, windows = _reflection_asks(memories, force=force)
    if seed is None:
        chosen = [a.memory for a in asks]
        seed = chosen[0].next_seed(STAGE_REFLECTION) if chosen else 0
    _ask_all(asks, seed, report, "reflection_fallbacks")
    _store_reflection(asks, windows, time_h, report)
    return report


def _reflection_asks(memories: Sequence[WritableMemory], *, force: bool) -> tuple[list[_Ask], list[list[MemoryRecord]]]:
    """The reflection questions of the memories that want one, with the window of records each one reads."""
    chosen = [
        m for m in memories if m.long_term is not None and m.config.reflection and (force or m.wants_reflection())
    ]
    asks: list[_Ask] = []
    windows: list[list[MemoryRecord]] = []
    for memory in chosen:
        cfg = memory.config
        window = memory.recent_records(cfg.reflection_window)
        if not window:
            continue
        texts = [r.content for r in window]

        def accept(text: str, _src: list[str] = texts, _cfg: Any = cfg, _name: str = memory.agent_name) -> Any:
            found = memory_reflection.valid_insights(
                memory_reflection.parse(text), _src, _cfg.reflection_insights, _cfg.insight_max_chars, _name
            )
            return found or None

        count = cfg.reflection_insights
        asks.append(
            _Ask(
                memory,
                memory_reflection.build(memory.agent_name, texts, count),
                memory_reflection.build(memory.agent_name, texts, count, retry=True),
                accept,
                cfg.reflection_max_tokens,
                memory_reflection.STOP,
            )
        )
        windows.append(window)
    return asks, windows


def _store_reflection(asks: list[_Ask], windows: list[list[MemoryRecord]], time_h: float, report: FlushReport) -> None:
    owners: list[WritableMemory] = []
    texts_out: list[str] = []
    importances: list[float] = []
    for ask, window in zip(asks, windows, strict=True):
        ask.memory.importance_since_reflection = 0.0
        ask.memory.stats["reflections"] += 1
        report.reflections += 1
        mean_importance = float(np.mean([r.importance for r in window]))
        for text in ask.value or memory_reflection.fallback():
            owners.append(ask.memory)
            texts_out.append(text)
            importances.append(mean_importance)
    vectors = _embed(owners, texts_out, report) if texts_out else []
    for memory, text, imp, vec in zip(owners, texts_out, importances, vectors, strict=True):
        assert memory.long_term is not None
        memory.long_term.add([MemoryRecord(text, imp, time_h, time_h, kind="insight")], vec.reshape(1, -1))
        memory.stats["insights"] += 1
        report.insights += 1
    for memory in {id(a.memory): a.memory for a in asks}.values():
        assert memory.long_term is not None
        merged = memory.long_term.merge_near_duplicates()
        memory.stats["merged"] += merged
        report.merged += merged
