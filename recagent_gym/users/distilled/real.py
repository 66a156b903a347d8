"""Real choices: pages of a user's real next items among never-seen negatives, for ``users distill`` (the real-choice
objective) and ``users fidelity`` (the hit rate on held-out users).

**Split.** Each user's last ``choices`` interactions by time (10, the agreement test's real future) are its real
next items; everything before them (all users) is the *history* the user's features are built on, so the model
predicts them from the past, as ``evaluate agreement`` asks it to (it re-encodes the tables on the same history).
Users with fewer than ``choices + min_history`` interactions have no real items.

**Pages.** Per user and sampler, one page per real item: the item and ``page_size - 1`` negatives the user never
interacted with (in the whole dataset), drawn ``uniform`` or ``popularity-matched`` (each negative from the real
item's popularity band: popularity alone does not find the real item), in a seeded random order. A page's label is
the real item's position.

**Objective** (:func:`real_loss`): the cross-entropy of the real item under the rule's choice among the page's
items, ``softmax(score / T)`` (``T`` the rule's ``user.watch_temperature``): given that the user watches one of
the page, the real one. It moves the scores' order on a page, not their level against the watch threshold (the
watch rate stays the LLM users' to fit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from recagent_gym.data.schema import Dataset
from recagent_gym.data.splits import leave_last_out, sample_negatives, sample_negatives_popularity_matched

if TYPE_CHECKING:
    import torch

SAMPLERS: tuple[str, ...] = ("uniform", "popularity-matched")
CHOICES = 10
"""Real next items per user (the agreement test's ``future``)."""
MIN_HISTORY = 10
"""Interactions a user keeps in the history at least to have real items."""


@dataclass(frozen=True)
class RealPages:
    """``items``: ``(n, page_size)``; ``label``: the real item's position; ``sampler``: index into
    :data:`SAMPLERS`."""

    user: np.ndarray
    items: np.ndarray
    label: np.ndarray
    sampler: np.ndarray

    def __len__(self) -> int:
        return len(self.user)

    def subset(self, keep: np.ndarray) -> RealPages:
        return RealPages(self.user[keep], self.items[keep], self.label[keep], self.sampler[keep])


def temporal_split(dataset: Dataset, choices: int = CHOICES, min_history: int = MIN_HISTORY) -> tuple[Dataset, dict]:
    """``(history, real)``: the dataset without each user's last ``choices`` items, and those items per user."""
    split = leave_last_out(dataset, choices, min_train=min_history)
    return split.train, {int(u): tuple(dict.fromkeys(items)) for u, items in split.held_out.items()}


def real_pages(
    dataset: Dataset, real: dict[int, tuple[int, ...]], users: Any, *, page_size: int, seed: int
) -> RealPages:
    """One page per (sampler, user of ``users`` with real items, real item); negatives from ``dataset`` (the whole
    one: an item the user ever interacted with is never a negative)."""
    if page_size < 2:
        raise ValueError(f"a real-choice page needs room for negatives: page_size {page_size}")
    n_neg = page_size - 1
    rows_user, rows_items, rows_label, rows_sampler = [], [], [], []
    for s, sampler in enumerate(SAMPLERS):
        for user in sorted(int(u) for u in users):
            positives = real.get(user)
            if not positives:
                continue
            rng = np.random.default_rng([seed, s, user])
            if sampler == "uniform":
                drawn = rng.permutation(sample_negatives(dataset, user, n_neg * len(positives), rng, exclude=positives))
                negatives = {p: drawn[k * n_neg : (k + 1) * n_neg] for k, p in enumerate(positives)}
            else:
                sample = sample_negatives_popularity_matched(dataset, user, positives, n_neg, rng, exclude=positives)
                negatives = sample.negatives
            for p in positives:
                page = np.concatenate([[p], np.asarray(negatives[p], dtype=np.int64)])
                order = rng.permutation(page_size)
                rows_user.append(user)
                rows_items.append(page[order])
                rows_label.append(int(np.flatnonzero(order == 0)[0]))
                rows_sampler.append(s)
    return RealPages(
        np.asarray(rows_user, dtype=np.int64),
        np.asarray(rows_items, dtype=np.int64).reshape(-1, page_size),
        np.asarray(rows_label, dtype=np.int64),
        np.asarray(rows_sampler, dtype=np.int64),
    )


def real_loss(scores: torch.Tensor, label: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean cross-entropy of the real item under ``softmax(scores / temperature)`` over each page."""
    import torch

    return torch.nn.functional.cross_entropy(scores / temperature, label)


def choice_probability(scores: np.ndarray, label: np.ndarray, temperature: float) -> np.ndarray:
    """Per page, the real item's probability under ``softmax(scores / temperature)``."""
    z = scores / temperature
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    return p[np.arange(len(label)), label]


def top_hit(scores: np.ndarray, label: np.ndarray) -> np.ndarray:
    """Per page, 1 when the real item has the page's highest score (ties share the hit)."""
    best = scores.max(axis=1, keepdims=True)
    top = np.isclose(scores, best, rtol=0.0, atol=1e-12)
    return top[np.arange(len(label)), label] / top.sum(axis=1)


def held_out_table(
    dataset: Dataset,
    config: Any,
    artefact: Any,
    vectors: np.ndarray,
    users: Any,
    *,
    llm_users: int = 0,
    llm_model: Any = None,
    bootstrap: int = 1000,
    seed: int = 0,
    choices: int = CHOICES,
    min_history: int = MIN_HISTORY,
) -> pd.DataFrame:
    """The real item's hit rate on the held-out ``users``' pages of real next items (their last :data:`CHOICES`),
    per sampler and user model: the distilled users (tables re-encoded on the history before those items), the
    popularity of the history, chance, and with ``llm_users > 0`` the LLM users (``llm_model``, else built on the
    history from ``config``) on the first ``llm_users`` of ``users`` (each user's pages of a sampler scored in one
    LLM call). ``hit``: the real item has the page's top score (ties share); ``choice_p``: its probability under
    the rule's ``softmax(score / T)``; means over users with 95% bootstrap intervals (users resampled). ``choices``
    and ``min_history``: the split (:func:`temporal_split`)."""
    from recagent_gym.users.distilled.reencode import reencoded
    from recagent_gym.users.distilled.user import DistilledUser

    history, real = temporal_split(dataset, choices, min_history)
    pages = real_pages(dataset, real, users, page_size=config.env.page_size, seed=seed + 1)
    temperature = float(config.user.watch_temperature)
    models: dict[str, np.ndarray] = {}
    distilled = DistilledUser(history, reencoded(artefact, history, config, text=vectors))
    pairs = zip(pages.user, pages.items, strict=True)
    models["distilled"] = (
        np.stack([distilled.mean_scores(int(u), p) for u, p in pairs]) if len(pages) else np.zeros(pages.items.shape)
    )
    popularity = history.item_popularity().astype(np.float64)
    models["popularity"] = popularity[pages.items]
    models["chance"] = np.zeros(pages.items.shape)
    keep = {"distilled": np.ones(len(pages), bool), "popularity": np.ones(len(pages), bool)}
    keep["chance"] = keep["distilled"]
    if llm_users > 0 and len(pages):
        chosen = np.unique(pages.user)[:llm_users]
        if llm_model is None:
            from recagent_gym.users.factory import build_user_model

            llm_model = build_user_model("llm", history, **config.user_model_sections())
        scores = np.full(pages.items.shape, np.nan)
        for user in chosen:
            for s in range(len(SAMPLERS)):
                rows = np.flatnonzero((pages.user == user) & (pages.sampler == s))
                pool = np.unique(pages.items[rows])
                rng = np.random.default_rng([seed, int(user), s])
                scored = np.asarray(llm_model.score_items(int(user), pool, rng), float)
                got = dict(zip(pool.tolist(), scored.tolist(), strict=True))
                scores[rows] = np.vectorize(got.__getitem__)(pages.items[rows])
        models["LLM"] = scores
        keep["LLM"] = np.isin(pages.user, chosen)
    records = []
    for s, sampler in enumerate(SAMPLERS):
        for name, scores in models.items():
            rows = keep[name] & (pages.sampler == s)
            if not rows.any():
                continue
            part = pages.subset(rows)
            hit = top_hit(scores[rows], part.label)
            prob = choice_probability(scores[rows], part.label, temperature) if name != "popularity" else None
            record = {"negatives": sampler, "users": name, "n_users": len(np.unique(part.user)),
                      "pages": int(rows.sum())}  # fmt: skip
            for metric, values in (("hit", hit), ("choice_p", prob)):
                mean, lo, hi = (
                    _per_user_interval(part.user, values, bootstrap, seed) if values is not None else (np.nan,) * 3
                )
                record.update({metric: mean, f"{metric}_low": lo, f"{metric}_high": hi})
            records.append(record)
    return pd.DataFrame(records)


def _per_user_interval(users: np.ndarray, values: np.ndarray, n: int, seed: int) -> tuple[float, float, float]:
    """Mean of the per-user means and its 95% bootstrap interval (users resampled)."""
    frame = pd.DataFrame({"user": users, "v": values}).groupby("user")["v"].mean().to_numpy()
    if not len(frame):
        return np.nan, np.nan, np.nan
    draws = np.random.default_rng(seed).integers(0, len(frame), size=(n, len(frame)))
    means = frame[draws].mean(axis=1)
    return float(frame.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))
