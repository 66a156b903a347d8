"""``recagent-gym users distill``: train the two-tower scorer on the LLM users' per-item scores (train users only).

The target is the item score the LLM agent's decision rule reads (calibrated LLM score + embedding relevance, for
items still eligible on the page); logs without scores (the ``direct`` strategy of remote backends) are fitted on
the decisions themselves (:mod:`~recagent_gym.runs.distill.decisions`). The rest of the LLM user is kept as it
is: the same rule function (:func:`recagent_gym.users.agent.page.decide_page`) with each user's threshold and
search probabilities, a Gaussian score noise whose scale is the training residual (the LLM's scores vary with the
session's random examples; without it the best-of-page score, hence the watch rate, would be too low), and a linear
rating of the watched item's score.

With ``real_weight > 0`` (``--real-weight``) the scorer is also fitted to the train users' real MovieLens choices
(:mod:`~recagent_gym.runs.distill.real_choices`): on pages of a user's real next items among never-seen negatives, the
cross-entropy of the real item under the rule's choice among the page (``softmax(score / T)``), the user's features
built from the history before those items. Each optimiser step of the LLM targets adds ``real_weight`` times this
loss on its share of the real pages; ``real_weight == 0`` is the LLM-only fit, step for step. ``real_target:
watch`` (``--real-target watch``) adds the pages without a real item, on which real users watch nothing, and fits
both under the rule's choice model with the user's threshold (the scores' level, not only their order).
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.distill import logs
from recagent_gym.runs.distill.decisions import decision_pages
from recagent_gym.runs.distill.features import model_features
from recagent_gym.runs.distill.objective import (
    REAL_TARGETS,
    FitSettings,
    RealTarget,
    _train,
    calibrate_noise,
    decision_nll,
    population_profiles,
)
from recagent_gym.runs.distill.real_choices import temporal_split
from recagent_gym.users.distilled.errors import DistillError
from recagent_gym.users.distilled.saved_model import FORMAT, Artefact
from recagent_gym.users.recsim_features import collaborative_item_latents

log = logging.getLogger(__name__)


def policy_split(users: np.ndarray, dataset: Dataset, config: Any) -> tuple[np.ndarray, np.ndarray]:
    """The logged users split as the RL protocol splits the dataset's users: ``(train, test)``, sorted."""
    from recagent_gym.runs.policies.protocol import split_users as rl_split

    held_out = rl_split(dataset.n_users, test_fraction=config.train.test_fraction, seed=config.train.split_seed).test
    logged = np.unique(users)
    test = np.isin(logged, held_out)
    if test.all() or not test.any():
        raise DistillError(
            f"the RL split (train.test_fraction={config.train.test_fraction}, split_seed={config.train.split_seed}) "
            f"leaves {'no' if test.all() else 'no held-out'} logged user to {'train on' if test.all() else 'test'};"
            " log more users or use the own split"
        )
    return logged[~test], logged[test]


def split_users(users: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of the logged users: ``(train, test)``, sorted; at least one user on each side if possible."""
    if not 0.0 <= test_fraction < 1.0:
        raise DistillError(f"test fraction must be in [0, 1), got {test_fraction}")
    order = np.random.default_rng(seed).permutation(np.unique(users))
    n_test = min(len(order) - 1, max(1 if test_fraction > 0 else 0, round(test_fraction * len(order))))
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def collab_vectors(dataset: Dataset, settings: FitSettings) -> np.ndarray | None:
    """``(n_items, settings.collab_dims)`` collaborative item vectors of the history before every user's real next
    items (the real-choice objective's history: neither target's future is in them), or None with 0 dims."""
    if settings.collab_dims < 0:
        raise DistillError(f"collab_dims must be >= 0, got {settings.collab_dims}")
    if settings.collab_dims == 0:
        return None
    history, _ = temporal_split(dataset, settings.real_choices, settings.real_min_history)
    return collaborative_item_latents(history, settings.collab_dims, settings.seed)


def real_only_users(dataset: Dataset, settings: FitSettings, exclude: set[int]) -> np.ndarray:
    """``settings.real_users`` users with real next items, none in ``exclude`` (the logged and the held-out users),
    drawn with ``settings.seed``: the real-choice objective fits their real items too (sorted; empty with 0)."""
    if settings.real_users < 0:
        raise DistillError(f"real_users must be >= 0, got {settings.real_users}")
    if settings.real_users == 0:
        return np.zeros(0, dtype=np.int64)
    _, real = temporal_split(dataset, settings.real_choices, settings.real_min_history)
    pool = np.array(sorted(set(real) - exclude), dtype=np.int64)
    if settings.real_users > len(pool):
        raise DistillError(
            f"real_users={settings.real_users}, but {dataset.name} has only {len(pool)} users with real next items"
            " that are neither logged nor held out"
        )
    # a stream of its own ([seed, 31]), as the package seeds its draws (sessions: [seed, 1], pages: [seed, id, ...])
    drawn = np.random.default_rng([settings.seed, 31]).choice(pool, size=settings.real_users, replace=False)
    return np.sort(drawn)


def item_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (decision, eligible shown item): ``user_id item_id score position`` and the decision's index."""
    records = []
    for index, row in enumerate(frame.itertuples(index=False)):
        for position, (item, score) in enumerate(zip(row.shown, row.scores, strict=True)):
            if not math.isnan(score):
                records.append((index, int(row.user_id), int(item), float(score), position))
    frame = pd.DataFrame(records, columns=["decision", "user_id", "item_id", "score", "position"])
    return frame.astype({"decision": np.int64, "user_id": np.int64, "item_id": np.int64, "score": np.float64})


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties); NaN when either side is constant or too short."""
    if len(a) < 2:
        return math.nan
    ra = pd.Series(a).rank().to_numpy()
    rb = pd.Series(b).rank().to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


def text_vectors(dataset: Dataset, embedder: Any = None, cache_dir: str | Path | None = None) -> np.ndarray:
    """Item text embeddings (MiniLM by default, cached on disk)."""
    from recagent_gym.llm.embedder import SentenceEmbedder, embed_items

    if embedder is None:
        embedder = SentenceEmbedder()
        cache_dir = cache_dir or "embeddings"  # under the cache folder (llm/embedding_files.py)
    return embed_items(dataset, embedder, cache_dir, progress=False)


def rule_tables(profiles: list[Any], config: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per user: the decision rule's watch threshold, interest-search probability, and interest query."""
    from recagent_gym.prompts.search_query import template_query
    from recagent_gym.users.agent.page import threshold_for

    cfg = config.user
    threshold = np.array(
        [threshold_for(cfg.watch_threshold, cfg.behaviour_offset, p.features, p.activity) for p in profiles]
    )
    search = np.array([cfg.search_interest_probability * (2 if p.has("Explorer") else 1) for p in profiles])
    queries = [template_query(heard_title=None, interests=p.interests) for p in profiles]
    return threshold, search, queries


def distill(
    logs_folder: str | Path,
    dataset: Dataset,
    config: Any,
    out: str | Path,
    *,
    settings: FitSettings | None = None,
    embedder: Any = None,
    cache_dir: str | Path | None = None,
) -> str:
    """Train on ``logs_folder`` and write the artefact to ``out``; returns a one-line summary.

    Logs of any backend: the loss is the squared error on the logged item scores (few-shot strategy) plus the
    choice model's cross-entropy on the decisions that have no scored item (the ``direct`` strategy of remote
    backends logs none; :mod:`~recagent_gym.runs.distill.decisions`); a term with nothing to fit is dropped.
    The summary and ``model.json``'s metrics say which target was fitted (``target``) and on how many items and
    decisions."""
    import torch

    from recagent_gym.runs.distill.network import TwoTower

    settings = settings or FitSettings()
    frame = logs.read_logs(logs_folder)
    meta = logs.read_meta(logs_folder)
    if meta.get("dataset") not in (None, dataset.name):
        raise DistillError(f"{logs_folder} was collected on dataset {meta['dataset']!r}, not {dataset.name!r}")
    logs.check_ids(frame, logs_folder, dataset.n_users, dataset.n_items, dataset.name)
    rows = item_rows(frame)
    pages = decision_pages(frame, set(rows["decision"].tolist()))
    if rows.empty and not len(pages):
        raise DistillError(f"{logs_folder}: nothing to fit (no scored item and no decision on an eligible item)")
    if settings.split == "policy":
        train_users, test_users = policy_split(frame["user_id"].to_numpy(), dataset, config)
    elif settings.split == "own":
        train_users, test_users = split_users(frame["user_id"].to_numpy(), settings.test_fraction, settings.seed)
    else:
        raise DistillError(f"split must be 'policy' or 'own', got {settings.split!r}")
    vectors = text_vectors(dataset, embedder, cache_dir)
    profiles = population_profiles(dataset, config)
    collab = collab_vectors(dataset, settings)
    users_x, items_x = model_features(dataset, vectors, profiles, config.user.history_shots, collab)
    threshold, search, queries = rule_tables(profiles, config)
    if settings.real_weight < 0 or not math.isfinite(settings.real_weight):
        raise DistillError(f"real_weight must be a finite number >= 0, got {settings.real_weight}")
    if settings.real_target not in REAL_TARGETS:
        raise DistillError(f"real_target must be one of {', '.join(REAL_TARGETS)}, got {settings.real_target!r}")
    measured = set(test_users.tolist())  # the real choices are measured on every user held out of the fit
    if settings.split == "policy":
        from recagent_gym.runs.policies.protocol import split_users as rl_split

        measured |= set(rl_split(dataset.n_users, test_fraction=config.train.test_fraction,
                                 seed=config.train.split_seed).test.tolist())  # fmt: skip
    measured_users = np.array(sorted(measured - set(train_users.tolist())), dtype=np.int64)
    real_only = real_only_users(dataset, settings, exclude=set(train_users.tolist()) | measured)
    real = RealTarget.build(dataset, config, vectors, np.union1d(train_users, real_only), measured_users, settings,
                            collab)  # fmt: skip

    torch.set_num_threads(1)  # a net this small is fastest on one thread (measured in the project's notes)
    torch.manual_seed(settings.seed)
    train = rows[rows["user_id"].isin(train_users)]
    test = rows[rows["user_id"].isin(test_users)]
    train_pages = pages.subset(np.isin(pages.user, train_users))
    test_pages = pages.subset(np.isin(pages.user, test_users))
    net = TwoTower(
        users_x.shape[1],
        items_x.shape[1],
        text_dim=vectors.shape[1],
        alpha=1.0 / config.user.embedding_scale,  # the LLM agent's own embedding-relevance scale, as a start
        hidden=settings.hidden,
        dim=settings.dim,
        collab_dim=0 if collab is None else collab.shape[1],
    )
    temperature = config.user.watch_temperature
    _train(net, users_x, items_x, train, train_pages, threshold, temperature, settings, real)
    user_table, item_table, item_offset = net.tables(users_x, items_x)

    def predict(users: np.ndarray, items: np.ndarray) -> np.ndarray:
        users, items = np.asarray(users, dtype=np.int64), np.asarray(items, dtype=np.int64)
        return np.einsum("...d,...d->...", user_table[users], item_table[items]) + item_offset[items]

    train_pred = predict(train["user_id"].to_numpy(), train["item_id"].to_numpy())
    residual = train["score"].to_numpy() - train_pred
    residual_std = float(residual.std()) if len(residual) > 1 else 0.0
    page_pred = predict(train_pages.user[:, None], train_pages.items)
    predicted = pd.concat([train.assign(pred=train_pred), train_pages.item_rows(page_pred)], ignore_index=True)
    # The grid spans the spread of the targets, not only the training residual: a net that fits few logs closely
    # leaves a residual far smaller than the LLM's session-to-session variation.
    spread = train["score"] if len(train) else predicted["pred"]
    grid_scale = max(residual_std, float(spread.std()) if len(spread) > 1 else 0.0)
    noise = calibrate_noise(predicted, frame, threshold, temperature, grid_scale, settings.seed)
    rating_a, rating_b = _rating_fit(frame, train_users, predict)
    target = "+".join(name for name, n in (("scores", len(rows)), ("decisions", len(pages))) if n)
    metrics: dict[str, Any] = {"target": target, "train_items": len(train), "test_items": len(test)}
    if len(train):
        metrics["train_rmse"] = float(np.sqrt((residual**2).mean()))
    if len(test):
        test_pred = predict(test["user_id"].to_numpy(), test["item_id"].to_numpy())
        metrics["test_rmse"] = float(np.sqrt(((test["score"].to_numpy() - test_pred) ** 2).mean()))
        metrics["test_rmse_constant"] = float(np.sqrt(((test["score"] - train["score"].mean()) ** 2).mean()))
        metrics["test_spearman"] = spearman(test["score"].to_numpy(), test_pred)
    if len(pages):
        metrics["train_decisions"], metrics["test_decisions"] = len(train_pages), len(test_pages)
        if len(test_pages):
            metrics["test_decision_nll"] = decision_nll(test_pages, predict, threshold, temperature)
    metrics["residual_std"], metrics["noise_std"] = residual_std, noise
    metrics.update(real.metrics(net, temperature, threshold))
    cfg = config.user
    arrays = {
        # half precision: the text part makes the item table 9742 x 424 on the bundled data (16.5 MB in float32);
        # the rounding (1e-3 relative) is far below the score noise
        "user_table": user_table.astype(np.float16),
        "item_table": item_table.astype(np.float16),
        "item_offset": item_offset,
        "threshold": threshold,
        "search_interest": search,
        **{f"net.{k}": v.detach().numpy() for k, v in net.state_dict().items()},
        **({} if collab is None else {"collab_items": collab.astype(np.float32)}),
    }
    artefact_meta = {
        "format": FORMAT,
        "dataset": dataset.name,
        "n_users": dataset.n_users,
        "n_items": dataset.n_items,
        "user_raw_ids": [str(r) for r in dataset.users["raw_id"]],
        "logs_hash": logs.logs_hash(logs_folder),
        "logs": {  # what the logs hold (collect.json's ``sessions`` is the plan's size, ``planned_sessions`` here)
            **{k: v for k, v in meta.items() if k != "sessions"},
            "planned_sessions": meta.get("sessions"),
            "sessions": int(frame["session_id"].nunique()),
            "decisions": len(frame),
        },
        "settings": asdict(settings),
        "embedder": getattr(embedder, "name", "all-MiniLM-L6-v2") if embedder is not None else "all-MiniLM-L6-v2",
        "rule": {
            "patience": cfg.patience,
            "temperature": cfg.watch_temperature,
            "search_heard_probability": cfg.search_heard_probability,
            "noise_std": noise,
            "rating_intercept": rating_a,
            "rating_slope": rating_b,
        },
        "interest_queries": queries,
        # every user the model was fitted on (logged, and the real-choice objective's own): no evaluation meets them
        "train_users": np.union1d(train_users, real_only).tolist(),
        "real_only_users": len(real_only),
        "test_users": test_users.tolist(),
        "metrics": metrics,
    }
    Artefact(arrays, artefact_meta).save(out)
    summary = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())
    log.info("distilled %s: %s", out, summary)
    return summary


def _rating_fit(frame: pd.DataFrame, train_users: np.ndarray, predict: Any) -> tuple[float, float]:
    """Least squares ``rating ~ a + b * score`` on the training users' rated watches (``(4, 0)`` with too few); the
    score is the logged one, else (logs without scores) the fitted model's ``predict(users, items)``."""
    watched = frame[(frame["action"] == "watch") & frame["user_id"].isin(train_users) & frame["rating"].notna()]
    x = np.array([row.scores[row.position] for row in watched.itertuples()], dtype=float)
    if len(x) and np.isnan(x).any():
        fitted = predict(watched["user_id"].to_numpy(dtype=np.int64), watched["item"].to_numpy(dtype=np.int64))
        x = np.where(np.isnan(x), fitted, x)
    y = watched["rating"].to_numpy(dtype=float)
    keep = ~np.isnan(x)
    x, y = x[keep], y[keep]
    if len(x) < 2 or x.std() == 0:
        return (float(y.mean()) if len(y) else 4.0), 0.0
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)
