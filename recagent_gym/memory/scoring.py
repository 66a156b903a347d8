"""The numbers behind retrieval and forgetting, as pure functions of arrays."""

from __future__ import annotations

import numpy as np


def recency(last_access_h: np.ndarray, time_h: float, decay: float) -> np.ndarray:
    """``decay ** hours since last access``, in (0, 1]; a record accessed in the future counts as fresh."""
    hours = np.maximum(float(time_h) - np.asarray(last_access_h, dtype=np.float64), 0.0)
    return np.power(float(decay), hours)


def forget_weights(importance: np.ndarray, recency_: np.ndarray, beta: float, delta: float) -> np.ndarray:
    """The paper's ``g(M) = 1 - (s + r)/2 * max(r**beta, delta)`` per record (s = importance, r = recency).

    Both inputs are already normalised to [0, 1] (importance by construction, recency as a decay factor), so
    ``g`` is in [0, 1]: old, unimportant records score near 1 and are the likeliest to be forgotten.
    """
    s = np.asarray(importance, dtype=np.float64)
    r = np.asarray(recency_, dtype=np.float64)
    if np.any((s < 0) | (s > 1)) or np.any((r < 0) | (r > 1)):
        raise ValueError("forget_weights: importance and recency must lie in [0, 1]")
    if not beta > 1.0 or not 0.0 < delta < 1.0:
        raise ValueError(f"forget_weights: need beta > 1 and 0 < delta < 1, got beta={beta}, delta={delta}")
    return 1.0 - (s + r) / 2.0 * np.maximum(np.power(r, beta), delta)


def sample_forgotten(weights: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``count`` records to forget, drawn without replacement with probability proportional to ``weights``.

    Records of weight 0 (fresh and maximally important) go only when fewer than ``count`` records weigh anything;
    then they are drawn uniformly among themselves.
    """
    w = np.asarray(weights, dtype=np.float64)
    count = min(int(count), len(w))
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    positive = np.flatnonzero(w > 0)
    if len(positive) >= count:
        chosen = rng.choice(positive, size=count, replace=False, p=w[positive] / w[positive].sum())
        return np.sort(chosen)
    zero = np.flatnonzero(w <= 0)
    rest = rng.choice(zero, size=count - len(positive), replace=False)
    return np.sort(np.concatenate([positive, rest]))


def minmax(values: np.ndarray) -> np.ndarray:
    """``values`` rescaled to [0, 1]; a constant vector becomes zeros (it cannot rank anything)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return v
    span = float(v.max() - v.min())
    return (v - v.min()) / span if span > 1e-12 else np.zeros_like(v)


def retrieval_scores(
    relevance: np.ndarray,
    recency_: np.ndarray,
    importance: np.ndarray,
    *,
    relevance_weight: float,
    recency_weight: float,
    importance_weight: float,
    normalise: bool = True,
) -> np.ndarray:
    """Weighted sum of cosine relevance, recency and importance, each min-max rescaled over the candidates when
    ``normalise`` (else raw)."""
    scale = minmax if normalise else (lambda v: np.asarray(v, dtype=np.float64))
    return (
        relevance_weight * scale(relevance) + recency_weight * scale(recency_) + importance_weight * scale(importance)
    )
