"""Sim2real: the real offline metric of recommenders and trained policies beside their simulated return.

``users transfer`` and ``evaluate rl-comparison`` report, per recommender, the agreement test's real side
(:mod:`recagent_gym.runs.evaluation.agreement`): the same held-out users' real future items in pools of RecAgent-v1's
size with uniform negatives (``evaluation.sim2real_negatives``), the real users replayed, and the share of the pages
the recommender chose that hold one of the user's real future items (hit@k per page: the replayed users' watches per
page, the real counterpart of a simulated return). A policy that wins in the simulator but not here has learned the
simulator, not the people.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.runs.config import Config
from recagent_gym.runs.metrics import Estimate, summarize

logger = logging.getLogger(__name__)

REAL_METRIC = "hit"


@dataclass(frozen=True)
class RealMetric:
    """A recommender's real hit rate (hit@k per page) over held-out users, with its 95% interval."""

    estimate: Estimate
    per_user: np.ndarray
    users: np.ndarray
    """The users ``per_user`` is over, in its order."""
    swapped_drop: Estimate | None = None
    """The hit rate lost with another held-out user's encoding, paired over users (rows run ``swapped`` only)."""


def real_metrics(
    config: Config,
    dataset: Dataset,
    users: Sequence[int],
    *,
    baselines: Mapping[str, str],
    policies: Mapping[str, Sequence[Path]] | None = None,
    ready: Mapping[str, Sequence[Any]] | None = None,
    item_features: tuple[np.ndarray, str] | Callable[[Dataset], tuple[np.ndarray, str]] | None = None,
    swapped: Sequence[str] = (),
    out: Path,
) -> dict[str, RealMetric]:
    """``{row name: RealMetric}`` for ``baselines`` (row name -> zoo name), ``policies`` and ``ready`` recommenders,
    on ``users`` (those with enough history; the same users for every row). Pools hold ``train.n_candidates``
    items (the policies' K), of which at most a fifth are the user's future; ``{}`` (and a log line) when no two
    users have the history for it. ``swapped`` rows also play on another user's encoding (the personalisation
    check's real counterpart, ``evaluation.agreement_swapped``)."""
    from recagent_gym.runs.evaluation.agreement.evaluate import run_agreement
    from recagent_gym.runs.evaluation.agreement.run import REAL
    from recagent_gym.runs.evaluation.agreement.zoo import SWAPPED

    cfg = config.model_copy(deep=True)
    ev = cfg.evaluation
    ev.agreement_user_models = []
    ev.agreement_recommenders = list(dict.fromkeys(baselines.values()))  # type: ignore[arg-type]
    zoo_of = {**baselines, **{n: n for n in (policies or {})}, **{n: n for n in (ready or {})}}
    ev.agreement_swapped = list(dict.fromkeys(zoo_of[row] for row in swapped if row in zoo_of))
    sampler = ev.negatives = ev.sim2real_negatives
    ev.agreement_users = max(len(users), 2)
    ev.agreement_pool = cfg.train.n_candidates
    ev.agreement_future = max(1, min(ev.agreement_future, cfg.train.n_candidates // 5))
    # Features built on the whole dataset count the held-out users' future interactions (popularity, quality, the
    # distilled item table's inputs). For the distilled item table the agreement test builds them on the history:
    # the model re-encoded there, its table projected in the shipped table's basis (what policies trained on).
    distilled = isinstance(item_features, tuple) and item_features[1] == "distilled_items"
    try:
        run = run_agreement(cfg, dataset, out=out, policies=policies, ready=ready, only_users=users,
                            item_features=None if distilled else item_features, distilled_features=distilled,
                            progress=False)  # fmt: skip
    except DataError as error:
        logger.warning("real offline metric skipped: %s", error)
        return {}
    named = {**{row: zoo for row, zoo in baselines.items()}, **{n: n for n in (policies or {})},
             **{n: n for n in (ready or {})}}  # fmt: skip
    out_metrics = {}
    for k, (row, zoo_name) in enumerate(named.items()):
        per_user = getattr(run.arm(sampler, REAL, zoo_name), REAL_METRIC)
        estimate = summarize(per_user, np.random.default_rng(ev.seed + k), bootstrap=1000)
        drop = None
        if zoo_name in ev.agreement_swapped:
            other = getattr(run.arm(sampler, REAL, zoo_name + SWAPPED), REAL_METRIC)
            drop = summarize(per_user - other, np.random.default_rng(ev.seed + k), bootstrap=1000)
        out_metrics[row] = RealMetric(estimate, per_user, np.asarray(run.users), drop)
    return out_metrics


def attach(rows: Sequence[Any], real: Mapping[str, RealMetric]) -> list[Any]:
    """Dataclass ``rows`` (with ``recommender``, ``real_hit``, ``real_ci_low``, ``real_ci_high``) with the real
    metric of their recommender where measured."""
    from dataclasses import replace

    out = []
    for row in rows:
        metric = real.get(row.recommender)
        if metric is not None:
            e = metric.estimate
            row = replace(row, real_hit=e.mean, real_ci_low=e.low, real_ci_high=e.high)
            if metric.swapped_drop is not None and hasattr(row, "real_swapped_drop"):
                d = metric.swapped_drop
                row = replace(row, real_swapped_drop=d.mean, real_swapped_ci_low=d.low, real_swapped_ci_high=d.high)
        out.append(row)
    return out
