"""Sensory memory: the queue of raw observations waiting to be compressed and scored (see ``writer``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.record import MEMORY_KINDS, MemoryKind


@dataclass(frozen=True)
class Observation:
    """A raw observation as the agent perceived it."""

    text: str
    time_h: float
    kind: MemoryKind = "observation"


class SensoryMemory:
    """Holds observations until a flush turns them into (content, importance, time) records.

    Compression is skipped (raw text kept) when ``config.sensory`` is off or the text is at most
    ``sensory_min_chars`` long; importance scoring is skipped when ``config.score_importance`` is off.
    """

    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        self.pending: list[Observation] = []
        self.compressed: dict[Observation, tuple[str, float | None]] = {}
        """Observations whose stored content is known before their flush: compressed ahead
        (:func:`~recagent_gym.memory.writer.precompress`; transient: a flush without it asks the same prompts
        again), or written by the agent's own reply (``AgentMemory.observe_written``). Content and importance (None:
        still to score)."""
        self.claimed: set[Observation] = set()
        """Observations a :func:`~recagent_gym.memory.writer.precompress` is compressing now (the others skip them)."""

    def push(self, texts: Sequence[str], time_h: float, kind: MemoryKind, *, owner: str) -> None:
        if kind not in MEMORY_KINDS:
            raise ValueError(f"memory of {owner!r}: kind must be one of {MEMORY_KINDS}, got {kind!r}")
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"memory of {owner!r}: observation {i} is empty or not a string: {text!r}")
        self.pending.extend(Observation(" ".join(t.split()), float(time_h), kind) for t in texts)

    def take(self) -> list[Observation]:
        taken, self.pending = self.pending, []
        return taken

    def needs_compression(self, obs: Observation) -> bool:
        return self.config.sensory and len(obs.text) > self.config.sensory_min_chars

    def get_state(self) -> list[dict[str, Any]]:
        return [asdict(o) for o in self.pending]

    def set_state(self, state: Sequence[Mapping[str, Any]]) -> None:
        try:
            self.pending = [
                Observation(str(o["text"]), float(o["time_h"]), o.get("kind", "observation")) for o in state
            ]
        except KeyError as exc:
            raise ValueError(f"sensory state: a pending observation lacks {exc.args[0]!r}") from None
