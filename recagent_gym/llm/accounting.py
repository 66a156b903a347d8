"""The run-level usage meter: the sum of every call's :class:`Usage`, with a cost estimate from config prices.

It also counts *waves*: batched ``generate``/``choose`` calls, per calling thread. Requests of one call are sent
together, so the longest sequential chain of a stretch of work is the largest wave count of one thread in it
(:meth:`UsageMeter.waves`). The meter is thread-safe: the simulator runs social agents beside the sessions.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, replace
from typing import Any

from recagent_gym.llm.protocol import Choice, Generation, LanguageModel, Usage, prefix_hint
from recagent_gym.llm.wrapping import close_model, set_state_of, state_of


def estimate_cost(usage: Usage, per_1k_prompt: float, per_1k_completion: float) -> float:
    """USD for the tokens of ``usage``; answers served from the cache cost nothing."""
    if usage.cached_calls:
        return 0.0
    return usage.prompt_tokens / 1000.0 * per_1k_prompt + usage.completion_tokens / 1000.0 * per_1k_completion


class UsageMeter:
    """The outermost wrapper: fills ``cost_usd`` in each result's usage and keeps the run's total in :attr:`total`."""

    def __init__(self, inner: LanguageModel, *, per_1k_prompt: float = 0.0, per_1k_completion: float = 0.0) -> None:
        self.inner = inner
        self.per_1k_prompt = per_1k_prompt
        self.per_1k_completion = per_1k_completion
        self.total = Usage()
        self.wave_counts: Counter[str] = Counter()
        """Batched calls per thread name (not state: a measure of the run in progress)."""
        self._lock = threading.Lock()

    def waves(self) -> dict[str, int]:
        """A copy of :attr:`wave_counts`: subtract two copies to get the waves of a stretch of work per thread."""
        with self._lock:
            return dict(self.wave_counts)

    def _wave(self) -> None:
        with self._lock:
            self.wave_counts[threading.current_thread().name] += 1

    @property
    def name(self) -> str:
        return self.inner.name

    def _priced(self, usage: Usage) -> Usage:
        cost = usage.cost_usd or estimate_cost(usage, self.per_1k_prompt, self.per_1k_completion)
        priced = replace(usage, cost_usd=cost)
        with self._lock:
            self.total = self.total + priced
        return priced

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_tokens: int = 64,
        temperature: float = 0.0,
        stop: Sequence[str] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        results = self.inner.generate(prompts, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed)
        self._wave()
        return [replace(r, usage=self._priced(r.usage)) for r in results]

    def choose(
        self, prompts: Sequence[str], options: Sequence[Sequence[str]], *, seed: int | None = None
    ) -> list[Choice]:
        results = self.inner.choose(prompts, options, seed=seed)
        self._wave()
        return [replace(r, usage=self._priced(r.usage)) for r in results]

    def prefix_priority(self, priority: int) -> AbstractContextManager[None]:
        return prefix_hint(self.inner, priority)

    def get_state(self) -> dict[str, Any]:
        return {"total": asdict(self.total), "inner": state_of(self.inner)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.total = Usage(**state["total"])
        set_state_of(self.inner, state.get("inner"))

    def close(self) -> None:
        close_model(self.inner)
