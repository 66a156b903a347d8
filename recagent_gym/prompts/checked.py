"""Checked LLM calls: validate every answer, re-ask the invalid ones once (one batch), report what still failed.

The caller applies its prompt's documented fallback to answers that come back ``None`` and counts it; each such
batch is also logged. An unanswered :class:`~recagent_gym.llm.protocol.Choice` (a remote model that named no option,
or refused) is an invalid answer like any other; one the backend already re-asked is not asked a third time.
Backend failures (``LLMError``) are not answers: they propagate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from recagent_gym.llm.protocol import Choice, LanguageModel, Usage

log = logging.getLogger(__name__)

REASK_TEMPERATURE = 0.7
"""A re-ask of free text samples (a greedy re-ask would repeat the same invalid answer)."""

MAX_REPLY_CHARS = 8192
"""Longest part of a model reply that parsing and validation read. No valid answer is longer (token caps are at
most 1,024 tokens), and fuzzy matching costs the product of the lengths, so a reply from a server that ignores
``max_tokens`` (3.7 MB took 21 s to validate) is cut here first."""


def cap_reply(text: str) -> str:
    """The first :data:`MAX_REPLY_CHARS` characters of a model reply."""
    return text[:MAX_REPLY_CHARS]


@dataclass
class Checked:
    """One prompt's outcome: the parsed value (``None`` = invalid twice), whether it was re-asked, its usage."""

    value: Any
    reasked: bool = False
    usage: Usage = field(default_factory=Usage)
    raw: str = ""


def _valid_choice(choice: Choice, options: Sequence[str]) -> bool:
    return 0 <= choice.index < len(options) and choice.option == options[choice.index]


def _log_fallbacks(llm: LanguageModel, results: Sequence[Checked], kind: str) -> None:
    failed = [r for r in results if r.value is None]
    if failed:
        log.info(
            "%s: %d of %d %s answers unusable after one re-ask (first: %r); the prompt's fallback applies",
            llm.name,
            len(failed),
            len(results),
            kind,
            failed[0].raw[:80],
        )


def choose_checked(
    llm: LanguageModel,
    prompts: Sequence[str],
    options: Sequence[Sequence[str]],
    parse: Callable[[Choice], Any],
    *,
    seed: int,
) -> list[Checked]:
    """``llm.choose`` with validation: an index outside the options or a ``parse`` returning ``None`` is invalid."""
    if not prompts:
        return []
    results = [Checked(value=None) for _ in prompts]

    def run(indices: list[int], call_seed: int, reasked: bool) -> list[int]:
        answers = llm.choose([prompts[i] for i in indices], [options[i] for i in indices], seed=call_seed)
        failed = []
        for i, choice in zip(indices, answers, strict=True):
            result = results[i]
            result.usage = result.usage + choice.usage
            result.reasked = reasked or bool(choice.extra.get("reasked"))
            value = parse(choice) if _valid_choice(choice, options[i]) else None
            result.value = value
            result.raw = choice.option if choice.answered else str(choice.extra.get("answer", ""))
            if value is None and not (choice.extra.get("reasked") and not choice.answered):
                failed.append(i)
        return failed

    failed = run(list(range(len(prompts))), seed, False)
    if failed:
        run(failed, seed + 1, True)
    _log_fallbacks(llm, results, "choice")
    return results


def generate_checked(
    llm: LanguageModel,
    prompts: Sequence[str],
    validate: Callable[[str, str], str | None],
    *,
    seed: int,
    max_tokens: int,
    stop: Sequence[str] = (),
    temperature: float = 0.0,
) -> list[Checked]:
    """``llm.generate`` with ``validate(text, prompt) -> clean text | None``; invalid answers re-asked once, sampled."""
    if not prompts:
        return []
    results = [Checked(value=None) for _ in prompts]

    def run(indices: list[int], call_seed: int, temp: float, reasked: bool) -> list[int]:
        answers = llm.generate(
            [prompts[i] for i in indices], max_tokens=max_tokens, temperature=temp, stop=stop, seed=call_seed
        )
        failed = []
        for i, generation in zip(indices, answers, strict=True):
            result = results[i]
            result.usage = result.usage + generation.usage
            result.reasked = reasked
            result.raw = cap_reply(generation.text)
            result.value = validate(result.raw, prompts[i])
            if result.value is None:
                failed.append(i)
        return failed

    failed = run(list(range(len(prompts))), seed, temperature, False)
    if failed:
        run(failed, seed + 1, max(temperature, REASK_TEMPERATURE), True)
    _log_fallbacks(llm, results, "free-text")
    return results
