"""Contract of ``templates/item_scoring.txt``: few-shot Yes/No scoring of one candidate item for one user.

Build: the user's relevant profile, then ``history_shots`` titles the user watched marked "Yes" and
``negative_shots`` unseen titles marked "No" (interleaved in a seeded order, fixed for a session), then the memory
retrieved for the page, then the candidate last. Every candidate of a page shares one long prefix (the embedded
backend evaluates it once), and the profile + examples part stays the same across a session's pages (the backend
keeps it in its prefix cache), which is why the page-dependent memory comes after the examples.
Options: ``" Yes"``/``" No"``.
Parse: ``score = logp(Yes) - logp(No)``; a backend without scores gives ``+1``/``-1`` for its pick.
Validate: the score must be finite. Fallback (after one re-ask): score ``0.0``, i.e. no opinion; counted.
Calibration: :data:`CONTENT_FREE` is scored with the same prefix; its score is subtracted from the candidates'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from recagent_gym.llm.protocol import Choice
from recagent_gym.prompts.template import load_template

OPTIONS: tuple[str, str] = (" Yes", " No")
CONTENT_FREE = "N/A"
"""The content-free candidate whose score calibrates the Yes/No bias of a prefix."""
FALLBACK_SCORE = 0.0


def build_shots(positives: Sequence[str], negatives: Sequence[str], rng: np.random.Generator) -> str:
    """Example lines: each title with ``Watched: Yes`` (positives) or ``No`` (negatives), in a seeded order."""
    shots = [(title, "Yes") for title in positives] + [(title, "No") for title in negatives]
    order = rng.permutation(len(shots)) if shots else np.zeros(0, dtype=int)
    return "\n".join(f"Movie: {shots[i][0]}\nWatched: {shots[i][1]}" for i in order)


def build(*, profile: str, memory: str, name: str, shots: str, candidate: str) -> str:
    memory_block = f"{memory}\n" if memory else ""
    return load_template("item_scoring").render(
        profile=profile, memory=memory_block, name=name, shots=shots, candidate=candidate
    )


def parse(choice: Choice) -> float | None:
    """``logp(Yes) - logp(No)``, or ``+1``/``-1`` without scores; ``None`` when the scores are not usable."""
    if choice.scores is None:
        return 1.0 if choice.index == 0 else -1.0
    if len(choice.scores) != len(OPTIONS):
        return None
    score = float(choice.scores[0]) - float(choice.scores[1])
    return score if math.isfinite(score) else None
