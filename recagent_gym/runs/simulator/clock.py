"""Simulated time: round ``r`` starts at ``r * interval_hours`` hours after the start of the simulation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recagent_gym.users.agent.clock import clock_text


@dataclass
class SimClock:
    interval_hours: float
    round: int = 0
    """Rounds completed so far (the next round to run has this index)."""

    def __post_init__(self) -> None:
        if self.interval_hours <= 0:
            raise ValueError(f"interval_hours must be > 0, got {self.interval_hours}")

    @property
    def time_h(self) -> float:
        """Hours since the start at the beginning of the next round."""
        return self.round * self.interval_hours

    def text(self) -> str:
        """As the prompts show it: ``day 2, 07:00``."""
        return clock_text(self.time_h)

    def advance(self) -> None:
        self.round += 1

    def get_state(self) -> dict[str, Any]:
        return {"interval_hours": self.interval_hours, "round": self.round}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SimClock:
        return cls(interval_hours=float(state["interval_hours"]), round=int(state["round"]))
