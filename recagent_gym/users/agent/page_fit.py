"""Fit the LLM agents' page decision to real outcomes: the weights of the ``parts`` fit, from logged pages.

The page decision (:func:`~recagent_gym.users.agent.page.decide_page`) watches the page's best item with probability
``sigmoid((max_i c_i - threshold) / temperature)``, with the choice score of item ``i``
``c_i = w_s * s_llm_i + w_e * s_embedding_i + f_i @ w + b`` (:func:`~recagent_gym.users.agent.prior.combine_parts`;
``f_i`` the behavioural prior's features, ``b`` the intercept, a shift of the threshold; scaling every weight is a
change of temperature, so the temperature is fitted too). Given pages the agents were shown, with the LLM's and the
embedding's scores of every item (logged once: they do not depend on these weights) and whether the real user's
future held an item of the page, :func:`fit_page_weights` chooses the weights that

- maximise the likelihood of the real outcome of every page (the agent watches where the person's future did: the
  response to real items as large as the scores allow), and
- bring each recommender's mean watch probability to its real hit rate (``rank_weight`` x the squared differences
  over the recommenders, scaled by the real rates' variance: the ranking of recommenders, which a benchmark reads).

``prior_terms`` names the prior's features whose weights are fitted; the others stay at zero (none: the LLM's and the
embedding's scores and the intercept only).
"""

from __future__ import annotations

import zipfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from recagent_gym.data.schema import DataError
from recagent_gym.users.prior_file import FEATURES, INTERCEPT, PARTS

MIN_SCALE = 1e-3
"""Floor of the real hit rates' variance that scales the ranking term (recommenders the real users barely tell
apart must not turn their noise into the fit's main term)."""
SMOOTHING: tuple[float, ...] = (1.0, 0.3, 0.0)
"""The fit's continuation: the page maximum smoothed by these widths in turn, the last the decision's hard max."""
RIDGE = 1e-3
"""L2 penalty on the weights (not the intercept): keeps an uninformative feature near zero."""


@dataclass(frozen=True)
class PageRecords:
    """Logged pages: ``scores`` ``(pages, k, 2 + len(FEATURES))`` columns LLM score, embedding relevance, the prior's
    features; ``eligible`` ``(pages, k)``; per page the decision ``threshold`` (the user's own offset included), the
    real ``hit`` (0/1), the ``recommender`` row's index into ``names`` and the ``user``; ``items`` ``(pages, k)``
    the shown items' ids (-1 past a short page; None where not logged), for terms computed after the run."""

    scores: np.ndarray
    eligible: np.ndarray
    threshold: np.ndarray
    hit: np.ndarray
    recommender: np.ndarray
    user: np.ndarray
    names: tuple[str, ...]
    items: np.ndarray | None = None

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {
            "scores": self.scores, "eligible": self.eligible, "threshold": self.threshold, "hit": self.hit,
            "recommender": self.recommender, "user": self.user, "names": np.array(self.names),
        }  # fmt: skip
        if self.items is not None:
            arrays["items"] = self.items
        np.savez_compressed(path, **arrays)  # type: ignore[arg-type]

    @classmethod
    def load(cls, path: Path) -> PageRecords:
        """The pages :meth:`save` wrote; a :class:`DataError` naming the file where it is missing or not such a file."""
        if not Path(path).is_file():
            raise DataError(f"{path}: no such file (the pages.npz an earlier `users fit-agreement` wrote)")
        try:
            with np.load(path, allow_pickle=False) as f:
                return cls(f["scores"], f["eligible"], f["threshold"], f["hit"], f["recommender"], f["user"],
                           tuple(str(n) for n in f["names"]), f["items"] if "items" in f.files else None)  # fmt: skip
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise DataError(f"{path}: not the logged pages of `users fit-agreement` ({exc})") from None

    def subset(self, keep: np.ndarray) -> PageRecords:
        keep = np.asarray(keep, dtype=bool)
        return PageRecords(self.scores[keep], self.eligible[keep], self.threshold[keep], self.hit[keep],
                           self.recommender[keep], self.user[keep], self.names,
                           None if self.items is None else self.items[keep])  # fmt: skip


@dataclass(frozen=True)
class PageWeights:
    """Fitted weights (the ``parts`` block of a prior file: ``llm_score``, ``embedding``, the features,
    ``intercept``)."""

    weights: dict[str, float]
    loss: float

    def vector(self) -> np.ndarray:
        names = (*PARTS, *FEATURES)
        return np.array([self.weights.get(n, 0.0) for n in names] + [self.weights.get(INTERCEPT, 0.0)])


def watch_probability(records: PageRecords, weights: PageWeights, temperature: float) -> np.ndarray:
    """Per page, the agent's probability of watching with ``weights``."""
    with torch.no_grad():
        return _probability(_tensors(records), torch.as_tensor(weights.vector()), temperature).numpy()


def _tensors(records: PageRecords) -> tuple[torch.Tensor, ...]:
    scores = torch.as_tensor(np.nan_to_num(records.scores), dtype=torch.float64)
    return scores, torch.as_tensor(records.eligible), torch.as_tensor(records.threshold, dtype=torch.float64)


def _probability(data: tuple[torch.Tensor, ...], theta: torch.Tensor, temperature: float, smooth: float = 0.0
                 ) -> torch.Tensor:  # fmt: skip
    """The watch probability; ``smooth`` > 0 replaces the page's max by ``smooth * logsumexp(c / smooth)`` minus
    its excess at ties (the fit's continuation: the max alone passes no gradient to the items it does not pick)."""
    scores, eligible, threshold = data
    choice = torch.where(eligible, scores @ theta[:-1] + theta[-1], torch.full_like(scores[..., 0], -1e9))
    if smooth > 0:
        width = torch.log(eligible.sum(dim=1).clamp(min=1).to(choice.dtype))
        best = smooth * (torch.logsumexp(choice / smooth, dim=1) - width)
    else:
        best = choice.max(dim=1).values
    return torch.sigmoid((best - threshold) / temperature)


def fit_page_weights(
    records: PageRecords,
    *,
    start: dict[str, float],
    temperature: float,
    prior_terms: Collection[str],
    rank_rows: np.ndarray,
    rank_weight: float = 1.0,
    steps: int = 500,
) -> PageWeights:
    """The weights (see the module docstring) from ``start`` (the agents' config weights); ``rank_rows``: the
    recommender indices (into ``records.names``) whose mean watch probability is brought to their real hit rate."""
    torch.manual_seed(0)
    data = _tensors(records)
    hit = torch.as_tensor(records.hit, dtype=torch.float64)
    names = (*PARTS, *FEATURES)
    theta = torch.tensor([start.get(n, 0.0) for n in names] + [start.get(INTERCEPT, 0.0)], dtype=torch.float64)
    unknown = sorted(set(prior_terms) - set(FEATURES))
    if unknown:
        raise ValueError(f"prior_terms: unknown {unknown} (known: {list(FEATURES)})")
    free = torch.tensor([0.0 if n in FEATURES and n not in prior_terms else 1.0 for n in names] + [1.0],
                        dtype=torch.float64)  # fmt: skip
    theta = theta * free
    theta.requires_grad_(True)
    rows = [torch.as_tensor(records.recommender == r) for r in rank_rows]
    rows = [m for m in rows if bool(m.any())]
    real = torch.stack([hit[m].mean() for m in rows]) if rows else torch.zeros(0, dtype=torch.float64)
    scale = max(float(real.var()), MIN_SCALE) if len(rows) > 1 else 1.0

    def loss_of(t: torch.Tensor, smooth: float = 0.0) -> torch.Tensor:
        p = _probability(data, t, temperature, smooth).clamp(1e-6, 1 - 1e-6)
        nll = torch.nn.functional.binary_cross_entropy(p, hit)
        rank = torch.stack([p[m].mean() for m in rows]) if rows else real
        return nll + rank_weight * ((rank - real) ** 2).mean() / scale + RIDGE * (t[:-1] ** 2).sum()

    for smooth in SMOOTHING:  # from a smooth page maximum to the decision's own
        optimiser = torch.optim.LBFGS([theta], lr=1.0, max_iter=steps, line_search_fn="strong_wolfe",
                                      tolerance_grad=1e-9, tolerance_change=1e-12)  # fmt: skip

        def closure(smooth: float = smooth, optimiser: torch.optim.LBFGS = optimiser) -> torch.Tensor:
            optimiser.zero_grad()
            loss = loss_of(theta * free, smooth)
            loss.backward()
            theta.grad = theta.grad * free  # type: ignore[operator]
            return loss

        optimiser.step(closure)
    final = (theta * free).detach()
    weights = {n: float(v) for n, v in zip(names, final[:-1].tolist(), strict=True)}
    weights[INTERCEPT] = float(final[-1])
    with torch.no_grad():
        return PageWeights(weights, float(loss_of(final)))
