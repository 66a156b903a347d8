"""A call and token budget around any :class:`LanguageModel`: once spent, calls raise :class:`BudgetExceeded`."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from recagent_gym.llm.protocol import BudgetExceeded, Choice, Generation, LanguageModel, prefix_hint
from recagent_gym.llm.wrapping import close_model, set_state_of, state_of


class BudgetedLLM:
    """Counts prompts (``calls``) and tokens of the wrapped model.

    A batch that would take the call count past ``max_calls`` is refused whole, before anything is sent. Tokens are
    known only afterwards, so the batch that crosses ``max_total_tokens`` completes and every later call is refused.
    Put it inside the response cache, so that cached answers cost nothing.
    """

    def __init__(self, inner: LanguageModel, *, max_calls: int | None = None, max_total_tokens: int | None = None):
        self.inner = inner
        self.max_calls = max_calls
        self.max_total_tokens = max_total_tokens
        self.calls = 0
        self.tokens = 0
        self._lock = threading.Lock()  # the simulator's social calls run beside the sessions

    @property
    def name(self) -> str:
        return self.inner.name

    def _check(self, n: int) -> None:
        if self.max_calls is not None and self.calls + n > self.max_calls:
            raise BudgetExceeded(
                f"call budget spent: {self.calls} of {self.max_calls} calls used, {n} more asked (llm.max_calls)"
            )
        if self.max_total_tokens is not None and self.tokens >= self.max_total_tokens:
            raise BudgetExceeded(
                f"token budget spent: {self.tokens} of {self.max_total_tokens} tokens used (llm.max_total_tokens)"
            )

    def _charge(self, results: Sequence[Generation | Choice]) -> None:
        with self._lock:
            self.calls += len(results)
            self.tokens += sum(r.usage.total_tokens for r in results)

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_tokens: int = 64,
        temperature: float = 0.0,
        stop: Sequence[str] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        self._check(len(prompts))
        results = self.inner.generate(prompts, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed)
        self._charge(results)
        return results

    def choose(
        self, prompts: Sequence[str], options: Sequence[Sequence[str]], *, seed: int | None = None
    ) -> list[Choice]:
        self._check(len(prompts))
        results = self.inner.choose(prompts, options, seed=seed)
        self._charge(results)
        return results

    def prefix_priority(self, priority: int) -> AbstractContextManager[None]:
        return prefix_hint(self.inner, priority)

    def get_state(self) -> dict[str, Any]:
        return {"calls": self.calls, "tokens": self.tokens, "inner": state_of(self.inner)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.calls, self.tokens = int(state["calls"]), int(state["tokens"])
        set_state_of(self.inner, state.get("inner"))

    def close(self) -> None:
        close_model(self.inner)
