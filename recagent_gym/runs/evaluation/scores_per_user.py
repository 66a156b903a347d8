"""One ``score_items`` call per user for all of that user's trials (every sampler and ``b`` holding out ``a``).

Every user model here scores items one by one given the user and the generator (the LLM agent's few-shot prefix
and content-free baseline depend on the user and the generator only; the classical models are item-wise), so the
union of a user's candidates scored once gives each trial the scores it would get alone. For the embedded model
that is the whole saving: one prefix, the shared held-out items and one calibration baseline per user instead of
one per trial (measured with ``benchmarks/bench_discrimination.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def score_union(
    model: Any, user: int, candidate_lists: Sequence[Sequence[int]], rng: np.random.Generator, *, label: str
) -> list[np.ndarray]:
    """The scores of each list of ``candidate_lists`` from ONE ``model.score_items(user, union, rng)`` call.

    Raises ``ValueError`` naming ``label`` and the user when the model returns the wrong shape or a non-finite score.
    """
    union = list(dict.fromkeys(int(i) for items in candidate_lists for i in items))
    scores = np.asarray(model.score_items(user, union, rng), dtype=np.float64)
    if scores.shape != (len(union),) or not np.isfinite(scores).all():
        raise ValueError(
            f"{label}: score_items for user {user} returned {scores.shape} scores "
            f"(finite: {bool(np.isfinite(scores).all())}) for {len(union)} candidates"
        )
    where = {item: k for k, item in enumerate(union)}
    return [scores[[where[int(i)] for i in items]] for items in candidate_lists]
