"""Checked LLM calls: validate every answer, re-ask the invalid ones once (one batch), report what still failed.

The caller applies its prompt's documented fallback to answers that come back ``None`` and counts it. Backend
failures (``LLMError``) are not answers: they propagate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from recagent_gym.llm.protocol import Choice, LanguageModel, Usage

REASK_TEMPERATURE = 0.7
"""A re-ask of free text samples (a greedy re-ask would repeat the same invalid answer)."""


@dataclass
class Checked:
    """One prompt's outcome: the parsed value (``None`` = invalid twice), whether it was re-asked, its usage."""

    value: Any
    reasked: bool = False
    usage: Usage = field(default_factory=Usage)
    raw: str = ""


def _valid_choice(choice: Choice, options: Sequence[str]) -> bool:
    return 0 <= choice.index < len(options) and choice.option == options[choice.index]


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
            result.reasked = reasked
            value = parse(choice) if _valid_choice(choice, options[i]) else None
            result.value, result.raw = value, choice.option
            if value is None:
                failed.append(i)
        return failed

    failed = run(list(range(len(prompts))), seed, False)
    if failed:
        run(failed, seed + 1, True)
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
            result.raw = generation.text
            result.value = validate(generation.text, prompts[i])
            if result.value is None:
                failed.append(i)
        return failed

    failed = run(list(range(len(prompts))), seed, temperature, False)
    if failed:
        run(failed, seed + 1, max(temperature, REASK_TEMPERATURE), True)
    return results
