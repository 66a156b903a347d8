"""Rating prediction: RMSE of each model's rating of a user's held-out items against the user's real rating.

Protocol (the discrimination machinery: same users, negatives, samplers, donors, paired differences):

1. Each sampled user's last ``evaluation.rating_held_out`` items by time are held out (their real ratings are the
   truth; users whose held-out items carry no rating are skipped, counted); models are built on the rest.
2. The held-out items are scored together with ``evaluation.rating_negatives`` never-interacted items (uniform or
   popularity-matched, as in discrimination).
3. **Rating = rank on the user's own scale**: a held-out item ranked at fraction ``q`` from the top of these
   candidates gets the ``1 - q`` quantile of the user's training ratings. The user models here give preference
   scores, not ratings of unseen items, so this measures how well the taste ranking lands on the user's scale;
   the LLM agent's own post-watch rating prompt is not used (it needs a watched item and a feeling).
   Known weakness, measured (bundled data, 200 users, ``evaluate rating --users 200``): for the classical models
   this reading is worse than the user-mean floor (RMSE 1.41-1.52 against 1.03), because a model that ranks
   watched items above unwatched negatives places them on the user's top ratings while real ratings of watched
   items spread; a rating head (the agent's rating prompt on unseen items) is the fix, in ``users/agent``.
4. Per user the mean squared error over its held-out items; RMSE = the square root of the mean over users (equal
   item counts, so the RMSE over all pairs), its interval the square root of the bootstrap interval of the mean
   squared error (percentile intervals follow monotone transforms).

Rows: **User mean** (each user's mean training rating, no ranking: the classical floor), **Popularity** (the
popularity ranking through the same mapping), each user model; paired differences of per-user squared error to
Embedding and Popularity (negative: lower error); personalization check: the model rebuilt with each user's
history replaced by another user's, mapped onto the swapped history's scale. Anchors beside the table are RMSE
**as reported by those papers** (Agent4Rec 0.76, SimUSER 0.50), on their own samples, with a rating prompt.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.data.splits import leave_last_out
from recagent_gym.runs.config.evaluation_section import NEGATIVE_SAMPLERS
from recagent_gym.runs.evaluation.discrimination import Trial, _build, _candidates_of, build_trials
from recagent_gym.runs.evaluation.discrimination_table import MODEL_LABELS, POPULARITY, Cell, add_paired_differences
from recagent_gym.runs.evaluation.distilled_row import left_out_why, llm_fit_file, without_fitted_users
from recagent_gym.runs.evaluation.prior_ablation import (
    prior_lines,
    prior_record,
    score_kind,
)
from recagent_gym.runs.evaluation.scores_per_user import score_union
from recagent_gym.runs.evaluation.subjects import Resources, child_rng, pick_donors, sample_users, swap_histories
from recagent_gym.runs.metrics import Estimate, summarize

logger = logging.getLogger(__name__)

USER_MEAN = "user-mean"
ANCHORS: dict[str, float] = {"Agent4Rec": 0.76, "SimUSER": 0.50}
"""RMSE as reported by those papers (their samples, their rating prompts); not measured here."""


def user_ratings(train: Dataset, user: int) -> np.ndarray:
    """The user's known training ratings (NaN dropped)."""
    inter = train.interactions
    values = inter.loc[inter["user_id"] == user, "rating"].to_numpy(dtype=np.float64)
    return values[np.isfinite(values)]


def ranks_to_ratings(scores: np.ndarray, positions: list[int], scale: np.ndarray) -> np.ndarray:
    """Ratings of the candidates at ``positions``: rank among ``scores`` (ties share their mean rank) read on the
    user's rating ``scale`` (best rank -> highest quantile)."""
    order = np.argsort(np.argsort(-scores, kind="stable"), kind="stable").astype(np.float64)
    for value in np.unique(scores):  # ties: the mean rank, so a constant scorer lands on the median
        tied = scores == value
        order[tied] = order[tied].mean()
    fraction = order[positions] / max(len(scores) - 1, 1)
    return np.quantile(scale, 1.0 - fraction)


def rmse(mse: Estimate) -> Estimate:
    """RMSE from an estimate of the mean squared error (delta-method standard error)."""
    root = float(np.sqrt(mse.mean))
    stderr = mse.stderr / (2 * root) if root > 0 else float("nan")
    return Estimate(root, stderr, float(np.sqrt(max(mse.low, 0.0))), float(np.sqrt(max(mse.high, 0.0))), mse.n)


@dataclass
class RatingResult:
    dataset: str
    users: list[int]
    samplers: list[str]
    models: list[str]
    labels: dict[str, str]
    cells: list[Cell]
    """``Cell.hit_rate`` holds the mean squared error estimate, ``per_user`` each user's squared error."""
    held_out: int
    negatives: int
    skipped: int = 0
    usage: str = ""
    seconds: float = 0.0
    build_seconds: dict[str, float] = field(default_factory=dict)
    prior: dict[str, Any] = field(default_factory=dict)
    """The behavioural prior's weights file content when a prior row ran (written as ``prior.json``)."""
    left_out: int = 0
    """Sampled users left out because the prior was calibrated on them or the distilled users were fitted on them."""
    left_out_why: str = ""

    def cell(self, model: str, sampler: str) -> Cell:
        return next(c for c in self.cells if (c.model, c.sampler) == (model, sampler))

    def rows(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for c in self.cells:
            r = rmse(c.hit_rate)
            row: dict[str, Any] = {"dataset": self.dataset, "sampler": c.sampler, "model": self.labels[c.model],
                                   "users": r.n, "rmse": r.mean, "rmse_stderr": r.stderr, "rmse_ci_low": r.low,
                                   "rmse_ci_high": r.high, "mse": c.hit_rate.mean}  # fmt: skip
            if c.swapped is not None:
                row["rmse_swapped"] = rmse(c.swapped).mean
            for ref, diff in c.versus.items():
                row.update({f"mse_diff_vs_{ref}": diff.mean, f"mse_diff_vs_{ref}_ci_low": diff.low,
                            f"mse_diff_vs_{ref}_ci_high": diff.high})  # fmt: skip
            out.append(row)
        for name, value in ANCHORS.items():
            out.append({"dataset": "as reported by the paper", "model": name, "rmse": value})
        return out

    def markdown(self) -> str:
        lines = [f"# Rating prediction on {self.dataset}", "",
                 f"{len(self.users)} users ({self.skipped} skipped: held-out items without ratings"
                 + (f"; {self.left_out} left out: {self.left_out_why}" if self.left_out else "") + "); each user's "
                 f"last {self.held_out} items scored among {self.negatives} never-interacted items, the rank read "
                 "on the user's own training rating scale. RMSE ± standard error [bootstrap 95% interval]; lower "
                 "is better.", "", "| model | " + " | ".join(self.samplers) + " |",
                 "|---|" + "---|" * len(self.samplers)]  # fmt: skip
        for model in self.models:
            values = [rmse(self.cell(model, s).hit_rate).format() for s in self.samplers]
            lines.append(f"| {self.labels[model]} | " + " | ".join(values) + " |")
        for name, value in ANCHORS.items():
            lines.append(f"| {name} (as reported by that paper) | " + " | ".join([f"{value:.2f}"] * 1) +
                         " | –" * (len(self.samplers) - 1) + " |")  # fmt: skip
        lines += [
            "",
            "Anchors are RMSE as reported by those papers (their samples, a rating prompt), not measured here.",
            "",
            "## Paired differences of squared error (negative: lower error)",
            "",
            "| model | vs | " + " | ".join(self.samplers) + " |",
            "|---|---|" + "---|" * len(self.samplers),
        ]
        for model in self.models:
            for ref in (r for r in ("embedding", POPULARITY, "llm") if r in self.models):
                cells = [self.cell(model, s) for s in self.samplers]
                if all(ref in c.versus for c in cells):
                    texts = [_diff(c.versus[ref]) for c in cells]
                    lines.append(f"| {self.labels[model]} | {self.labels[ref]} | " + " | ".join(texts) + " |")
        if any(c.swapped is not None for c in self.cells):
            lines += [
                "",
                "## Personalization check (RMSE → RMSE with another user's history)",
                "",
                "| model | " + " | ".join(self.samplers) + " |",
                "|---|" + "---|" * len(self.samplers),
            ]
            for model in self.models:
                cells = [self.cell(model, s) for s in self.samplers]
                if all(c.swapped is not None for c in cells):
                    texts = [f"{rmse(c.hit_rate).mean:.3f} → {rmse(c.swapped).mean:.3f}" for c in cells]  # type: ignore[arg-type]
                    lines.append(f"| {self.labels[model]} | " + " | ".join(texts) + " |")
        lines += ["", *prior_lines(self.prior), f"Wall time: {self.seconds:.1f} s."]
        if self.usage:
            lines += ["", self.usage]
        return "\n".join(lines) + "\n"

    def plot(self, path: Any) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from recagent_gym.runs.evaluation.report import _grouped_bars

        fig, ax = plt.subplots(figsize=(9, 4))
        series = {self.labels[m]: [rmse(self.cell(m, s).hit_rate) for s in self.samplers] for m in self.models}
        _grouped_bars(ax, [f"negatives: {s}" for s in self.samplers], series)
        for name, value in ANCHORS.items():
            ax.axhline(value, linestyle=":", color="black", linewidth=0.8)
            ax.text(-0.45, value, f"{name} (reported)", fontsize=7, va="bottom")
        ax.set_ylabel("RMSE (lower is better)")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.set_title(f"Rating prediction on {self.dataset} ({len(self.users)} users, 95% intervals)")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)


def _diff(diff: Estimate) -> str:
    star = "*" if diff.low > 0 or diff.high < 0 else ""
    return f"{diff.mean:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]{star}"


def _errors(scores: np.ndarray | None, train: Dataset, trial: Trial, truth: dict[int, float]) -> float:
    """The user's mean squared error over its held-out items from a model's ``scores`` of the trial's candidates
    (``None``: the user-mean floor)."""
    scale = user_ratings(train, trial.user)
    if len(scale) == 0:
        scale = np.array([np.nanmean(train.interactions["rating"].to_numpy(dtype=np.float64))])
    positions = [trial.candidates.index(t) for t in trial.truth]
    floor = np.full(len(positions), scale.mean())
    predicted = floor if scores is None else ranks_to_ratings(scores, positions, scale)
    actual = np.array([truth[t] for t in trial.truth])
    return float(np.mean((predicted - actual) ** 2))


def _user_scores(model: Any, group: list[Trial], kind: str, a: int, seed: int) -> list[np.ndarray | None]:
    """One model's scores of a user's trials (every sampler) from one call; ``None`` per trial without a model."""
    if model is None:
        return [None] * len(group)
    user = group[0].user
    rng = child_rng(seed, "score", score_kind(kind), a, user)
    return list(score_union(model, user, [t.candidates for t in group], rng, label=kind))


def run_rating(resources: Resources, *, progress: bool = True) -> RatingResult:
    """Run rating prediction for ``resources.eval.user_models`` (see the module docstring)."""
    started = time.perf_counter()
    cfg, full, seed = resources.eval, resources.dataset, resources.eval.seed
    a, b = cfg.rating_held_out, cfg.rating_negatives
    samplers = list(NEGATIVE_SAMPLERS) if cfg.negatives == "both" else [cfg.negatives]
    split = leave_last_out(full, a, min_train=cfg.min_interactions - a)
    drawn = [int(u) for u in sample_users(full, cfg.users, cfg.min_interactions, child_rng(seed, "users"))]
    sampled = len(drawn)
    drawn = without_fitted_users(resources, drawn)  # calibration, page-decision fit, distilled users: never evaluated
    inter = full.interactions[full.interactions["user_id"].isin(drawn)]
    known = inter.groupby(["user_id", "item_id"])["rating"].mean().to_dict()
    truth = {u: {i: float(known[(u, i)]) for i in split.held_out[u]} for u in drawn}
    users = [u for u in drawn if all(np.isfinite(v) for v in truth[u].values())]
    if not users:
        raise DataError(f"{full.name}: the held-out items of the sampled users carry no ratings (implicit data)")
    held = {a: {u: split.held_out[u] for u in users}}
    trials, _ = build_trials(full, users, held, [(a, b)], samplers, seed, cfg.popularity_bands)
    donors = (
        pick_donors(full, users, cfg.min_interactions, child_rng(seed, "donors")) if cfg.personalization_check else {}
    )
    swapped_train = swap_histories(split.train, donors, _candidates_of(trials, a, users)) if donors else None
    models = [USER_MEAN, POPULARITY, *cfg.user_models]
    shared: dict = {}
    labels = {**MODEL_LABELS, USER_MEAN: "User mean rating"}
    boot = dict(bootstrap=cfg.bootstrap_samples, confidence=cfg.confidence)
    cells: list[Cell] = []
    build_seconds: dict[str, float] = {}
    total = len(models) * len(samplers) * len(users)
    with tqdm(total=total, desc="rating", unit="user", disable=not progress) as bar:
        for kind in models:
            built = time.perf_counter()
            model = None if kind == USER_MEAN else _build(resources, kind, split.train, shared, (a, False))
            swapped = (
                None
                if kind == USER_MEAN or swapped_train is None
                else _build(resources, kind, swapped_train, shared, (a, True))
            )
            build_seconds[kind] = time.perf_counter() - built
            if (label := resources.row_label(kind, model)) is not None:
                labels[kind] = label
            errors: dict[str, list[float]] = {sampler: [] for sampler in samplers}
            swapped_errors: dict[str, list[float]] = {sampler: [] for sampler in samplers}
            start = time.perf_counter()
            for index in range(len(users)):
                group = [trials[(sampler, a, b)][index] for sampler in samplers]
                user_truth = truth[group[0].user]
                for sampler, trial, scores in zip(samplers, group, _user_scores(model, group, kind, a, seed),
                                                  strict=True):  # fmt: skip
                    errors[sampler].append(_errors(scores, split.train, trial, user_truth))
                if swapped is not None and swapped_train is not None:
                    for sampler, trial, scores in zip(samplers, group, _user_scores(swapped, group, kind, a, seed),
                                                      strict=True):  # fmt: skip
                        swapped_errors[sampler].append(_errors(scores, swapped_train, trial, user_truth))
                bar.update(len(samplers))
            elapsed = (time.perf_counter() - start) / len(samplers)
            for sampler in samplers:
                per_user = np.array(errors[sampler])
                boot_rng = child_rng(seed, "bootstrap-rating", kind, sampler)
                cell = Cell(kind, sampler, a, b, summarize(per_user, boot_rng, **boot), per_user.tolist(),
                            seconds=elapsed)  # fmt: skip
                if swapped_errors[sampler]:
                    swap_rng = child_rng(seed, "bootstrap-rating-swap", kind, sampler)
                    cell.swapped = summarize(swapped_errors[sampler], swap_rng, **boot)
                    cell.drop = summarize(per_user - np.array(swapped_errors[sampler]), None, bootstrap=0)
                cells.append(cell)
    add_paired_differences(cells, seed=seed, **boot)
    result = RatingResult(
        dataset=full.name, users=users, samplers=samplers, models=models, labels=labels, cells=cells, held_out=a,
        negatives=b, skipped=len(drawn) - len(users), usage=resources.usage_line(),
        seconds=time.perf_counter() - started, build_seconds=build_seconds,
        prior=prior_record(resources.calibration, models), left_out=sampled - len(drawn),
        left_out_why=left_out_why(cfg.user_models, llm_fit_file(resources)),
    )  # fmt: skip
    logger.info("rating on %s: %d users in %.1fs", full.name, len(users), result.seconds)
    return result
