"""One agent's memory: sensory, short-term and long-term memory composed as in the paper, each switchable."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from recagent_gym.llm.protocol import LanguageModel, Usage
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.record import MemoryKind, MemoryRecord
from recagent_gym.memory.stages import LongTermMemory, Observation, Promotion, SensoryMemory, ShortTermMemory
from recagent_gym.memory.writer import FlushReport, flush_memories, reflect_memories

if TYPE_CHECKING:
    from recagent_gym.llm.embedder import Embedder

STATE_VERSION = 1

FALLBACK_STATS = ("sensory_fallbacks", "insight_fallbacks", "reflection_fallbacks")


class AgentMemory:
    """The memory of one agent.

    ``observe`` queues observations; with ``write_mode='inline'`` they are written at once, else
    :func:`~recagent_gym.memory.writer.flush_memories` writes the queues of many agents with one batched LLM call per
    stage. ``retrieve`` returns the long-term top N (relevance + recency + importance) followed by every short-term
    record, oldest first. Observations still queued are not retrievable (see :attr:`pending`).

    Ablations (``config.implementation``): ``long_term_only`` stores every record in long-term memory;
    ``short_term_only`` keeps only the short-term buffer (overflow discarded); ``none`` stores nothing.

    State (:meth:`get_state`) is plain data; embeddings are float lists or, with ``state_embeddings='recompute'``,
    left out and recomputed by :meth:`set_state` with the embedder.
    """

    def __init__(
        self,
        config: MemoryConfig,
        llm: LanguageModel,
        embedder: Embedder,
        agent_name: str,
        *,
        seed: int = 0,
    ) -> None:
        if not agent_name.strip():
            raise ValueError("AgentMemory needs a non-empty agent_name")
        self.config = config
        self.llm = llm
        self.embedder = embedder
        self.agent_name = agent_name
        self.seed = int(seed)
        impl = config.implementation
        self.sensory = SensoryMemory(config)
        self.lock = threading.RLock()
        """Serialises work done ahead on this memory from several threads (:func:`~.writer.precompress`)."""
        self.short_term: ShortTermMemory | None = (
            ShortTermMemory(config, promote=impl == "recagent") if impl in ("recagent", "short_term_only") else None
        )
        self.long_term: LongTermMemory | None = (
            LongTermMemory(config) if impl in ("recagent", "long_term_only") else None
        )
        self.importance_since_reflection = 0.0
        self.flushes = 0
        self.usage = Usage()
        """LLM usage of this memory's prompts (a batch's calibration prompt is counted only in its FlushReport)."""
        self.stats: Counter[str] = Counter()
        """Counts: observed, stored, compressed, reasks, *_fallbacks, enhanced, promoted, insights, reflections,
        merged, forgotten, discarded."""

    # -- public API -----------------------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self.config.implementation != "none"

    @property
    def fallbacks(self) -> int:
        """Answers replaced by a documented fallback after a failed re-ask (all prompts)."""
        return sum(self.stats[key] for key in FALLBACK_STATS)

    @property
    def pending(self) -> tuple[str, ...]:
        """Texts observed but not yet written (deferred mode)."""
        return tuple(o.text for o in self.sensory.pending)

    def observe(
        self, texts: str | Sequence[str], time_h: float, *, kind: MemoryKind = "observation"
    ) -> FlushReport | None:
        """Queue observations made at ``time_h``; in inline mode write them now and return the flush report."""
        batch = [texts] if isinstance(texts, str) else list(texts)
        if not self.enabled:
            return None
        self.sensory.push(batch, time_h, kind, owner=self.agent_name)
        self.stats["observed"] += len(batch)
        if self.config.write_mode == "inline":
            return self.flush(time_h)
        return None

    def observe_written(
        self, text: str, importance: float, time_h: float, *, kind: MemoryKind = "observation"
    ) -> FlushReport | None:
        """Queue an observation that the agent's own reply already wrote as one sentence and scored (``importance``
        in [0, 1], e.g. a feeling with how memorable the movie was): the flush stores it as written, with no
        compression or importance call of its own."""
        if not 0.0 <= importance <= 1.0:
            raise ValueError(f"memory of {self.agent_name!r}: importance must be in [0, 1], got {importance}")
        if self.enabled:
            flat = " ".join(text.split())
            with self.lock:
                self.sensory.compressed[Observation(flat, float(time_h), kind)] = (flat, float(importance))
        return self.observe([text], time_h, kind=kind)

    def flush(self, time_h: float, rng: np.random.Generator | None = None) -> FlushReport:
        """Write this agent's queue now (a batch of one agent); forget afterwards when ``rng`` is given."""
        return flush_memories([self], time_h, rng=rng)

    def retrieve(
        self, query: str | None, time_h: float, top_n: int | None = None, *, vector: np.ndarray | None = None
    ) -> list[MemoryRecord]:
        """Long-term top N for ``query`` (None: by recency and importance only), then all short-term records.
        ``vector``: the query's unit embedding, when the caller embedded many queries in one call."""
        if not self.enabled:
            return []
        found: list[MemoryRecord] = []
        if self.long_term is not None and len(self.long_term):
            vec = vector
            if vec is None and query is not None and query.strip():
                vec = self.embed([query])[0]
            found = self.long_term.retrieve(vec, time_h, top_n or self.config.retrieve_top_n)
        if self.short_term is not None:
            found.extend(self.short_term.all_records())
        return found

    def reflect(self, time_h: float) -> FlushReport:
        """Reflect now, whatever the accumulated importance (queued observations are not included)."""
        return reflect_memories([self], time_h, force=True)

    def forget(self, rng: np.random.Generator, time_h: float) -> list[MemoryRecord]:
        """Forget long-term records above ``forget_max_records`` (sampled with ``rng``); returns them."""
        if self.long_term is None:
            return []
        gone = self.long_term.forget(rng, time_h)
        self.stats["forgotten"] += len(gone)
        return gone

    def records(self) -> list[MemoryRecord]:
        """Every stored record (long-term, then short-term), without touching access times."""
        out = [] if self.long_term is None else self.long_term.all_records()
        if self.short_term is not None:
            out.extend(self.short_term.all_records())
        return out

    def needs_query_vector(self, query: str | None) -> bool:
        """Whether :meth:`retrieve` would embed ``query`` (so a caller can embed many queries at once)."""
        return bool(self.enabled and self.long_term is not None and len(self.long_term) and query and query.strip())

    # -- used by the writer ---------------------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return normalise_rows(self.embedder(list(texts)), len(texts), self.agent_name)

    def store(self, record: MemoryRecord, embedding: np.ndarray) -> list[Promotion]:
        """Put a scored record where the implementation says; returns short-term promotions awaiting insights."""
        self.stats["stored"] += 1
        self.importance_since_reflection += record.importance
        vec = np.asarray(embedding, dtype=np.float32).reshape(1, -1)
        if self.short_term is None:
            assert self.long_term is not None
            self.long_term.add([record], vec)
            return []
        result = self.short_term.add(record, vec[0])
        self.stats["enhanced"] += result.enhanced
        for promo in result.promoted:
            assert self.long_term is not None and promo.record.embedding is not None
            self.long_term.add([promo.record], promo.record.embedding.reshape(1, -1))
        self.stats["promoted"] += len(result.promoted)
        for old in result.overflow:
            if self.long_term is not None and self.config.short_term_overflow == "to_long_term":
                assert old.embedding is not None
                self.long_term.add([old], old.embedding.reshape(1, -1))
            else:
                self.stats["discarded"] += 1
        return result.promoted

    def wants_reflection(self) -> bool:
        return (
            self.config.reflection
            and self.long_term is not None
            and self.importance_since_reflection >= self.config.reflection_threshold
        )

    def recent_records(self, count: int) -> list[MemoryRecord]:
        """The ``count`` most recently created non-insight records, oldest first."""
        pool = [r for r in self.records() if r.kind != "insight"]
        pool.sort(key=lambda r: r.created_h)
        return pool[-count:]

    def next_seed(self, stage: int) -> int:
        """A per-flush, per-stage seed derived from the agent's seed."""
        return int(np.random.SeedSequence([self.seed, self.flushes, stage]).generate_state(1)[0] & 0x7FFFFFFF)

    # -- state ----------------------------------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        with_emb = self.config.state_embeddings == "store"
        return {
            "version": STATE_VERSION,
            "agent_name": self.agent_name,
            "implementation": self.config.implementation,
            "seed": self.seed,
            "flushes": self.flushes,
            "importance_since_reflection": self.importance_since_reflection,
            "pending": self.sensory.get_state(),
            "short_term": None if self.short_term is None else self.short_term.get_state(with_embeddings=with_emb),
            "long_term": None if self.long_term is None else self.long_term.get_state(with_embeddings=with_emb),
            "usage": asdict(self.usage),
            "stats": dict(self.stats),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"memory state version {state.get('version')!r} is not {STATE_VERSION}")
        if state.get("implementation") != self.config.implementation:
            raise ValueError(
                f"memory state of implementation {state.get('implementation')!r} cannot load into "
                f"{self.config.implementation!r}"
            )
        self.seed = int(state["seed"])
        self.flushes = int(state["flushes"])
        self.importance_since_reflection = float(state["importance_since_reflection"])
        self.sensory.set_state(state["pending"])
        stm_state = state.get("short_term")
        ltm_state = state.get("long_term")
        stm = [MemoryRecord.from_dict(r) for r in stm_state["records"]] if stm_state else []
        ltm = [MemoryRecord.from_dict(r) for r in ltm_state] if ltm_state else []
        self._fill_embeddings(stm + ltm)
        if self.short_term is not None:
            self.short_term.set_state(stm, stm_state["related"] if stm_state else [], _stack(stm))
        if self.long_term is not None:
            self.long_term.set_state(ltm, _stack(ltm))
        self.usage = Usage(**state["usage"])
        self.stats = Counter({str(k): int(v) for k, v in state["stats"].items()})

    def _fill_embeddings(self, records: list[MemoryRecord]) -> None:
        missing = [i for i, r in enumerate(records) if r.embedding is None]
        if missing:
            vectors = self.embed([records[i].content for i in missing])
            for row, i in enumerate(missing):
                records[i].embedding = vectors[row]

    def __repr__(self) -> str:
        ltm = 0 if self.long_term is None else len(self.long_term)
        stm = 0 if self.short_term is None else len(self.short_term)
        return (
            f"AgentMemory({self.agent_name!r}, {self.config.implementation}, long_term={ltm}, short_term={stm}, "
            f"pending={len(self.sensory.pending)})"
        )


def _stack(records: Sequence[MemoryRecord]) -> np.ndarray:
    if not records:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([np.asarray(r.embedding, dtype=np.float32) for r in records])


def normalise_rows(vectors: np.ndarray, n: int, owner: str) -> np.ndarray:
    """The embedder's output as unit float32 rows, or a ValueError saying what came back."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != n:
        raise ValueError(f"memory of {owner!r}: the embedder returned shape {matrix.shape} for {n} texts")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if np.any(norms == 0) or not np.all(np.isfinite(norms)):
        raise ValueError(f"memory of {owner!r}: the embedder returned a zero or non-finite vector")
    return np.ascontiguousarray(matrix / norms)


def format_memories(records: Sequence[MemoryRecord]) -> str:
    """Records as prompt lines, ``- content``; ``(none)`` when empty."""
    return "\n".join(f"- {r.content}" for r in records) if records else "(none)"
