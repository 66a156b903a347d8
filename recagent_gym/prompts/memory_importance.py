"""Contract of the ``memory_importance`` prompt: a constrained choice among ``"1"`` .. ``str(levels)``.

No free text is parsed: ``choose`` always yields a valid option. With option scores from the backend and a
calibration baseline (the same prompt about a content-free memory), the choice is the argmax of
``scores - baseline``; this corrects a small model's preference for one number. The result is normalised to [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recagent_gym.llm.protocol import Choice
from recagent_gym.prompts.template import load_template

NAME = "memory_importance"
CONTENT_FREE = "N/A"


def options(levels: int) -> tuple[str, ...]:
    return tuple(str(i) for i in range(1, levels + 1))


def build(agent_name: str, memory: str, levels: int) -> str:
    # Ends in ": " so that a likelihood-scoring backend reads the options as the natural next token.
    text = load_template(NAME).render(agent_name=agent_name, memory=" ".join(memory.split()), levels=levels)
    return text.rstrip() + " "


def calibration_prompt(agent_name: str, levels: int) -> str:
    return build(agent_name, CONTENT_FREE, levels)


def parse(choice: Choice, levels: int, baseline: Sequence[float] | None = None) -> float:
    """The chosen level, calibrated when both score vectors are there, normalised so 1 -> 0.0 and levels -> 1.0."""
    index = choice.index
    if baseline is not None and choice.scores is not None and len(choice.scores) == len(baseline) == levels:
        adjusted = np.asarray(choice.scores, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
        index = int(np.argmax(adjusted))
    if not 0 <= index < levels:
        raise ValueError(f"importance choice index {index} outside 0..{levels - 1}")
    return index / (levels - 1)


def from_level(level: int, levels: int) -> float | None:
    """A level written in a reply (``1..levels``) as an importance in [0, 1]; None outside that range."""
    return (level - 1) / (levels - 1) if 1 <= level <= levels else None
