"""The distilled users against real held-out choices: per sampler, how often the model's choice on a page of a
user's real next item and negatives is the real one, with 95% intervals over users, beside popularity."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.distill.real_choices import (
    CHOICES,
    MIN_HISTORY,
    SAMPLERS,
    choice_probability,
    real_pages,
    temporal_split,
    top_hit,
)
from recagent_gym.runs.metrics import bootstrap_replicates, percentile_interval


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
    from recagent_gym.runs.distill.reencode import reencoded
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
    means = bootstrap_replicates(lambda idx: frame[idx].mean(axis=1), len(frame), np.random.default_rng(seed),
                                 n_boot=n, batched=True)  # fmt: skip
    return (float(frame.mean()), *percentile_interval(means, 0.95))
