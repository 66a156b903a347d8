"""Plain-data state of each agent (across sessions) and of its open session, with counters of re-asks/fallbacks."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from recagent_gym.llm.protocol import Usage


@dataclass
class PromptCounts:
    """How often one prompt was asked, re-asked after an invalid answer, and replaced by its fallback."""

    asked: int = 0
    reasked: int = 0
    fallback: int = 0


@dataclass
class AgentState:
    """What an agent keeps between sessions (its memory is stored separately)."""

    user_id: int
    watched: list[int] = field(default_factory=list)
    """Items watched inside the simulation, oldest first."""
    ratings: dict[int, float] = field(default_factory=dict)
    feelings: dict[int, str] = field(default_factory=dict)
    heard: list[dict[str, Any]] = field(default_factory=list)
    """Recently heard items, oldest first: ``{"item", "time_h", "source", "kind"}``."""
    counts: dict[str, PromptCounts] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    def count(self, prompt: str, *, reasked: bool = False, fallback: bool = False) -> None:
        c = self.counts.setdefault(prompt, PromptCounts())
        c.asked += 1
        c.reasked += int(reasked)
        c.fallback += int(fallback)

    @property
    def fallbacks(self) -> int:
        return sum(c.fallback for c in self.counts.values())

    @property
    def reasks(self) -> int:
        return sum(c.reasked for c in self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "user_id": self.user_id,
            "watched": list(self.watched),
            "ratings": [[k, v] for k, v in self.ratings.items()],
            "feelings": [[k, v] for k, v in self.feelings.items()],
            "heard": [dict(h) for h in self.heard],
            "counts": {k: asdict(v) for k, v in self.counts.items()},
            "usage": asdict(self.usage),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentState:
        return cls(
            user_id=int(data["user_id"]),
            watched=[int(i) for i in data["watched"]],
            ratings={int(k): float(v) for k, v in data["ratings"]},
            feelings={int(k): str(v) for k, v in data["feelings"]},
            heard=[dict(h) for h in data["heard"]],
            counts={k: PromptCounts(**v) for k, v in data["counts"].items()},
            usage=Usage(**data["usage"]),
        )


@dataclass
class PendingFeeling:
    """A watched item whose feeling (and rating) is still to be written (deferred mode)."""

    item: int
    time_h: float
    score: float


@dataclass
class SessionState:
    """One open session: patience, the fixed few-shot examples, what was watched, deferred work."""

    user_id: int
    rng: np.random.Generator
    """Derived from the ``start_session`` rng; seeds the session's deferred LLM calls."""
    patience: int
    """Unrewarding pages the user still tolerates (drawn at the start, mean ``user.patience``)."""
    positives: list[int]
    negatives: list[int]
    shots: str
    """The few-shot example block, fixed for the session so the prompt prefix stays identical."""
    watched: list[int] = field(default_factory=list)
    pending: list[PendingFeeling] = field(default_factory=list)
    pages: int = 0
    last_time_h: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = {
            k: list(v) if isinstance(v, list) else v for k, v in self.__dict__.items() if k not in ("rng", "pending")
        }
        data["rng"] = copy.deepcopy(self.rng.bit_generator.state)
        data["pending"] = [asdict(p) for p in self.pending]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionState:
        rng = np.random.default_rng()
        rng.bit_generator.state = copy.deepcopy(data["rng"])
        fields = {k: list(v) if isinstance(v, list) else v for k, v in data.items() if k not in ("rng", "pending")}
        return cls(rng=rng, pending=[PendingFeeling(**p) for p in data["pending"]], **fields)
