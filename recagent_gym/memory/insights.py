"""Insights and reflection: the questions a flush asks about promoted short-term records and about a memory's
recent records once their importance passed the threshold, and how the answers are stored (kind ``insight``,
then near-duplicates merged)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from recagent_gym.memory.asking import Ask, FlushReport, ask_all, embed_for
from recagent_gym.memory.record import MemoryRecord
from recagent_gym.memory.writable import WritableMemory
from recagent_gym.prompts import memory_insight, memory_reflection

STAGE_REFLECTION = 4


def insight_asks(promotions: list[tuple[WritableMemory, Any]]) -> list[Ask]:
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
            Ask(
                memory,
                memory_insight.build(memory.agent_name, sources),
                memory_insight.build(memory.agent_name, sources, retry=True),
                accept,
                cfg.insight_max_tokens,
                memory_insight.STOP,
            )
        )
    return asks


def insight_texts(asks: list[Ask]) -> tuple[list[WritableMemory], list[str]]:
    """The owners and texts of the insights :func:`store_insights` stores (the answered asks), in its order."""
    done = [a for a in asks if a.value is not None]
    return [a.memory for a in done], [a.value for a in done]


def store_insights(
    asks: list[Ask],
    promotions: list[tuple[WritableMemory, Any]],
    report: FlushReport,
    vectors: Sequence[np.ndarray] | None = None,
) -> None:
    """Store the answered insights in long-term memory; ``vectors``: their embeddings when the caller embedded them
    with other texts (:func:`insight_texts`' order), else one embedder call here."""
    done = [(ask, promo) for ask, (_, promo) in zip(asks, promotions, strict=True) if ask.value is not None]
    if not done:
        return
    if vectors is None:
        vectors = embed_for(*insight_texts(asks), report)
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
    asks, windows = reflection_asks(memories, force=force)
    if seed is None:
        chosen = [a.memory for a in asks]
        seed = chosen[0].next_seed(STAGE_REFLECTION) if chosen else 0
    ask_all(asks, seed, report, "reflection_fallbacks")
    store_reflection(asks, windows, time_h, report)
    return report


def reflection_asks(memories: Sequence[WritableMemory], *, force: bool) -> tuple[list[Ask], list[list[MemoryRecord]]]:
    """The reflection questions of the memories that want one, with the window of records each one reads."""
    chosen = [
        m for m in memories if m.long_term is not None and m.config.reflection and (force or m.wants_reflection())
    ]
    asks: list[Ask] = []
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
            Ask(
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


def reflection_texts(asks: list[Ask]) -> tuple[list[WritableMemory], list[str]]:
    """The owners and texts of the insights :func:`store_reflection` stores (answers or the fallback), in its order."""
    owners: list[WritableMemory] = []
    texts: list[str] = []
    for ask in asks:
        for text in ask.value or memory_reflection.fallback():
            owners.append(ask.memory)
            texts.append(text)
    return owners, texts


def store_reflection(
    asks: list[Ask],
    windows: list[list[MemoryRecord]],
    time_h: float,
    report: FlushReport,
    vectors: Sequence[np.ndarray] | None = None,
) -> None:
    """Store the reflections' insights (kind ``insight``), then merge near-duplicates; ``vectors``: the insights'
    embeddings when the caller embedded them with other texts (:func:`reflection_texts`' order)."""
    owners, texts_out = reflection_texts(asks)
    importances: list[float] = []
    for ask, window in zip(asks, windows, strict=True):
        ask.memory.importance_since_reflection = 0.0
        ask.memory.stats["reflections"] += 1
        report.reflections += 1
        mean_importance = float(np.mean([r.importance for r in window]))
        importances += [mean_importance] * len(ask.value or memory_reflection.fallback())
    if vectors is None:
        vectors = embed_for(owners, texts_out, report) if texts_out else []
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
