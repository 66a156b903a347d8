"""What a round cost, as the simulator records it in ``rounds`` (and ``summary.json``): wall seconds, LLM calls
and tokens, and the longest sequential chain of batched LLM calls (``waves``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from recagent_gym.llm.protocol import Usage
from recagent_gym.runs.simulator.events import Event


def round_waves(before: dict[str, int], after: dict[str, int], *, pipelined: bool, driver: str = "MainThread") -> int:
    """The longest sequential chain of batched LLM calls in a round, from the per-thread wave counts: the busiest
    thread for the staged round (the social thread runs beside the main one); for per-agent pipelines, the main
    thread's calls (``driver``: the thread running the round; take action, before the chains) plus the longest
    chain's."""
    spent = {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}
    if not pipelined:
        return max(spent.values(), default=0)
    main = spent.pop(driver, 0)
    return main + max(spent.values(), default=0)


def _waves(llm: Any) -> dict[str, int]:
    waves = getattr(llm, "waves", None)
    return waves() if callable(waves) else {}


@dataclass
class RoundMeter:
    """The LLM stack's counters when a round started; :meth:`record` turns them into the round's record."""

    llm: Any
    usage: Usage = field(init=False)
    waves: dict[str, int] = field(init=False)
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.usage = self.llm.total
        self.waves = _waves(self.llm)
        self.started = time.perf_counter()

    def record(
        self, r: int, time_h: float, active: Sequence[int], events: Sequence[Event], *, pipelined: bool
    ) -> dict[str, Any]:
        spent = self.llm.total
        calls = spent.calls - self.usage.calls
        tokens = (spent.prompt_tokens - self.usage.prompt_tokens) + (
            spent.completion_tokens - self.usage.completion_tokens
        )
        return {
            "round": r,
            "time_h": time_h,
            "active": len(active),
            "counts": dict(Counter(e.kind for e in events)),
            "seconds": round(time.perf_counter() - self.started, 3),
            "tokens": tokens,
            "calls": calls,
            "waves": round_waves(
                self.waves, _waves(self.llm), pipelined=pipelined, driver=threading.current_thread().name
            ),
        }
