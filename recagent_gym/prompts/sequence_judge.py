"""Contract of ``templates/sequence_judge.txt``: the paper's 5-point pairwise judgement of two generated sequences.

Build: the user's recent history (titles, oldest first), then sequences A and B as numbered titles. Which
generated sequence plays "A" is drawn by the caller with its seeded generator and recorded (position bias).
Options: :data:`OPTIONS`, in the order of :data:`recagent_gym.runs.metrics.JUDGE_LABELS` (A>>B .. B>>A),
chosen by ``choose`` (a constrained choice, so the answer is always on the scale).
Parse: the option's index. Validate: the index lies on the scale. Fallback (invalid after one re-ask): ``A≈B``
(index 2), i.e. no preference; counted by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence

from recagent_gym.llm.protocol import Choice
from recagent_gym.prompts.template import load_template

OPTIONS: tuple[str, ...] = (" A>>B", " A>B", " A=B", " B>A", " B>>A")
FALLBACK_INDEX = 2


def numbered(titles: Sequence[str]) -> str:
    return "\n".join(f"{i}. {title}" for i, title in enumerate(titles, start=1)) or "(none)"


def build(*, history: Sequence[str], sequence_a: Sequence[str], sequence_b: Sequence[str]) -> str:
    return load_template("sequence_judge").render(
        history=numbered(history),
        n=max(len(sequence_a), len(sequence_b)),
        sequence_a=numbered(sequence_a),
        sequence_b=numbered(sequence_b),
    )


def parse(choice: Choice) -> int | None:
    return choice.index if 0 <= choice.index < len(OPTIONS) else None
