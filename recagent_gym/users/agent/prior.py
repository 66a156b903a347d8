"""A behavioural prior on item choice, combined with the LLM's judgement: users as biased as people.

People pick popular items more than their taste alone predicts, the more so the more mainstream they are; they
pick what is in fashion at the time and recent releases; and they pick what sits high on their own rating scale.
The prior scores an item ``i`` for user ``u`` by six features, each standardised over the catalogue:

==========================  =========================================================================================
``popularity``              ``log(1 + interactions)`` of the item in the training data
``popularity_x_mainstream`` popularity times the user's conformity: the mean popularity of the user's history, centred
                            on the users' mean (a mainstream user follows the crowd more)
``trend``                   ``log(1 + interactions)`` in the ``window_days`` before the user's last interaction
``recency``                 ``-log(1 + years)`` between the item's release and the user's last interaction
``rating_scale``            the item's shrunk mean rating on the user's own scale: ``(q_i - mean_u) / sd_u``
``affinity``                the user's collaborative affinity: the item's latent vector (a truncated SVD of the
                            history's user x item matrix, :data:`AFFINITY_DIMS` factors) against the direction of the
                            user's history (what collaborative filtering reads; the RecSim-style users' ``hidden``)
==========================  =========================================================================================

The choice score is ``w_llm * s_llm + sum_k w_k * f_k`` with ``s_llm`` the agent's item score (LLM + embedding at
their config weights, ``Agents.combine``): the ``both`` fit. With ``user.prior_fit: parts`` the agent's score is
taken apart and each part has its own fitted weight, ``w_s * s_llm_score + w_e * s_embedding + sum_k w_k * f_k``
(the ``parts`` fit, which replaces the config weights of the two parts). The weights are fitted by ``recagent-gym
calibrate`` (``evaluation/calibrate.py``) on train users' real choices only and stored as JSON; the page decision
uses them when ``user.prior_weights`` names that file, and is unchanged otherwise (:class:`PagePrior`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.users.prior_file import (
    DEFAULT_WINDOW_DAYS,
    FEATURES,
    INTERCEPT,
    LLM,
    PARTS,
    PARTS_BLOCK,
    read_prior_file,
)

SECONDS_PER_DAY = 86_400.0
AFFINITY_DIMS = 32
"""Factors of the collaborative affinity, chosen on the bundled data by ``benchmarks/bench_affinity_dims.py``: the AUC
of the history's own held-out items (the agreement split's history split again, so no evaluated future is read)
against uniform and popularity-matched negatives, best at 32 for both and within 0.01 of it from 16 to 64 factors."""
SHRINK = 10.0
"""Pseudo-ratings pulling an item's mean rating towards the global mean (few ratings say little)."""


def _z(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    sd = float(values.std())
    return (values - values.mean()) / sd if sd > 0 else np.zeros_like(values)


@dataclass
class _UserFacts:
    mainstream: float
    trend: np.ndarray
    recency: np.ndarray
    rating_scale: np.ndarray
    affinity: np.ndarray


class BehaviouralPrior:
    """The six prior features of any (user, items) from a dataset's interactions (the training data)."""

    def __init__(self, dataset: Dataset, *, window_days: float = 180.0) -> None:
        if window_days <= 0:
            raise ValueError(f"window_days must be > 0, not {window_days}")
        self.dataset = dataset
        self.window_s = float(window_days) * SECONDS_PER_DAY
        inter = dataset.interactions.sort_values("timestamp", kind="stable")
        self._times = inter["timestamp"].to_numpy(dtype=np.int64)
        self._items = inter["item_id"].to_numpy(dtype=np.int64)
        n = dataset.n_items
        self.popularity = _z(np.log1p(np.bincount(self._items, minlength=n)))
        ratings = inter["rating"].to_numpy(dtype=np.float64)
        rated = np.isfinite(ratings)
        self._rated = bool(rated.any())
        global_mean = float(ratings[rated].mean()) if self._rated else 0.0
        sums = np.bincount(self._items[rated], weights=ratings[rated], minlength=n)
        counts = np.bincount(self._items[rated], minlength=n)
        self.quality = (sums + SHRINK * global_mean) / (counts + SHRINK)
        self._global_sd = float(ratings[rated].std()) if self._rated else 1.0
        years = dataset.items["year"].to_numpy(dtype=np.float64)
        self._years = np.where(np.isfinite(years) & (years > 0), years, np.nan)
        users = inter["user_id"].to_numpy(dtype=np.int64)
        per_user = np.bincount(users, weights=self.popularity[self._items], minlength=dataset.n_users)
        seen = np.bincount(users, minlength=dataset.n_users)
        self._mainstream = np.where(seen > 0, per_user / np.maximum(seen, 1), 0.0)
        self._mainstream -= self._mainstream[seen > 0].mean() if (seen > 0).any() else 0.0
        self._user_rows = inter.groupby("user_id", sort=False).indices
        self._ratings = ratings
        self._facts: dict[int, _UserFacts] = {}
        self._latents: tuple[np.ndarray, np.ndarray] | None = None

    def _collaborative(self) -> tuple[np.ndarray, np.ndarray]:
        """``(item latents, users' history directions)``, built on first use (one truncated SVD)."""
        if self._latents is None:
            from recagent_gym.users.recsim_features import collaborative_item_latents, history_directions

            items = collaborative_item_latents(self.dataset, AFFINITY_DIMS, seed=0)
            self._latents = (items, history_directions(self.dataset, items))
        return self._latents

    def _user(self, user: int) -> _UserFacts:
        if user in self._facts:
            return self._facts[user]
        rows = self._user_rows.get(user)
        if rows is None or len(rows) == 0:
            raise DataError(f"the behavioural prior needs user {user}'s history; the training data has none")
        now = int(self._times[rows].max())
        lo, hi = np.searchsorted(self._times, [now - self.window_s, now], side="right")
        trend = _z(np.log1p(np.bincount(self._items[lo:hi], minlength=self.dataset.n_items)))
        year_now = 1970.0 + now / (365.25 * SECONDS_PER_DAY)
        age = -np.log1p(np.clip(year_now - self._years, 0.0, None))
        recency = _z(np.where(np.isfinite(age), age, np.nanmean(age) if np.isfinite(age).any() else 0.0))
        own = self._ratings[rows]
        own = own[np.isfinite(own)]
        if len(own) and self._rated:
            sd = float(own.std()) if len(own) > 1 and own.std() > 0 else self._global_sd
            scale = (self.quality - float(own.mean())) / max(sd, 1e-6)
        else:
            scale = np.zeros(self.dataset.n_items)
        items, users = self._collaborative()
        facts = _UserFacts(float(self._mainstream[user]), trend, recency, scale, _z(items @ users[user]))
        self._facts[user] = facts
        return facts

    def features(self, user: int, items: Sequence[int]) -> np.ndarray:
        """``(len(items), len(FEATURES))`` feature rows, in :data:`FEATURES` order."""
        idx = np.asarray(items, dtype=np.int64)
        facts = self._user(int(user))
        pop = self.popularity[idx]
        return np.column_stack(
            [pop, pop * facts.mainstream, facts.trend[idx], facts.recency[idx], facts.rating_scale[idx],
             facts.affinity[idx]]
        )  # fmt: skip


@dataclass(frozen=True)
class PriorWeights:
    """Fitted weights: ``llm`` (the agent's score) and one per feature; ``parts`` (the ``parts`` fit only): the
    weights of the LLM's own score and of the embedding term, used instead of ``llm``; ``meta`` records how they
    were fitted."""

    llm: float
    features: Mapping[str, float]
    meta: Mapping[str, Any] = field(default_factory=dict)
    parts: tuple[float, float] | None = None
    intercept: float = 0.0
    """A constant added to every item's choice score (the ``parts`` fit of ``users fit-agreement``; 0 otherwise)."""

    def vector(self) -> np.ndarray:
        return np.array([float(self.features.get(name, 0.0)) for name in FEATURES])

    def to_dict(self) -> dict[str, Any]:
        scores = dict(zip(PARTS, self.parts, strict=True)) if self.parts is not None else {LLM: self.llm}
        shift = {INTERCEPT: self.intercept} if self.intercept else {}
        return {**scores, **{name: float(self.features.get(name, 0.0)) for name in FEATURES}, **shift}


def combine(llm_scores: np.ndarray, features: np.ndarray, weights: PriorWeights) -> np.ndarray:
    """``w_llm * s_llm + features @ w`` (the choice score of the page decision and the evaluation's rows)."""
    return weights.llm * np.asarray(llm_scores, dtype=np.float64) + features @ weights.vector()


def combine_parts(
    llm_scores: np.ndarray, embedding: np.ndarray, features: np.ndarray, weights: PriorWeights
) -> np.ndarray:
    """``w_s * s_llm_score + w_e * s_embedding + features @ w``: the ``parts`` fit's choice score."""
    if weights.parts is None:
        raise ValueError("combine_parts needs the 'parts' weights (load_weights(path, which='parts'))")
    w_score, w_embedding = weights.parts
    return (
        w_score * np.nan_to_num(np.asarray(llm_scores, dtype=np.float64))
        + w_embedding * np.asarray(embedding, dtype=np.float64)
        + features @ weights.vector()
        + weights.intercept
    )


def choice_scores(
    weights: PriorWeights, features: np.ndarray, scores: np.ndarray, llm_scores: np.ndarray, embedding: np.ndarray
) -> np.ndarray:
    """The one place that picks the fit's formula: the agent's ``scores`` (its two parts at their config weights)
    with the ``both`` fit (:func:`combine`), or its parts ``llm_scores`` and ``embedding`` with the ``parts`` fit
    (:func:`combine_parts`). The page decision and the evaluations' LLM + prior rows both call it."""
    if weights.parts is not None:
        return combine_parts(llm_scores, embedding, features, weights)
    return combine(scores, features, weights)


def load_weights(path: str | Path, *, which: str = "both") -> PriorWeights:
    """The ``both`` (LLM + prior), ``parts`` (the agent's score taken apart, + prior) or ``prior_only`` weights of a
    ``recagent-gym calibrate`` file, the whole file checked first
    (:func:`~recagent_gym.users.prior_file.read_prior_file`); ``meta`` holds its other fields, with ``window_days``
    checked (a number > 0)."""
    checked = read_prior_file(path)
    block = checked.fits.get(which)
    if block is None:
        needs = " (written by `recagent-gym calibrate` with the LLM since the parts fit exists)" * (
            which == PARTS_BLOCK
        )
        raise DataError(
            f"prior weights {checked.path}: no {which!r} weights (a calibrate file; 'both' and 'parts' need the "
            f"LLM){needs}"
        )
    meta = {**checked.meta, "window_days": checked.window_days, "fit": which}
    parts = (block.get(PARTS[0], 0.0), block.get(PARTS[1], 0.0)) if which == PARTS_BLOCK else None
    return PriorWeights(block.get(LLM, 0.0), {k: block.get(k, 0.0) for k in FEATURES}, meta=meta, parts=parts,
                        intercept=block.get(INTERCEPT, 0.0))  # fmt: skip


@dataclass(frozen=True)
class PagePrior:
    """The behavioural prior of a page decision: the dataset's features and the fitted ``both`` (or ``parts``)
    weights."""

    prior: BehaviouralPrior
    weights: PriorWeights

    @classmethod
    def load(cls, path: str | Path, dataset: Dataset, *, fit: str = "both") -> PagePrior:
        """From a ``recagent-gym calibrate`` file (``user.prior_weights``; ``fit``: ``user.prior_fit``), built once per
        population."""
        weights = load_weights(path, which=fit)
        window = float(weights.meta.get("window_days", DEFAULT_WINDOW_DAYS))
        return cls(BehaviouralPrior(dataset, window_days=window), weights)

    def adjust(self, user: int, items: Sequence[int], scores: np.ndarray, llm_scores: np.ndarray,
               embedding: np.ndarray) -> np.ndarray:  # fmt: skip
        """The choice scores of ``user``'s page ``items``: the agent's ``scores`` (its two parts at their config
        weights) combined with the prior (:func:`combine`), or with the ``parts`` fit its two parts
        ``llm_scores`` and ``embedding`` each at its fitted weight (:func:`combine_parts`)."""
        return choice_scores(self.weights, self.prior.features(user, items), scores, llm_scores, embedding)
