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

The held-out users' table of ``users fidelity`` is :func:`~recagent_gym.runs.distill.fidelity.held_out_table`.

**Leave pages** (:func:`leave_pages`): per sampler and real item, a page of ``page_size`` never-seen negatives
drawn as that item's negatives are (popularity-matched: from its popularity band, so such a page differs from the
real item's page only in the real item), labelled "watch nothing" (``label == page_size``): the replay of
``evaluate agreement`` has a real user watch nothing on a page without a real next item.

**Objective** (:func:`real_loss`), ``order`` (the default): the cross-entropy of the real item under the rule's choice
among the page's items, ``softmax(score / T)`` (``T`` the rule's ``user.watch_temperature``): given that the user
watches one of the page, the real one. It moves the scores' order on a page, not their level against the watch
threshold (the watch rate stays the LLM users' to fit). ``watch`` (:func:`real_watch_loss`): the real pages and as
many leave pages, each under the rule's choice model with the user's threshold as the "watch nothing" option
(:func:`~recagent_gym.runs.distill.decisions.choice_logits`): the real item is watched on its page and nothing on a
page without one, so the scores' level against the threshold follows real choices too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

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


def _negatives(
    dataset: Dataset, real: dict[int, tuple[int, ...]], users: Any, n: int, stream: tuple[int, ...]
) -> Iterator[tuple[int, int, tuple[int, ...], dict[int, np.ndarray], np.random.Generator]]:
    """Per (sampler, user of ``users`` with real items): ``(sampler index, user, real items, {real item: n
    never-seen negatives drawn for it}, the generator they were drawn from)``; the generator is seeded with
    ``(*stream[:1], sampler index, user, *stream[1:])``, so each caller's stream is its own."""
    for s, sampler in enumerate(SAMPLERS):
        for user in sorted(int(u) for u in users):
            positives = real.get(user)
            if not positives:
                continue
            rng = np.random.default_rng([stream[0], s, user, *stream[1:]])
            if sampler == "uniform":
                drawn = rng.permutation(sample_negatives(dataset, user, n * len(positives), rng, exclude=positives))
                negatives = {p: drawn[k * n : (k + 1) * n] for k, p in enumerate(positives)}
            else:
                negatives = sample_negatives_popularity_matched(dataset, user, positives, n, rng, positives).negatives
            yield s, user, positives, negatives, rng


def _pages(rows: list[tuple[int, np.ndarray, int, int]], page_size: int) -> RealPages:
    user, items, label, sampler = zip(*rows, strict=True) if rows else ((), (), (), ())
    return RealPages(
        np.asarray(user, dtype=np.int64),
        np.asarray(items, dtype=np.int64).reshape(-1, page_size),
        np.asarray(label, dtype=np.int64),
        np.asarray(sampler, dtype=np.int64),
    )


def real_pages(
    dataset: Dataset, real: dict[int, tuple[int, ...]], users: Any, *, page_size: int, seed: int
) -> RealPages:
    """One page per (sampler, user of ``users`` with real items, real item); negatives from ``dataset`` (the whole
    one: an item the user ever interacted with is never a negative)."""
    if page_size < 2:
        raise ValueError(f"a real-choice page needs room for negatives: page_size {page_size}")
    rows = []
    for s, user, positives, negatives, rng in _negatives(dataset, real, users, page_size - 1, (seed,)):
        for p in positives:
            page = np.concatenate([[p], np.asarray(negatives[p], dtype=np.int64)])
            order = rng.permutation(page_size)
            rows.append((user, page[order], int(np.flatnonzero(order == 0)[0]), s))
    return _pages(rows, page_size)


def leave_pages(
    dataset: Dataset, real: dict[int, tuple[int, ...]], users: Any, *, page_size: int, seed: int
) -> RealPages:
    """One page of ``page_size`` never-seen negatives per (sampler, user of ``users`` with real items, real item),
    drawn as :func:`real_pages` draws that item's negatives (from a stream of their own: the real pages are the same
    with or without these); ``label`` is ``page_size`` (watch nothing)."""
    rows = [(user, np.asarray(negatives[p], dtype=np.int64), page_size, s)
            for s, user, positives, negatives, _ in _negatives(dataset, real, users, page_size, (seed, 1))
            for p in positives]  # fmt: skip
    return _pages(rows, page_size)


def real_watch_loss(
    scores: torch.Tensor, label: torch.Tensor, threshold: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Mean cross-entropy of ``label`` (a position, or ``width`` for "watch nothing") under the rule's choice model
    with each page's user threshold as the "watch nothing" option."""
    import torch

    from recagent_gym.runs.distill.decisions import choice_logits

    logits = choice_logits(scores, torch.ones_like(scores, dtype=torch.bool), threshold, temperature)
    return torch.nn.functional.cross_entropy(logits, label)


def watch_probability(scores: np.ndarray, threshold: np.ndarray, temperature: float) -> np.ndarray:
    """Per page, the probability that something is watched under the choice model with ``threshold`` (per page):
    one minus the "watch nothing" option's :func:`choice_probability`."""
    with_nothing = np.concatenate([scores, threshold[:, None]], axis=1)
    return 1.0 - choice_probability(with_nothing, np.full(len(scores), scores.shape[1]), temperature)


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
