"""Fit the behavioural prior's weights on train users' real choices (``recagent-gym calibrate``).

Protocol:

1. **Train users only.** The users every evaluation would sample with this seed (``sample_users`` at
   ``--exclude-users`` users, default 200, and 20) and the policy split's held-out users are set aside;
   ``--users`` calibration users are drawn from the rest. Their raw ids are stored with the weights, and every
   evaluation with the prior leaves them out of its users.
2. **Real choices.** Every user's last ``evaluation.agreement_future`` items (the agreement test's real future, and
   more than any discrimination setting holds out) are set aside first, for all users: no evaluated user's future
   reaches the fit, not even as another user's popularity. Of what is left, each calibration user's last item by
   time is held out (the rest is the training data, all users included) and shown among ``choice_negatives``
   never-interacted items, once with uniform and once with popularity-matched negatives (the evaluations'
   samplers), so that the weights must explain both.
3. **Scores.** The LLM agent's item score (LLM + embedding, the page decision's) of every candidate, one call per
   user; the prior's features (``users/agent/prior.py``).
4. **Fit.** A conditional logit: ``P(pick i) = softmax_i(w_llm * s_llm + features @ w)`` over each choice set,
   maximum likelihood with an L2 penalty ``l2 * |w|^2``; ``both`` fits all weights, ``prior_only`` the features'.
5. **The LLM's own share.** The agent's score is the LLM's item score plus the embedding relevance
   (``user.score_llm_weight``, ``user.score_embedding_weight``); the two are recorded apart and fitted apart too:
   ``parts`` (each its own weight, with the features), ``llm_score_only`` and ``embedding_only`` (one each, no
   features). Reported (``calibration.md``, ``prior.json``'s ``parts_fits``); ``user.prior_fit: parts`` makes the
   agents (and the evaluations' ``llm+prior-parts`` rows) use the ``parts`` fit.

The JSON (``prior.json``) holds ``both``, ``prior_only``, the calibration users, choice sets, log-likelihoods and
top-1 accuracy per fit, the dataset, seed and ``window_days``; ``user.prior_weights`` points the agents to it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize
from tqdm.auto import tqdm

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.data.splits import leave_last_out
from recagent_gym.runs.config.evaluation_section import NEGATIVE_SAMPLERS
from recagent_gym.runs.evaluation.discrimination import build_trials
from recagent_gym.runs.evaluation.scores_per_user import score_union
from recagent_gym.runs.evaluation.subjects import Resources, child_rng, history_counts, sample_users
from recagent_gym.users.agent.prior import FEATURES, LLM, BehaviouralPrior
from recagent_gym.users.prior_file import PARTS

logger = logging.getLogger(__name__)


EVALUATION_SIZES = (20,)
"""Sample sizes whose evaluation users are always set aside besides ``exclude`` (the paper's 20)."""


@dataclass
class ChoiceSet:
    """One real choice: the candidates' feature rows (first column the LLM score) and the chosen row."""

    x: np.ndarray
    chosen: int


@dataclass
class Fit:
    weights: dict[str, float]
    log_likelihood: float
    accuracy: float
    """Share of choice sets whose chosen item gets the highest score."""


@dataclass
class Calibration:
    dataset: str
    seed: int
    users_raw: list[str]
    choice_sets: int
    window_days: float
    l2: float
    both: Fit | None
    prior_only: Fit
    llm_only: Fit | None
    parts: dict[str, Fit] = field(default_factory=dict)
    """``parts``, ``llm_score_only``, ``embedding_only``: the LLM's score and the embedding term fitted apart."""
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "prior_only": self.prior_only.weights, "dataset": self.dataset, "seed": self.seed,
            "window_days": self.window_days, "l2": self.l2, "choice_sets": self.choice_sets,
            "users_raw": self.users_raw, "seconds": round(self.seconds, 1),
            "fit": {name: {"log_likelihood": f.log_likelihood, "accuracy": f.accuracy}
                    for name, f in (("both", self.both), ("prior_only", self.prior_only), ("llm_only", self.llm_only))
                    if f is not None},
            **self.extra,
        }  # fmt: skip
        if self.both is not None:
            data["both"] = self.both.weights
        if self.parts:
            data["parts_fits"] = {name: {"weights": f.weights, "log_likelihood": f.log_likelihood,
                                         "accuracy": f.accuracy} for name, f in self.parts.items()}  # fmt: skip
        return data

    def markdown(self) -> str:
        names = [LLM, *FEATURES]
        lines = [f"# Behavioural prior calibrated on {self.dataset}", "",
                 f"{len(self.users_raw)} train users (none of the evaluations' users at this seed, none of the "
                 "policy split's held-out users), "
                 f"{self.choice_sets} real choices (the held-out item among never-interacted ones, uniform and "
                 "popularity-matched negatives); conditional logit, L2 "
                 f"{self.l2}; window {self.window_days:g} days.", "",
                 "| fit | " + " | ".join(names) + " | log-likelihood | top-1 accuracy |",
                 "|---|" + "---|" * (len(names) + 2)]  # fmt: skip
        for name, fit in (("LLM only", self.llm_only), ("prior only", self.prior_only), ("both", self.both)):
            if fit is None:
                continue
            values = [f"{fit.weights[n]:+.3f}" if n in fit.weights else "–" for n in names]
            lines.append(f"| {name} | " + " | ".join(values) + f" | {fit.log_likelihood:.1f} | {fit.accuracy:.3f} |")
        if self.parts:
            names = [*PARTS, *FEATURES]
            lines += ["", "The agent's score taken apart (the LLM's item score and the embedding term, each its own "
                      "weight; `--set user.prior_fit=parts` uses the first):", "",
                      "| fit | " + " | ".join(names) + " | log-likelihood | top-1 accuracy |",
                      "|---|" + "---|" * (len(names) + 2)]  # fmt: skip
            for name, fit in self.parts.items():
                values = [f"{fit.weights[n]:+.3f}" if n in fit.weights else "–" for n in names]
                lines.append(f"| {name} | " + " | ".join(values) +
                             f" | {fit.log_likelihood:.1f} | {fit.accuracy:.3f} |")  # fmt: skip
        return "\n".join(lines) + f"\n\nWall time: {self.seconds:.1f} s.\n"


def fit_logit(sets: list[ChoiceSet], columns: list[int], names: list[str], l2: float) -> Fit:
    """Maximum-likelihood conditional logit on ``columns`` of the choice sets' rows (L2 penalty ``l2``)."""

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        total, grad = l2 * float(w @ w), 2 * l2 * w
        for s in sets:
            x = s.x[:, columns]
            u = x @ w
            p = np.exp(u - u.max())
            p /= p.sum()
            total -= float(np.log(max(p[s.chosen], 1e-300)))
            grad = grad - (x[s.chosen] - p @ x)
        return total, grad

    result = minimize(loss, np.zeros(len(columns)), jac=True, method="L-BFGS-B")
    w = result.x
    hits = [int(np.argmax(s.x[:, columns] @ w) == s.chosen) for s in sets]
    penalty = l2 * float(w @ w)
    return Fit(dict(zip(names, (float(v) for v in w), strict=True)), -(float(result.fun) - penalty),
               float(np.mean(hits)) if hits else float("nan"))  # fmt: skip


def evaluated_users(full: Dataset, config: Any, exclude: int = 200) -> set[int]:
    """The users a default evaluation at ``config``'s seed evaluates: the per-item evaluations' samples (sizes
    ``exclude`` and 20) and the policy split's held-out users (``train.split_seed``, ``train.test_fraction``: the RL
    comparisons' and the quickstart's). A shipped fit leaves them out."""
    from recagent_gym.runs.policies.protocol import split_users

    cfg, train = config.evaluation, config.train
    taken = {int(u) for u in split_users(full.n_users, test_fraction=train.test_fraction, seed=train.split_seed).test}
    for size in {exclude, *EVALUATION_SIZES}:
        taken.update(int(u) for u in sample_users(full, size, cfg.min_interactions, child_rng(cfg.seed, "users")))
    return taken


def calibration_users(resources: Resources, n: int, exclude: int) -> list[int]:
    """``n`` users with enough history that no evaluation at this seed samples (sizes ``exclude`` and 20), and none
    of the policy split's held-out users (``train.split_seed``, ``train.test_fraction``: the RL comparisons' and the
    quickstart's), so that a shipped calibration leaves every default evaluation's users unfitted."""
    full, cfg = resources.dataset, resources.eval
    taken = evaluated_users(full, resources.config, exclude)
    eligible = [int(u) for u in np.flatnonzero(history_counts(full) >= cfg.min_interactions) if int(u) not in taken]
    if not eligible:
        raise DataError(f"{full.name}: no user with enough history is left for calibration after the evaluations'")
    rng = child_rng(cfg.seed, "calibration-users")
    return sorted(int(u) for u in rng.choice(eligible, size=min(n, len(eligible)), replace=False))


def run_calibration(
    resources: Resources,
    *,
    users: int = 40,
    exclude: int = 200,
    negatives: int = 9,
    use_llm: bool = True,
    window_days: float = 180.0,
    l2: float = 0.01,
    progress: bool = True,
) -> Calibration:
    """Fit the prior's weights (see the module docstring)."""
    started = time.perf_counter()
    full, cfg = resources.dataset, resources.eval
    before_futures = leave_last_out(full, cfg.agreement_future, min_train=cfg.min_interactions).train
    split = leave_last_out(before_futures, 1, min_train=cfg.min_interactions - 1)
    chosen_users = [u for u in calibration_users(resources, users, exclude) if u in split.held_out]
    if not chosen_users:
        raise DataError(f"{full.name}: no calibration user keeps {cfg.min_interactions} items before the evaluated "
                        f"futures (the last {cfg.agreement_future} of every user)")  # fmt: skip
    held = {1: {u: split.held_out[u] for u in chosen_users}}
    samplers = list(NEGATIVE_SAMPLERS)
    trials, _ = build_trials(full, chosen_users, held, [(1, negatives)], samplers, cfg.seed, cfg.popularity_bands)
    prior = BehaviouralPrior(split.train, window_days=window_days)
    model = resources.build("llm", split.train) if use_llm else None
    parts = _Parts(model) if model is not None else None
    sets: list[ChoiceSet] = []
    for index in tqdm(range(len(chosen_users)), desc="calibrate", unit="user", disable=not progress):
        group = [trials[(s, 1, negatives)][index] for s in samplers]
        user = group[0].user
        if model is not None:
            rng = child_rng(cfg.seed, "calibrate-score", user)
            scores = score_union(parts, user, [t.candidates for t in group], rng, label="LLM agent")
        else:
            scores = [np.zeros(len(t.candidates)) for t in group]
        for trial, llm in zip(group, scores, strict=True):
            apart = parts.of(trial.candidates) if parts is not None else np.zeros((len(trial.candidates), 2))
            x = np.column_stack([llm, prior.features(user, trial.candidates), apart])
            sets.append(ChoiceSet(x, trial.candidates.index(trial.truth[0])))
    features = list(range(1, 1 + len(FEATURES)))
    prior_only = fit_logit(sets, features, list(FEATURES), l2)
    both = fit_logit(sets, [0, *features], [LLM, *FEATURES], l2) if use_llm else None
    llm_only = fit_logit(sets, [0], [LLM], l2) if use_llm else None
    first = 1 + len(FEATURES)  # the LLM's score and the embedding term, after the features
    split_fits = {
        "parts": fit_logit(sets, [first, first + 1, *features], [*PARTS, *FEATURES], l2),
        "llm_score_only": fit_logit(sets, [first], [PARTS[0]], l2),
        "embedding_only": fit_logit(sets, [first + 1], [PARTS[1]], l2),
    } if use_llm else {}  # fmt: skip
    raw = full.users["raw_id"].astype(str).to_numpy()
    result = Calibration(
        dataset=full.name, seed=cfg.seed, users_raw=[str(raw[u]) for u in chosen_users], choice_sets=len(sets),
        window_days=window_days, l2=l2, both=both, prior_only=prior_only, llm_only=llm_only, parts=split_fits,
        seconds=time.perf_counter() - started,
        extra={**(_settings(resources) if use_llm else {}), "futures_set_aside": cfg.agreement_future},
    )  # fmt: skip
    logger.info("calibrated the prior on %d users (%d choice sets) in %.1fs", len(chosen_users), len(sets),
                result.seconds)  # fmt: skip
    return result


def _settings(resources: Resources) -> dict[str, Any]:
    """What the weights are valid for: the LLM, the item score it was fitted with, the dataset's size."""
    return {"llm": resources.language_model().name, "llm_item_score": resources.config.user.llm_item_score,
            "n_users": resources.dataset.n_users, "n_items": resources.dataset.n_items}  # fmt: skip


class _Parts:
    """The agent's ``score_items`` (its combined score, for :func:`score_union`), keeping the LLM's score and the
    embedding term of every item of the same call apart."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._apart: dict[int, tuple[float, float]] = {}

    def score_items(self, user: int, items: Any, rng: np.random.Generator) -> np.ndarray:
        llm, embedding = self.model.score_components(user, items, rng)
        llm = np.nan_to_num(np.asarray(llm, dtype=np.float64))
        self._apart.update({int(i): (float(a), float(b)) for i, a, b in zip(items, llm, embedding, strict=True)})
        return self.model.combine(llm, np.asarray(embedding, dtype=np.float64))

    def of(self, items: Any) -> np.ndarray:
        return np.array([self._apart[int(i)] for i in items], dtype=np.float64)


def write_calibration(result: Calibration, out: str | Path) -> dict[str, Path]:
    """``prior.json`` (the weights file for ``user.prior_weights``) and ``calibration.md`` in ``out``."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"prior.json": folder / "prior.json", "calibration.md": folder / "calibration.md"}
    paths["prior.json"].write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    paths["calibration.md"].write_text(result.markdown(), encoding="utf-8")
    return paths
