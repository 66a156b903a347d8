"""Contract of ``templates/rating.txt``: a 1..5 rating of a watched movie, by ``choose`` over ``" 1"``..``" 5"``.

Parse: the chosen option's digit. Fallback (invalid answer after one re-ask): the rating implied by the decision
score, ``clip(round(3 + score / 2), 1, 5)``; counted.
"""

from __future__ import annotations

from recagent_gym.llm.protocol import Choice
from recagent_gym.prompts.template import load_template

OPTIONS: tuple[str, ...] = (" 1", " 2", " 3", " 4", " 5")


def build(*, profile: str, name: str, item: str, feeling: str) -> str:
    return load_template("rating").render(profile=profile, name=name, item=item, feeling=feeling)


def parse(choice: Choice) -> float:
    return float(choice.index + 1)


def fallback(score: float) -> float:
    return float(min(5, max(1, round(3 + score / 2))))
