"""The decision target of ``users distill``: what the users did on a page, for logs that hold no item scores.

The few-shot strategy logs the item score its decision rule reads; the ``direct`` strategy (``decision_strategy:
auto`` with ``llm.backend: openai``, a served model answering "watch <title> / next / search / leave") logs only the
decision. For those pages the scorer is fitted on the choice itself, through a choice model of the rule's own form:
the user picks eligible item ``j`` with probability ``exp(s_j / T) / (exp(threshold_u / T) + sum_k exp(s_k / T))``
and watches nothing with the rest (``T`` the rule's ``user.watch_temperature``, ``threshold_u`` the user's watch
threshold), so scores land on the scale the rule compares with the threshold. Eligible items are the shown ones
not watched earlier in the session (as the rule has them); decisions whose answer was a fallback are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Pages:
    """Decision pages as padded arrays: ``items``/``eligible`` are ``(n, width)``; ``label`` is the watched position,
    or ``width`` when nothing was watched."""

    decision: np.ndarray
    user: np.ndarray
    items: np.ndarray
    eligible: np.ndarray
    label: np.ndarray

    def __len__(self) -> int:
        return len(self.decision)

    def subset(self, keep: np.ndarray) -> Pages:
        return Pages(self.decision[keep], self.user[keep], self.items[keep], self.eligible[keep], self.label[keep])

    def item_rows(self, pred: np.ndarray) -> pd.DataFrame:
        """One row per eligible item (``decision user_id item_id pred``), as the score target's item rows."""
        k, j = np.nonzero(self.eligible)
        return pd.DataFrame(
            {"decision": self.decision[k], "user_id": self.user[k], "item_id": self.items[k, j], "pred": pred[k, j]}
        )


def decision_pages(frame: pd.DataFrame, skip: set[int]) -> Pages:
    """The decisions of ``frame`` (by row index) not in ``skip`` (those the score target covers) with an eligible
    item, as :class:`Pages`."""
    ordered = frame.sort_values(["session_id", "page_index"], kind="stable")
    has_fallback = "fallback" in frame
    watched: dict[int, set[int]] = {}
    rows = []
    for row in ordered.itertuples():
        seen = watched.setdefault(int(row.session_id), set())
        shown = [int(i) for i in row.shown]
        eligible = [i not in seen for i in shown]
        fallback = bool(row.fallback) if has_fallback else False
        if row.Index not in skip and not fallback and any(eligible):
            chosen = int(row.position) if row.action == "watch" else -1
            if chosen < 0 or eligible[chosen]:
                rows.append((int(row.Index), int(row.user_id), shown, eligible, chosen))
        if int(row.item) >= 0:
            seen.add(int(row.item))
    width = max((len(r[2]) for r in rows), default=0)
    n = len(rows)
    items = np.zeros((n, width), dtype=np.int64)
    eligible = np.zeros((n, width), dtype=bool)
    label = np.full(n, width, dtype=np.int64)
    for k, (_, _, shown, ok, chosen) in enumerate(rows):
        items[k, : len(shown)], eligible[k, : len(shown)] = shown, ok
        if chosen >= 0:
            label[k] = chosen
    decision = np.array([r[0] for r in rows], dtype=np.int64)
    return Pages(decision, np.array([r[1] for r in rows], dtype=np.int64), items, eligible, label)


def choice_logits(
    scores: torch.Tensor, eligible: torch.Tensor, threshold: torch.Tensor, temperature: float
) -> torch.Tensor:
    """``(n, width + 1)`` logits of the choice model: the eligible items' scores, then the threshold (no watch),
    over ``temperature``."""
    import torch

    masked = torch.where(eligible, scores, torch.full_like(scores, -math.inf))
    return torch.cat([masked, threshold[:, None]], dim=1) / temperature


def watch_share(pages: Pages) -> float:
    """The share of ``pages`` on which something was watched."""
    return float((pages.label < pages.items.shape[1]).mean()) if len(pages) else math.nan
