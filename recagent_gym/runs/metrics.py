"""Metrics of the paper's evaluations, each stating what it needs and which direction is better.

Every per-user metric returns one value per user; :func:`summarize` turns those into a :class:`Estimate` (mean,
standard error, bootstrap confidence interval), so every table carries an interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.spatial.distance import jensenshannon
from scipy.stats import norm


@dataclass(frozen=True)
class Estimate:
    """A mean over users with its standard error and a confidence interval (NaN where undefined)."""

    mean: float
    stderr: float
    low: float
    high: float
    n: int

    def format(self, digits: int = 3) -> str:
        """``0.550 ± 0.114 [0.350, 0.750]`` (the interval is omitted when undefined)."""
        if self.n == 0 or not np.isfinite(self.mean):
            return "–"
        text = f"{self.mean:.{digits}f} ± {self.stderr:.{digits}f}"
        if np.isfinite(self.low) and np.isfinite(self.high):
            text += f" [{self.low:.{digits}f}, {self.high:.{digits}f}]"
        return text


def summarize(
    values: Sequence[float] | np.ndarray,
    rng: np.random.Generator | None = None,
    *,
    bootstrap: int = 1000,
    confidence: float = 0.95,
) -> Estimate:
    """Mean, standard error (``std(ddof=1) / sqrt(n)``) and a percentile bootstrap interval over users.

    Without ``rng`` or with ``bootstrap=0`` the interval is the normal approximation ``mean ± z * stderr``.
    """
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), float("nan"), 0)
    mean = float(x.mean())
    stderr = float(x.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    alpha = 1.0 - confidence
    if rng is not None and bootstrap > 0 and n > 1:
        means = bootstrap_replicates(lambda idx: x[idx].mean(axis=1), n, rng, n_boot=bootstrap, batched=True)
        low, high = percentile_interval(means, confidence)
        return Estimate(mean, stderr, low, high, n)
    z = float(norm.ppf(1 - alpha / 2))
    return Estimate(mean, stderr, mean - z * stderr, mean + z * stderr, n)


def bootstrap_replicates(
    statistic: Callable[[np.ndarray], float | Sequence[float] | np.ndarray],
    n: int,
    rng: np.random.Generator,
    *,
    n_boot: int = 1000,
    batched: bool = False,
) -> np.ndarray:
    """The project's one bootstrap: ``statistic`` over ``n_boot`` resamples (with replacement) of ``n`` users.

    The draw is ``rng.integers(0, n, size=(n_boot, n))``, one row of user indices per resample. ``statistic`` gets
    one row (an index array of length ``n``) and returns a number or a fixed-length tuple of numbers, or with
    ``batched=True`` it gets the whole ``(n_boot, n)`` array and returns one value (or one row) per resample.
    Returns ``(n_boot,)`` or ``(n_boot, k)`` replicates; empty when ``n_boot`` or ``n`` is 0.
    """
    if n_boot <= 0 or n <= 0:
        return np.zeros(0, dtype=np.float64)
    idx = rng.integers(0, n, size=(n_boot, n))
    if batched:
        return np.asarray(statistic(idx), dtype=np.float64)
    return np.asarray([statistic(row) for row in idx], dtype=np.float64)


def percentile_interval(replicates: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The central ``confidence`` share of the finite ``replicates`` (linear quantiles; NaN, NaN if none)."""
    kept = np.asarray(replicates, dtype=np.float64).reshape(-1)
    kept = kept[np.isfinite(kept)]
    if not len(kept):
        return float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(kept, [alpha, 1 - alpha])
    return float(low), float(high)


def paired_difference(
    values: Sequence[float] | np.ndarray,
    reference: Sequence[float] | np.ndarray,
    rng: np.random.Generator | None = None,
    *,
    bootstrap: int = 1000,
    confidence: float = 0.95,
) -> Estimate:
    """``values - reference`` paired by user (same users, same candidates), summarized by :func:`summarize`.

    Resampling the per-user differences keeps the pairing: the interval is that of the difference, much tighter
    than two separate intervals when both models find the same users easy. An interval excluding 0 is the
    significance test every table uses.
    """
    x = np.asarray(values, dtype=np.float64)
    y = np.asarray(reference, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"paired difference of {x.shape} and {y.shape} values: the users must be the same")
    return summarize(x - y, rng, bootstrap=bootstrap, confidence=confidence)


def top_k(scores: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the ``k`` highest scores; ties are broken at random with ``rng`` (never by position)."""
    scores = np.asarray(scores, dtype=np.float64)
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN")
    tie_break = rng.random(len(scores))
    order = np.lexsort((tie_break, -scores))
    return order[:k]


class DiscriminationHitRate:
    """``|T ∩ S| / |T|`` per user: the share of held-out items ``T`` among the model's top-``|T|`` picks ``S``.

    Needs: held-out items and selected items per user. Higher is better; random expectation ``a / (a + b)``.
    """

    name: ClassVar[str] = "hit_rate"
    higher_is_better: ClassVar[bool] = True

    def per_user(self, held_out: Sequence[Sequence[int]], selected: Sequence[Sequence[int]]) -> np.ndarray:
        if len(held_out) != len(selected):
            raise ValueError(f"{len(held_out)} held-out sets but {len(selected)} selections")
        out = np.empty(len(held_out), dtype=np.float64)
        for i, (truth, picked) in enumerate(zip(held_out, selected, strict=True)):
            truth_set = set(int(t) for t in truth)
            if not truth_set:
                raise ValueError(f"user #{i}: empty held-out set")
            out[i] = len(truth_set & {int(s) for s in picked}) / len(truth_set)
        return out

    @staticmethod
    def random_expectation(a: int, b: int) -> float:
        """Expected hit rate of a uniformly random pick of ``a`` among ``a + b`` candidates."""
        return a / (a + b)


class HeldOutHitRate(DiscriminationHitRate):
    """Sequence generation: the share of the held-out items that appear anywhere in the generated sequence.

    Needs: held-out items and generated sequence per user. Higher is better (the ground truth scores 1).
    """

    name: ClassVar[str] = "held_out_hit_rate"


def genre_distribution(items: Sequence[int], genre_matrix: np.ndarray) -> np.ndarray:
    """Genre shares of ``items``: each item's genres weigh ``1 / n_genres`` (an item without genres weighs 0)."""
    rows = genre_matrix[np.asarray(items, dtype=np.int64)].astype(np.float64)
    rows = rows / np.maximum(rows.sum(axis=1, keepdims=True), 1.0)
    total = rows.sum(axis=0)
    mass = total.sum()
    return total / mass if mass > 0 else total


class GenreDivergence:
    """Jensen-Shannon divergence (base 2, in [0, 1]) between the genre distribution of a sequence and of the
    user's history. Needs: the sequence, the history and the dataset's genre matrix. Lower is better (closer to
    the user's taste). A sequence or history without any genre gives NaN (excluded from the mean, and counted)."""

    name: ClassVar[str] = "genre_js_divergence"
    higher_is_better: ClassVar[bool] = False

    def __init__(self, genre_matrix: np.ndarray) -> None:
        self.genre_matrix = np.asarray(genre_matrix)

    def __call__(self, sequence: Sequence[int], history: Sequence[int]) -> float:
        p = genre_distribution(sequence, self.genre_matrix)
        q = genre_distribution(history, self.genre_matrix)
        if p.sum() == 0 or q.sum() == 0:
            return float("nan")
        # scipy returns the JS *distance* (the square root of the divergence).
        return float(jensenshannon(p, q, base=2) ** 2)


class EmbeddingSimilarity:
    """Mean cosine similarity over all pairs (generated item, ground-truth item). Needs: unit item embeddings.
    Higher is better. Order-free on purpose: a sequence of the right movies in another order is not penalised."""

    name: ClassVar[str] = "embedding_similarity"
    higher_is_better: ClassVar[bool] = True

    def __init__(self, item_embeddings: np.ndarray) -> None:
        vectors = np.asarray(item_embeddings, dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self.vectors = vectors / np.where(norms > 0, norms, 1.0)

    def __call__(self, sequence: Sequence[int], truth: Sequence[int]) -> float:
        a = self.vectors[np.asarray(sequence, dtype=np.int64)]
        b = self.vectors[np.asarray(truth, dtype=np.int64)]
        if len(a) == 0 or len(b) == 0:
            return float("nan")
        return float((a @ b.T).mean())


JUDGE_LABELS: tuple[str, ...] = ("A>>B", "A>B", "A≈B", "B>A", "B>>A")
"""The paper's 5-point pairwise scale, strongest preference for A first."""
JUDGE_SCORES: tuple[int, ...] = (2, 1, 0, -1, -2)
"""Numeric value of each label: positive favours A."""


@dataclass(frozen=True)
class JudgeSummary:
    """Verdicts of one comparison (X vs Y), oriented so that A is always X."""

    shares: tuple[float, ...]
    """Share of each of :data:`JUDGE_LABELS` (X in the role of A)."""
    counts: tuple[int, ...]
    score: Estimate
    """Mean of :data:`JUDGE_SCORES` (> 0: X preferred). Higher favours X."""
    position_bias: float
    """Mean score of whichever sequence was *shown* first: far from 0 means the judge follows position."""
    fallbacks: int


def aggregate_judgements(
    labels: Sequence[int],
    swapped: Sequence[bool],
    rng: np.random.Generator | None = None,
    *,
    fallbacks: int = 0,
    bootstrap: int = 1000,
    confidence: float = 0.95,
) -> JudgeSummary:
    """Aggregate verdicts given as label indices into :data:`JUDGE_LABELS` *as shown to the judge*.

    ``swapped[i]`` says the judge saw Y as "A" for comparison ``i``; such verdicts are mirrored so the summary always
    reads "X vs Y". Needs: shown labels and the recorded order. Higher ``score`` favours X.
    """
    if len(labels) != len(swapped):
        raise ValueError(f"{len(labels)} labels but {len(swapped)} order flags")
    shown = np.asarray(labels, dtype=np.int64)
    if len(shown) and (shown.min() < 0 or shown.max() >= len(JUDGE_LABELS)):
        raise ValueError(f"label indices must lie in 0..{len(JUDGE_LABELS) - 1}")
    flips = np.asarray(swapped, dtype=bool)
    oriented = np.where(flips, len(JUDGE_LABELS) - 1 - shown, shown)
    counts = np.bincount(oriented, minlength=len(JUDGE_LABELS))
    n = max(len(oriented), 1)
    values = np.asarray(JUDGE_SCORES, dtype=np.float64)
    shown_scores = values[shown] if len(shown) else np.zeros(0)
    return JudgeSummary(
        shares=tuple(float(c / n) for c in counts),
        counts=tuple(int(c) for c in counts),
        score=summarize(values[oriented], rng, bootstrap=bootstrap, confidence=confidence),
        position_bias=float(shown_scores.mean()) if len(shown_scores) else float("nan"),
        fallbacks=fallbacks,
    )
