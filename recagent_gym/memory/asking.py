"""How the memory writer asks its questions: batched free-text asks with one re-ask, batched embeddings, and what
a flush did and cost (:class:`FlushReport`). Used by :mod:`.writer` and :mod:`.insights`."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from recagent_gym.llm.protocol import Generation, Usage
from recagent_gym.memory.writable import WritableMemory


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
class Ask:
    """One free-text question for one memory, with its re-ask prompt and its parse+validate step."""

    memory: WritableMemory
    prompt: str
    retry_prompt: str
    accept: Callable[[str], Any]
    """Parsed, valid value of an answer, or None when the answer is invalid."""
    max_tokens: int
    stop: tuple[str, ...]
    value: Any = None


def generate_answers(
    asks: Sequence[Ask], prompts: Sequence[str], temperature: float, seed: int, report: FlushReport
) -> None:
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


def ask_all(asks: Sequence[Ask], seed: int, report: FlushReport, fallback_stat: str) -> None:
    """Ask everything once; re-ask the invalid ones once (one batch, reminder, ``reask_temperature``). Values left
    None are fallbacks, counted per memory under ``fallback_stat``."""
    if not asks:
        return
    generate_answers(asks, [a.prompt for a in asks], 0.0, seed, report)
    retry = [a for a in asks if a.value is None]
    if retry:
        report.reasks += len(retry)
        for ask in retry:
            ask.memory.stats["reasks"] += 1
        # Memories may differ in reask_temperature; the first one's applies to the shared batch.
        temperature = retry[0].memory.config.reask_temperature
        generate_answers(retry, [a.retry_prompt for a in retry], temperature, (seed + 1) & 0x7FFFFFFF, report)
        for ask in retry:
            if ask.value is None:
                ask.memory.stats[fallback_stat] += 1
                report.fallbacks += 1


def embed_for(memories: Sequence[WritableMemory], texts: Sequence[str], report: FlushReport) -> list[np.ndarray]:
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


def run_both(first: Callable[[], None], second: Callable[[], None]) -> None:
    """Run two independent batches of LLM questions at once (a concurrent backend serves them together; the
    embedded model takes them one after the other behind its lock)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=threading.current_thread().name + "-memory") as pool:
        later = pool.submit(contextvars.copy_context().run, second)  # its requests keep the caller's priority
        first()
        later.result()
