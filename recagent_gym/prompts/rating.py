"""Contract of ``templates/rating.txt``: a 1..5 rating of a watched movie, by ``choose`` over five words
(:data:`OPTIONS`, " terrible" = 1 ... " great" = 5). The template ends without a newline: the options finish its last
sentence.

Words, not digits: a small base model's likelihoods of " 1".." 5" after a feeling say nothing about the feeling
(measured with the embedded Gemma 3 270M: " 1" won for every feeling, loved or hated), while its likelihoods of
"the movie was terrible / ... / great" follow it once calibrated. Calibration (:func:`build_baseline`): the option
scores of the same prompt with content-free fields are subtracted (summed log-likelihoods favour frequent words
whoever rates); the rating is the expected option under the calibrated distribution, rounded to a whole star
(:func:`rating`). Backends without scores (a remote model's pick): the picked option. Fallback (invalid answer after
one re-ask): the rating implied by the decision score, ``clip(round(3 + score / 2), 1, 5)``; counted.
"""

from __future__ import annotations

import numpy as np

from recagent_gym.llm.protocol import Choice
from recagent_gym.prompts.template import load_template

OPTIONS: tuple[str, ...] = (" terrible", " bad", " okay", " good", " great")

CONTENT_FREE = "N/A"


def build(*, profile: str, name: str, item: str, feeling: str) -> str:
    return load_template("rating").render(profile=profile, name=name, item=item, feeling=feeling)


def build_baseline() -> str:
    """The content-free prompt whose option scores calibrate every rating (see the module docstring)."""
    return build(profile=CONTENT_FREE, name=CONTENT_FREE, item=CONTENT_FREE, feeling=CONTENT_FREE)


def _scores(choice: Choice | None) -> np.ndarray | None:
    if choice is None or choice.scores is None or len(choice.scores) != len(OPTIONS):
        return None
    scores = np.asarray(choice.scores, dtype=float)
    return scores if bool(np.all(np.isfinite(scores))) else None


def rating(choice: Choice, baseline: Choice | None) -> float:
    """1..5 stars: the calibrated expected option when both have scores, else the picked option."""
    scores, reference = _scores(choice), _scores(baseline)
    if scores is None or reference is None:
        return float(choice.index + 1)
    logits = scores - reference
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    return float(min(5, max(1, round(1 + float(probs @ np.arange(len(OPTIONS)))))))


def fallback(score: float) -> float:
    return float(min(5, max(1, round(3 + score / 2))))
