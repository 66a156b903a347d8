"""The agent's 1..5 rating by ``choose``: calibrated by a content-free prompt, read as the expected option.

A small base model favours frequent words whoever rates; only the difference to the content-free prompt follows the
feeling (``prompts/rating.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from recagent_gym.llm.protocol import Choice
from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.prompts import rating as rating_prompt
from recagent_gym.users.agent.feelings import FeelingJob, write_feelings

BIAS = (0.0, -3.0, -3.5, -3.5, -4.0)
"""Log-likelihoods of " terrible" .. " great" that any prompt gets: " terrible" always wins uncalibrated."""


def biased_chooser(prompt: str, options: Sequence[str]) -> list[float]:
    """A model with the bias above plus a small pull towards the feeling's sentiment."""
    pull = {"loved": [0, 0, 0, 1.5, 3.0], "hated": [1.5, 1.0, 0, 0, 0]}
    feeling = prompt.split("feeling:")[-1]
    extra = next((v for k, v in pull.items() if k in feeling), [0.0] * 5)
    return [b + e for b, e in zip(BIAS, extra, strict=True)]


def _job(name: str) -> FeelingJob:
    return FeelingJob(profile=f"{name}, 30", name=name, item_text="Heat (1995)", title="Heat", score=0.0)


def test_ratings_follow_the_feeling_once_calibrated() -> None:
    feelings = {"Ann": "I loved it.", "Bob": "I hated it.", "Cy": "It was a film."}
    llm = ScriptedLLM(
        default=lambda prompt: next(f for n, f in feelings.items() if f"{n}, 30" in prompt), chooser=biased_chooser
    )
    results = write_feelings(llm, [_job(n) for n in feelings], rate=True, max_tokens=16, seed=0)
    ratings = [r.rating for r in results]
    assert ratings[0] >= 4 and ratings[1] <= 2 and ratings[0] > ratings[2] > ratings[1], ratings
    assert not any(r.rating_fallback for r in results)
    raw = [
        max(range(5), key=lambda i: biased_chooser(f"feeling: {f}", rating_prompt.OPTIONS)[i])
        for f in feelings.values()
    ]
    assert raw == [0, 0, 0]  # uncalibrated, every feeling would be rated " terrible"


def test_a_pick_without_scores_is_the_picked_option() -> None:
    pick = Choice(index=3, option=" good", scores=None)
    assert rating_prompt.rating(pick, None) == 4.0
    assert rating_prompt.rating(pick, Choice(index=0, option=" terrible", scores=(0.0,) * 5)) == 4.0


def test_the_baseline_is_the_template_with_content_free_fields() -> None:
    prompt = rating_prompt.build_baseline()
    assert prompt.count(rating_prompt.CONTENT_FREE) >= 4 and prompt.endswith("found the movie")
