"""Discrimination (a, b), the paper's Table 3, with a popularity control and a personalization check (issue 9).

Protocol, per setting ``(a, b)``:

1. ``users`` users with at least ``min_interactions`` interactions are drawn once (seeded) for all settings.
2. Each user's last ``a`` items by time are held out (:func:`recagent_gym.data.splits.leave_last_out`); every user
   model is built on the training part (everything else, all users included).
3. The ``a`` held-out items are mixed with ``b`` negatives the user never interacted with and shuffled (seeded).
   ``uniform`` negatives are drawn uniformly (the paper); ``popularity-matched`` negatives come from each held-out
   item's popularity band: items sorted by interaction count cut into ``popularity_bands`` equal-size bands
   (deciles by default), widening to the nearest band only when a band runs out (counted as ``widened``). With
   ``b`` not a multiple of ``a``, each positive gets ``b // a`` and the remainder goes to positives drawn at random.
4. A model's pick is its top-``a`` candidates by ``score_items`` (ties broken at random, never by position);
   ``p = mean_u |T ∩ S| / |T|`` with standard error and a bootstrap interval over users. Each model scores the
   union of a user's candidates over every sampler and ``b`` with the same ``a`` in one call (same scores as one
   call per trial, a quarter of the embedded model's calls: ``evaluation/scores_per_user.py``).
5. **Paired differences**: each model's per-user ``p`` minus Embedding's and minus Popularity's on the same users
   and candidates, with a bootstrap interval over users
   (:func:`~recagent_gym.runs.metrics.paired_difference`).
   An interval excluding 0 is a significant margin; at the paper's 20 users a margin of about 0.2 is needed at
   ``a = 1``, so ``--users 200`` is the setting for claims (20 stays the default, for comparability).

Rows: the random expectation ``a / (a + b)`` (its ± is the standard error of a random picker over these users),
**Popularity** (most interactions in the training data first; no user information), each user model, and the
paper's published rows for reference. **Personalization check**: every model is rebuilt on a training set where
each sampled user's history and profile are replaced by another random user's and scored on the same candidates;
the drop ``p - p_swapped`` (paired over users) is reported. A model whose score does not drop is not modelling the
user. The donor's interactions with any of the user's candidates (held-out items and negatives alike) are removed
from the swapped history: kept, a negative the donor watched would sit among the swapped model's few-shot "Yes"
examples, its score would beat the held-out item's and push ``p_swapped`` below chance, inflating the drop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from recagent_gym.data.schema import Dataset
from recagent_gym.data.splits import leave_last_out, sample_negatives, sample_negatives_popularity_matched
from recagent_gym.runs.config.evaluation_section import NEGATIVE_SAMPLERS
from recagent_gym.runs.evaluation.discrimination_table import (
    MODEL_LABELS,
    POPULARITY,
    RANDOM,
    Cell,
    DiscriminationResult,
    add_paired_differences,
)
from recagent_gym.runs.evaluation.distilled_row import left_out_why, llm_fit_file, without_fitted_users
from recagent_gym.runs.evaluation.prior_ablation import (
    LLM_PRIOR_KINDS,
    PRIOR_KINDS,
    Memo,
    build_prior_row,
    prior_record,
    score_kind,
)
from recagent_gym.runs.evaluation.scores_per_user import score_union
from recagent_gym.runs.evaluation.subjects import Resources, child_rng, pick_donors, sample_users, swap_histories
from recagent_gym.runs.metrics import DiscriminationHitRate, Estimate, summarize, top_k

logger = logging.getLogger(__name__)


class PopularityScorer:
    """Scores items by their interaction count in the training data: the same for every user."""

    def __init__(self, dataset: Dataset) -> None:
        self._popularity = dataset.item_popularity().astype(np.float64)

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        return self._popularity[np.asarray(items, dtype=np.int64)]


@dataclass(frozen=True)
class Trial:
    """One user's candidates for one setting and sampler (already shuffled)."""

    user: int
    truth: tuple[int, ...]
    candidates: tuple[int, ...]


def _random_row(a: int, b: int, n: int) -> Estimate:
    """A random picker's expected hit rate and, over ``n`` users, its standard error (hypergeometric hits)."""
    total = a + b
    hits_var = a * (a / total) * (b / total) * (b / max(total - 1, 1))
    stderr = float(np.sqrt(hits_var / a**2 / n))
    mean = a / total
    return Estimate(mean, stderr, max(mean - 1.96 * stderr, 0.0), min(mean + 1.96 * stderr, 1.0), n)


def _negatives(
    full: Dataset, user: int, truth: tuple[int, ...], b: int, sampler: str, rng: np.random.Generator, bands: int
) -> tuple[np.ndarray, int]:
    if sampler == "uniform":
        return sample_negatives(full, user, b, rng), 0
    a = len(truth)
    per = -(-b // a)
    sample = sample_negatives_popularity_matched(full, user, truth, per, rng, n_bands=bands)
    counts = np.full(a, b // a)
    counts[rng.choice(a, size=b % a, replace=False)] += 1
    picked = [rng.choice(sample.negatives[t], size=k, replace=False) for t, k in zip(truth, counts, strict=True)]
    return np.concatenate(picked).astype(np.int64), sample.widened


def build_trials(
    full: Dataset, users: Sequence[int], held_out: dict[int, dict[int, tuple[int, ...]]], settings, samplers,
    seed: int, bands: int,
) -> tuple[dict[tuple[str, int, int], list[Trial]], dict[str, int]]:  # fmt: skip
    """Candidates per (sampler, a, b): the held-out items plus negatives, shuffled with a seeded generator."""
    trials: dict[tuple[str, int, int], list[Trial]] = {}
    widened: dict[str, int] = {}
    for sampler in samplers:
        for a, b in settings:
            rows = []
            for user in users:
                truth = held_out[a][user]
                rng = child_rng(seed, "negatives", sampler, a, b, user)
                negatives, wide = _negatives(full, user, truth, b, sampler, rng, bands)
                if sampler != "uniform":
                    widened[f"({a},{b})"] = widened.get(f"({a},{b})", 0) + wide
                candidates = np.concatenate([np.asarray(truth, dtype=np.int64), negatives])
                rng.shuffle(candidates)
                rows.append(Trial(user, truth, tuple(int(i) for i in candidates)))
            trials[(sampler, a, b)] = rows
    return trials, widened


def _score_user(model: Any, group: Sequence[Trial], label: str, kind: str, a: int, seed: int) -> list[np.ndarray]:
    """The model's scores of one user's trials holding out ``a`` (every sampler and ``b``), from one call.

    The scoring generator depends on the model, ``a`` and the user only, not on the sampler or ``b``: the user's
    few-shot examples are the same in every setting with the same history, so one call over the union of the
    candidates gives each trial the scores it would get alone (:mod:`~recagent_gym.runs.evaluation.scores_per_user`).
    """
    user = group[0].user
    rng = child_rng(seed, "score", score_kind(kind), a, user)
    return score_union(model, user, [t.candidates for t in group], rng, label=label)


def _pick(scores: np.ndarray, trial: Trial, key: tuple, seed: int) -> list[int]:
    """The top-``a`` candidates of one trial (ties broken by a generator of the trial, never by position)."""
    pick = top_k(scores, len(trial.truth), child_rng(seed, "pick", *key, trial.user))
    return [trial.candidates[i] for i in pick]


def run_discrimination(
    resources: Resources,
    *,
    progress: bool = True,
    settings: Sequence[tuple[int, int]] | None = None,
    desc: str = "discrimination",
) -> DiscriminationResult:
    """Run the discrimination test for ``resources.eval.user_models`` (see the module docstring).

    ``settings`` replaces ``evaluation.settings`` (the 1:m preference test runs ``(a, m * a)``); users, negatives and
    donors are drawn as always, so the same seed gives the same users whatever the settings.
    """
    started = time.perf_counter()
    cfg = resources.eval
    full = resources.dataset
    seed = cfg.seed
    settings = [(int(a), int(b)) for a, b in (cfg.settings if settings is None else settings)]
    if max(a for a, _ in settings) >= cfg.min_interactions:
        raise ValueError(f"min_interactions ({cfg.min_interactions}) must exceed every held-out size a ({settings})")
    samplers = list(NEGATIVE_SAMPLERS) if cfg.negatives == "both" else [cfg.negatives]
    a_values = sorted({a for a, _ in settings})
    min_count = cfg.min_interactions
    users = [int(u) for u in sample_users(full, cfg.users, min_count, child_rng(seed, "users"))]
    drawn = len(users)
    users = without_fitted_users(resources, users)  # calibration, page-decision fit, distilled users: never evaluated
    splits = {a: leave_last_out(full, a, min_train=min_count - a) for a in a_values}
    held_out = {a: {u: splits[a].held_out[u] for u in users} for a in a_values}
    trials, widened = build_trials(full, users, held_out, settings, samplers, seed, cfg.popularity_bands)
    donors = pick_donors(full, users, min_count, child_rng(seed, "donors")) if cfg.personalization_check else {}

    models = [RANDOM, POPULARITY, *cfg.user_models]
    labels = dict(MODEL_LABELS)
    shared: dict[tuple[int, bool], Memo] = {}
    cells: list[Cell] = []
    for sampler in samplers:
        for a, b in settings:
            cells.append(Cell(RANDOM, sampler, a, b, _random_row(a, b, len(users)), []))
    build_seconds: dict[str, float] = {}
    runs = 2 if donors else 1
    metric = DiscriminationHitRate()
    total = (len(models) - 1) * runs * len(samplers) * len(settings) * len(users)
    with tqdm(total=total, desc=desc, unit="user", disable=not progress) as bar:
        for kind in models[1:]:
            for a in a_values:
                bar.set_postfix_str(f"{kind}, a={a}: building")
                built = time.perf_counter()
                model = _build(resources, kind, splits[a].train, shared, (a, False))
                if (label := resources.row_label(kind, model)) is not None:
                    labels[kind] = label
                swapped_model = None
                if donors:
                    swapped_train = swap_histories(splits[a].train, donors, _candidates_of(trials, a, users))
                    swapped_model = _build(resources, kind, swapped_train, shared, (a, True))
                build_seconds[kind] = build_seconds.get(kind, 0.0) + time.perf_counter() - built
                bar.set_postfix_str(f"{kind}, a={a}")
                keys = [(sampler, b) for sampler in samplers for b in [b for aa, b in settings if aa == a]]
                picks: dict[tuple[str, int], list[list[int]]] = {k: [] for k in keys}
                swapped_picks: dict[tuple[str, int], list[list[int]]] = {k: [] for k in keys}
                seconds = dict.fromkeys(keys, 0.0)
                for index in range(len(users)):  # user by user: each history's prompt prefix stays resident
                    start = time.perf_counter()
                    group = [trials[(sampler, a, b)][index] for sampler, b in keys]
                    variants = [(model, picks), (swapped_model, swapped_picks)]
                    for scorer, store in [(m, st) for m, st in variants if m is not None]:
                        scored = _score_user(scorer, group, labels[kind], kind, a, seed)
                        for (sampler, b), trial, scores in zip(keys, group, scored, strict=True):
                            store[(sampler, b)].append(_pick(scores, trial, (kind, sampler, a, b), seed))
                    elapsed = time.perf_counter() - start
                    size = sum(len(t.candidates) for t in group)
                    for (sampler, b), trial in zip(keys, group, strict=True):  # shared call: by candidates
                        seconds[(sampler, b)] += elapsed * len(trial.candidates) / size
                    bar.update(runs * len(keys))
                for sampler, b in keys:
                    key = (kind, sampler, a, b)
                    truths = [t.truth for t in trials[(sampler, a, b)]]
                    per_user = metric.per_user(truths, picks[(sampler, b)])
                    estimate = summarize(per_user, child_rng(seed, "bootstrap", *key),
                                         bootstrap=cfg.bootstrap_samples, confidence=cfg.confidence)  # fmt: skip
                    cell = Cell(kind, sampler, a, b, estimate, per_user.tolist(), seconds=seconds[(sampler, b)])
                    if swapped_model is not None:
                        swapped = metric.per_user(truths, swapped_picks[(sampler, b)])
                        boot = dict(bootstrap=cfg.bootstrap_samples, confidence=cfg.confidence)
                        cell.swapped = summarize(swapped, child_rng(seed, "bootstrap-swap", *key), **boot)
                        cell.drop = summarize(per_user - swapped, child_rng(seed, "bootstrap-drop", *key), **boot)
                    cells.append(cell)
    add_paired_differences(cells, seed=seed, bootstrap=cfg.bootstrap_samples, confidence=cfg.confidence)
    result = DiscriminationResult(
        dataset=full.name, users=users, settings=settings, samplers=samplers, models=models, labels=labels,
        cells=cells, donors=donors, widened=widened, build_seconds=build_seconds, usage=resources.usage_line(),
        seconds=time.perf_counter() - started, prior=prior_record(resources.calibration, models),
        left_out=drawn - len(users), left_out_why=left_out_why(cfg.user_models, llm_fit_file(resources)),
    )  # fmt: skip
    logger.info("discrimination on %s: %d users, %d cells in %.1fs", full.name, len(users), len(cells), result.seconds)
    return result


def _candidates_of(trials: dict[tuple[str, int, int], list[Trial]], a: int, users: Sequence[int]) -> dict[int, set]:
    """Every item shown to each user in the settings holding out ``a`` (positives and negatives, all samplers)."""
    shown: dict[int, set] = {int(u): set() for u in users}
    for (_sampler, aa, _b), group in trials.items():
        if aa == a:
            for trial in group:
                shown[trial.user].update(trial.candidates)
    return shown


def _build(
    resources: Resources, kind: str, train: Dataset, shared: dict | None = None, slot: tuple | None = None
) -> Any:
    """The scorer of ``kind`` on ``train``; the LLM agent is memoised in ``shared[slot]`` so that the ``llm+prior``
    row of the same training data reuses its scores."""
    if kind == POPULARITY:
        return PopularityScorer(train)
    if kind in PRIOR_KINDS:
        llm = None
        if kind in LLM_PRIOR_KINDS:
            held = shared.get(slot) if shared is not None else None
            llm = held if held is not None else Memo(resources.build("llm", train))
        return build_prior_row(kind, train, resources.calibration, llm)
    model = resources.build(kind, train)
    if kind == "llm" and shared is not None:
        model = shared[slot] = Memo(model)
    return model
