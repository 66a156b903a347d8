"""Feelings (and ratings) after watching, for many watched items at once.

``combined`` (remote models): ONE ``generate`` whose reply carries both (``prompts/feeling_rating.py``), and with
``importance_levels`` also how memorable the movie was, so that the feeling's memory note needs no compression call
(:attr:`FeelingResult.importance`); otherwise one ``generate`` for the feeling and one ``choose`` for the rating
(``prompts/feeling.py``, ``prompts/rating.py``). Each contract: validate, one re-ask, documented fallback (counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from recagent_gym.llm.protocol import LanguageModel, Usage
from recagent_gym.prompts import feeling as feeling_prompt
from recagent_gym.prompts import feeling_rating as combined_prompt
from recagent_gym.prompts import rating as rating_prompt
from recagent_gym.prompts.checked import choose_checked, generate_checked


@dataclass(frozen=True)
class FeelingJob:
    profile: str
    name: str
    item_text: str
    title: str
    score: float
    """The decision score of the item (drives the fallbacks' tone)."""


@dataclass
class FeelingResult:
    feeling: str
    rating: float | None
    usage: Usage = field(default_factory=Usage)
    feeling_reasked: bool = False
    feeling_fallback: bool = False
    rating_reasked: bool = False
    rating_fallback: bool = False
    importance: float | None = None
    """How memorable, in [0, 1], when the combined reply was asked for it and carried it (else None: the memory
    compresses and scores the feeling's note itself)."""
    importance_fallback: bool = False
    """Asked for the importance, but the reply carried no usable level (counted)."""


def write_feelings(
    llm: LanguageModel,
    jobs: Sequence[FeelingJob],
    *,
    rate: bool,
    max_tokens: int,
    seed: int,
    combined: bool = False,
    importance_levels: int | None = None,
) -> list[FeelingResult]:
    """``importance_levels``: with ``combined``, ask the same reply how memorable it was on ``1..levels``."""
    if not jobs:
        return []
    if rate and combined:
        return _write_combined(llm, jobs, max_tokens=max_tokens, seed=seed, levels=importance_levels)
    prompts = [feeling_prompt.build(profile=j.profile, name=j.name, item=j.item_text) for j in jobs]
    lines = generate_checked(
        llm, prompts, feeling_prompt.validate, seed=seed, max_tokens=max_tokens, stop=feeling_prompt.STOP
    )
    results = []
    for job, line in zip(jobs, lines, strict=True):
        text = line.value if line.value is not None else feeling_prompt.fallback(title=job.title, score=job.score)
        results.append(
            FeelingResult(
                feeling=text,
                rating=None,
                usage=line.usage,
                feeling_reasked=line.reasked,
                feeling_fallback=line.value is None,
            )
        )
    if rate:
        rate_prompts = [
            rating_prompt.build(profile=j.profile, name=j.name, item=j.item_text, feeling=r.feeling)
            for j, r in zip(jobs, results, strict=True)
        ]
        rate_prompts.append(rating_prompt.build_baseline())  # calibrates every rating of the batch
        ratings = choose_checked(
            llm, rate_prompts, [rating_prompt.OPTIONS] * len(rate_prompts), lambda c: c, seed=seed + 2
        )
        baseline = ratings.pop().value
        for job, result, checked in zip(jobs, results, ratings, strict=True):
            result.rating = (
                rating_prompt.rating(checked.value, baseline)
                if checked.value is not None
                else rating_prompt.fallback(job.score)
            )
            result.usage = result.usage + checked.usage
            result.rating_reasked = checked.reasked
            result.rating_fallback = checked.value is None
    return results


def _write_combined(
    llm: LanguageModel, jobs: Sequence[FeelingJob], *, max_tokens: int, seed: int, levels: int | None = None
) -> list[FeelingResult]:
    """Feeling and rating (and the level) from one reply each; an unusable reply (after its re-ask) falls back on
    both, counted; a usable one without a level leaves the importance to the memory, counted."""
    prompts = [combined_prompt.build(profile=j.profile, name=j.name, item=j.item_text, levels=levels) for j in jobs]
    # the rating prefix ("4 | ") and the level (" | 3") cost a few tokens beyond the feeling's own cap
    replies = generate_checked(
        llm,
        prompts,
        lambda text, prompt: combined_prompt.validate(text, prompt, levels),
        seed=seed,
        max_tokens=max_tokens + (8 if levels is None else 14),
        stop=combined_prompt.STOP,
    )
    results = []
    for job, prompt, reply in zip(jobs, prompts, replies, strict=True):
        parsed = None if reply.value is None else combined_prompt.parse(reply.value, prompt, levels)
        failed = parsed is None
        if parsed is None:
            feeling = feeling_prompt.fallback(title=job.title, score=job.score)
            rating = rating_prompt.fallback(job.score)
        else:
            feeling, rating = parsed.feeling, parsed.rating
        importance = None if parsed is None or levels is None else parsed.importance(levels)
        results.append(
            FeelingResult(
                feeling=feeling,
                rating=rating,
                usage=reply.usage,
                feeling_reasked=reply.reasked,
                feeling_fallback=failed,
                rating_reasked=reply.reasked,
                rating_fallback=failed,
                importance=importance,
                importance_fallback=levels is not None and importance is None,
            )
        )
    return results
