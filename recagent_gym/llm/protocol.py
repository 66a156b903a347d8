"""The language-model protocol every backend and wrapper implements.

Two batch-first methods, after Concordia: free generation for many prompts, and a constrained choice among given
options for many prompts. Wrappers (cache, recorder, budget, retries) implement the same protocol, so they stack.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from recagent_gym.errors import RecAgentError


@dataclass(frozen=True)
class Usage:
    """Resources of one or more calls. Adds up with ``+``."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    cached_calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            latency_s=self.latency_s + other.latency_s,
            cost_usd=self.cost_usd + other.cost_usd,
            cached_calls=self.cached_calls + other.cached_calls,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Generation:
    """Free text produced for one prompt."""

    text: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None


NO_CHOICE = -1
"""``Choice.index`` of an unanswered choice (see :meth:`Choice.unanswered`)."""


@dataclass(frozen=True)
class Choice:
    """The option chosen for one prompt.

    ``scores`` holds one number per option where the backend provides it (log-likelihood of the option's text after
    the prompt, higher is better), else None. ``index`` points into the options given, except for an *unanswered*
    choice: a remote model that named no option even after its one re-ask, or refused, gives ``index == NO_CHOICE``,
    ``option == ""`` and the reason in ``extra["unanswered"]``. That is an unusable answer, not a failure: callers
    apply their prompt's documented fallback and count it (:func:`~recagent_gym.prompts.checked.choose_checked`
    does). Backends that score options (the embedded model) always answer.
    """

    index: int
    option: str
    scores: tuple[float, ...] | None = None
    usage: Usage = field(default_factory=Usage)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def answered(self) -> bool:
        return self.index != NO_CHOICE

    @classmethod
    def unanswered(cls, reason: str, *, usage: Usage | None = None, extra: dict[str, Any] | None = None) -> Choice:
        """A choice the model did not make; ``reason`` says why (no secrets: it is logged and kept in ``info``)."""
        return cls(NO_CHOICE, "", usage=usage or Usage(), extra={**(extra or {}), "unanswered": reason})


@runtime_checkable
class LanguageModel(Protocol):
    """What every backend and wrapper offers. ``seed`` makes sampling reproducible where the backend allows it."""

    @property
    def name(self) -> str:
        """``backend:model``, used in cache keys and reports."""
        ...

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_tokens: int = 64,
        temperature: float = 0.0,
        stop: Sequence[str] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        """One :class:`Generation` per prompt, in order."""
        ...

    def choose(
        self,
        prompts: Sequence[str],
        options: Sequence[Sequence[str]],
        *,
        seed: int | None = None,
    ) -> list[Choice]:
        """For each prompt, choose one of its options (``options[i]`` belongs to ``prompts[i]``)."""
        ...


@runtime_checkable
class PrefixCaching(Protocol):
    """A model that keeps prompt prefixes in a cache it can prioritise (the embedded backend). Each wrapper offers
    it explicitly by forwarding to the model it wraps (:func:`prefix_hint`), so a caller states the hint to the
    model it holds, never by reaching through wrappers."""

    def prefix_priority(self, priority: int) -> AbstractContextManager[None]:
        """Calls made inside (on this thread) keep their prompt prefixes at ``priority``."""
        ...


def prefix_hint(model: object, priority: int) -> AbstractContextManager[None]:
    """``model.prefix_priority(priority)`` where ``model`` offers it (:class:`PrefixCaching`: the embedded backend
    and every wrapper), else a no-op. One level only: wrappers forward it themselves."""
    if isinstance(model, PrefixCaching):
        return model.prefix_priority(priority)
    return contextlib.nullcontext()


class LLMError(RecAgentError, RuntimeError):
    """A language-model call failed for good (after retries); never returned as if it were model output."""

    label = "language model error"


class BudgetExceeded(LLMError):
    """The configured call or token budget is spent."""


class CacheMiss(LLMError):
    """The response cache is in replay mode and holds no answer for this request."""
