"""The agreement report's headline: per sampler and user model, the agreement over the recommenders that read only
the history, in the real side's unit, against the real ranking's own split-half ceiling; the oracle sanity rows;
and the response to real items.

- **Unit.** The real side is the replayed users' hit per page (their watches per page: they never leave). The
  simulated side is read as reward per page shown (``per_page``: a simulated user who leaves early is not counted
  as watching nothing on pages it never saw) and, with no session length at all, as the first page's reward
  (``first_page``); the session return is the third reading.
- **Agreement.** :func:`~.pairs.sign_agreement` on the pairs the real users separate, and Kendall tau-b over all
  pairs, each beside its split-half ceiling and as a share of it.
- **Sanity.** Every user model must put the future oracle above random and the anti-oracle below it (paired
  differences of reward per page, intervals over users).
- **Response to real items.** Per user, the reward on pages holding a real future item minus on pages without,
  pooled over the history recommenders (the replayed real users: 1 minus 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from recagent_gym.runs.config.evaluation_section import AGREEMENT_RECOMMENDERS
from recagent_gym.runs.evaluation.agreement.pairs import (
    SignAgreement,
    paired,
    real_item_response,
    sign_agreement,
    sign_ceiling,
)
from recagent_gym.runs.evaluation.agreement.run import REAL
from recagent_gym.runs.evaluation.agreement.stats import ORACLE_ROWS, Agreement, rank_agreement, split_half
from recagent_gym.runs.metrics import Estimate

READINGS: tuple[str, ...] = ("per_page", "first_page", "returns")
"""The simulated side's readings, headline first."""


def history_rows(recommenders: list[str]) -> list[str]:
    """The zoo's recommenders that read only the history (no oracle, no trained policy, no swapped row)."""
    return [r for r in recommenders if r in AGREEMENT_RECOMMENDERS and r not in ORACLE_ROWS]


@dataclass
class HeadlineRow:
    sampler: str
    user_model: str
    sign: dict[str, SignAgreement]
    tau: dict[str, Agreement]
    oracle_over_random: Estimate | None
    anti_under_random: Estimate | None
    response: Estimate


def compute(run: Any, *, n_boot: int = 1000) -> tuple[dict[str, tuple[SignAgreement, Agreement]], list[HeadlineRow]]:
    """``(ceilings per sampler, rows)`` of an :class:`~.evaluate.AgreementRun` (empty with fewer than three history
    recommenders)."""
    if len(history_rows(run.recommenders)) < 3:
        return {}, []
    names = history_rows(run.recommenders)
    seed = run.settings["seed"]
    ceilings: dict[str, tuple[SignAgreement, Agreement]] = {}
    rows: list[HeadlineRow] = []
    for s, sampler in enumerate(run.samplers):
        real = {r: run.arm(sampler, REAL, r).hit for r in names}
        ceilings[sampler] = (sign_ceiling(real, names, n_splits=n_boot, seed=seed + 7 * s),
                             split_half(real, n_splits=n_boot, seed=seed + 7 * s))  # fmt: skip
        for model in run.user_models:
            if model == REAL:
                continue
            arms = {r: run.arm(sampler, model, r) for r in run.recommenders}
            sign = {k: sign_agreement(real, {r: getattr(arms[r], k) for r in names}, names, n_boot=n_boot,
                                      seed=seed + 7 * s) for k in READINGS}  # fmt: skip
            tau = {k: rank_agreement(real, {r: getattr(arms[r], k) for r in names}, n_boot=n_boot, seed=seed + 7 * s)
                   for k in READINGS}  # fmt: skip
            anchor = arms.get("random")
            over = under = None
            if anchor is not None and "oracle" in arms:
                over = paired(arms["oracle"].per_page, anchor.per_page, n_boot=n_boot, seed=seed)
            if anchor is not None and "anti-oracle" in arms:
                under = paired(anchor.per_page, arms["anti-oracle"].per_page, n_boot=n_boot, seed=seed)
            dose = np.vstack([arms[r].dose for r in names])
            with_item, without = real_item_response(dose, len(run.users))
            rows.append(HeadlineRow(sampler, model, sign, tau, over, under,
                                    paired(with_item, without, n_boot=n_boot, seed=seed)))  # fmt: skip
    return ceilings, rows


def _ci(mean: float, low: float, high: float, digits: int = 2) -> str:
    if not math.isfinite(mean):
        return "–"
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _share_of(value: float, ceiling: float) -> str:
    return f"{value / ceiling:.2f}" if math.isfinite(value) and math.isfinite(ceiling) and ceiling > 0 else "–"


def _sanity(d: Estimate | None) -> str:
    if d is None:
        return "–"
    verdict = "yes" if d.low > 0 else ("no" if d.high < 0 else "not separable")
    return f"{verdict}: {d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"


Headline = tuple[dict[str, tuple[SignAgreement, Agreement]], list[HeadlineRow]]


def markdown(run: Any, headline: Headline) -> list[str]:
    """The headline section's lines (none with fewer than three history recommenders)."""
    names = history_rows(run.recommenders)
    if len(names) < 3:
        return []
    ceilings, rows = headline
    lines = [
        f"## Headline: agreement over the {len(names)} history recommenders", "",
        f"Over {', '.join(names)} (the recommenders that read only the history; the oracles are sanity rows). "
        "`pairs agreeing`: of the pairs of recommenders the real users separate (paired 95% interval of the "
        "difference of their hit per page excludes zero), the share the user model orders the same way by reward "
        "per page shown (a tie counts half); `tau-b`: Kendall tau-b over all pairs, by reward per page shown / by "
        "the first page's reward / by session return. Each beside `of ceiling`: the value divided by the real "
        "ranking's own split-half reproducibility (first rows). `oracle > random`, `random > anti-oracle`: paired "
        "differences of reward per page. `real item response`: reward on pages holding a real future item minus on "
        "pages without, per user, pooled over the history recommenders (the replayed users: 1.0). 95% intervals "
        "over users.", "",
        "| negatives | user model | pairs agreeing (of ceiling) | tau-b per page (of ceiling) | tau-b first page "
        "| tau-b return | oracle > random | random > anti-oracle | real item response |",
        "|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for sampler, (sign, tau) in ceilings.items():
        lines.append(f"| {sampler} | real, split halves ({tau.n_users} + {tau.n_users} users; {sign.pairs} pairs "
                     f"separated) | {_ci(sign.share, sign.low, sign.high)} | {_ci(tau.tau, tau.tau_low, tau.tau_high)} "
                     "| – | – | – | – | 1.00 |")  # fmt: skip
        for row in (r for r in rows if r.sampler == sampler):
            sa, ta = row.sign["per_page"], row.tau["per_page"]
            tf, tr = row.tau["first_page"], row.tau["returns"]
            share = _share_of(sa.share, sign.share)
            lines.append(
                f"| {sampler} | {row.user_model} | {_ci(sa.share, sa.low, sa.high)} ({share}) "
                f"| {_ci(ta.tau, ta.tau_low, ta.tau_high)} ({_share_of(ta.tau, tau.tau)}) | "
                f"{_ci(tf.tau, tf.tau_low, tf.tau_high)} | {_ci(tr.tau, tr.tau_low, tr.tau_high)} | "
                f"{_sanity(row.oracle_over_random)} | {_sanity(row.anti_under_random)} | "
                f"{_ci(row.response.mean, row.response.low, row.response.high, 3)} |"
            )
    return [*lines, ""]


def csv_rows(headline: Headline) -> list[dict[str, Any]]:
    """One row per sampler and user model (the real split-half rows first) for ``headline.csv``."""
    ceilings, rows = headline
    out: list[dict[str, Any]] = []
    for sampler, (sign, tau) in ceilings.items():
        out.append({"sampler": sampler, "user_model": "real, split halves", "pairs_separated": sign.pairs,
                    "pairs_agreeing": sign.share, "pairs_low": sign.low, "pairs_high": sign.high,
                    "tau_per_page": tau.tau, "tau_low": tau.tau_low, "tau_high": tau.tau_high})  # fmt: skip
    for row in rows:
        sa, ta = row.sign["per_page"], row.tau["per_page"]
        sign, tau = ceilings[row.sampler]
        out.append({
            "sampler": row.sampler, "user_model": row.user_model, "pairs_separated": sa.pairs,
            "pairs_agreeing": sa.share, "pairs_low": sa.low, "pairs_high": sa.high,
            "pairs_of_ceiling": sa.share / sign.share if sign.share else math.nan,
            "tau_per_page": ta.tau, "tau_low": ta.tau_low, "tau_high": ta.tau_high,
            "tau_of_ceiling": ta.tau / tau.tau if tau.tau else math.nan,
            "tau_first_page": row.tau["first_page"].tau, "tau_return": row.tau["returns"].tau,
            "oracle_minus_random": getattr(row.oracle_over_random, "mean", math.nan),
            "random_minus_anti_oracle": getattr(row.anti_under_random, "mean", math.nan),
            "real_item_response": row.response.mean, "response_low": row.response.low,
            "response_high": row.response.high, "users": row.response.n,
        })  # fmt: skip
    return out
