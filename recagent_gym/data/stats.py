"""User history statistics (after Agent4Rec) and the behaviour features (RecAgent) derived from them.

Statistics, each in [0, 1], computed over the loaded (filtered) interactions:

- **activity**: interactions per active day (distinct UTC calendar days with an interaction), log-scaled and
  min-max normalised over the users that have a history (``log1p``, because the raw rate is heavy-tailed).
- **diversity**: Shannon entropy of the genre distribution of the history (an item counts once for each of its
  genres), divided by ``log(n_genres)`` of the dataset.
- **conformity**: ``1 - mean |rating - item mean rating| / (rating range)``; the range is ``max - min`` of the
  dataset's ratings (4 on a 1-5 scale, as Agent4Rec), item means over all loaded ratings.

A user without history gets activity 0 and diversity 0; a user without an explicit rating gets the neutral
conformity 0.5 (counted in the log).

Behaviour features (RecAgent's Watcher, Explorer, Critic, Chatter, Poster), from percentile ranks among users with a
history:

- **Watcher**: activity in the top quarter.
- **Explorer**: diversity in the top quarter.
- **Critic**: conformity in the bottom quarter, or at least 30% low ratings (the lowest quarter of the rating range,
  e.g. 1-2 stars on 1-5).
- **Chatter**: conformity in the top quarter (close to the consensus: the paper's Chatter trusts what friends say).
- **Poster**: wrote at least one tag, in datasets with tags; otherwise drawn at random with probability
  :data:`POSTER_RATE` from the generator seeded with ``seed``.
- A user with a history matched by none of the first four rules gets the one of them with the highest percentile,
  so every such user has at least one feature. Users without history get none.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from recagent_gym.data.schema import BEHAVIOUR_FEATURES

logger = logging.getLogger(__name__)

TOP_QUARTER = 0.75
LOW_RATING_SHARE = 0.3
POSTER_RATE = 0.1
"""Share of Posters drawn in datasets without tags (about the share of tagging users in MovieLens latest-small)."""
N_INTERESTS = 3
"""Top genres that become a user's interests."""


def user_statistics(
    interactions: pd.DataFrame, item_genres: pd.Series, n_users: int, genres: tuple[str, ...]
) -> pd.DataFrame:
    """Per dense user id: ``activity``, ``diversity``, ``conformity``, ``low_share``, ``n`` and ``interests``."""
    users = interactions["user_id"].to_numpy(np.int64)
    items = interactions["item_id"].to_numpy(np.int64)
    n = np.bincount(users, minlength=n_users)
    has = n > 0

    days = pd.DataFrame({"u": users, "d": interactions["timestamp"].to_numpy(np.int64) // 86_400})
    active_days = np.bincount(days.drop_duplicates()["u"].to_numpy(), minlength=n_users)
    rate = np.log1p(np.divide(n, np.maximum(active_days, 1)))
    activity = np.zeros(n_users)
    activity[has] = _min_max(rate[has])

    genre_index = {g: j for j, g in enumerate(genres)}
    item_matrix = np.zeros((len(item_genres), max(len(genres), 1)), dtype=np.float64)
    for i, gs in enumerate(item_genres):
        for g in gs:
            item_matrix[i, genre_index[g]] = 1.0
    counts = np.stack(
        [np.bincount(users, weights=item_matrix[items, j], minlength=n_users) for j in range(item_matrix.shape[1])],
        axis=1,
    ).astype(np.float64)  # bincount of no rows is int64
    totals = counts.sum(axis=1, keepdims=True)
    p = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
    entropy = -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=1)
    diversity = entropy / np.log(len(genres)) if len(genres) > 1 else np.zeros(n_users)

    conformity, low_share = _conformity(interactions, n_users)
    interests = [_top_genres(row, genres) for row in counts]
    return pd.DataFrame(
        {
            "activity": activity,
            "diversity": np.clip(diversity, 0.0, 1.0),
            "conformity": conformity,
            "low_share": low_share,
            "n": n,
            "interests": interests,
        }
    )


def behaviour_features(
    stats: pd.DataFrame, tag_counts: np.ndarray | None, rng: np.random.Generator
) -> list[tuple[str, ...]]:
    """The behaviour features of every user by the rules of the module docstring (in :data:`BEHAVIOUR_FEATURES`
    order)."""
    has = stats["n"].to_numpy() > 0
    pct = {
        "Watcher": _percentile(stats["activity"], has),
        "Explorer": _percentile(stats["diversity"], has),
        "Critic": _percentile(1.0 - stats["conformity"], has),
        "Chatter": _percentile(stats["conformity"], has),
    }
    rule = {name: values >= TOP_QUARTER for name, values in pct.items()}
    rule["Critic"] |= stats["low_share"].to_numpy() >= LOW_RATING_SHARE
    has_tags = tag_counts is not None
    poster = np.asarray(tag_counts) > 0 if has_tags else rng.random(len(stats)) < POSTER_RATE
    features: list[tuple[str, ...]] = []
    names = list(pct)
    for u in range(len(stats)):
        if not has[u]:
            features.append(("Poster",) if poster[u] and tag_counts is not None else ())
            continue
        chosen = {name for name in names if rule[name][u]}
        if not chosen:
            chosen = {max(names, key=lambda name: pct[name][u])}
        if poster[u]:
            chosen.add("Poster")
        features.append(tuple(f for f in BEHAVIOUR_FEATURES if f in chosen))
    return features


def _conformity(interactions: pd.DataFrame, n_users: int) -> tuple[np.ndarray, np.ndarray]:
    rated = interactions[interactions["rating"].notna()]
    conformity = np.full(n_users, 0.5)
    low_share = np.zeros(n_users)
    if rated.empty:
        logger.info("no explicit ratings: every user gets the neutral conformity 0.5")
        return conformity, low_share
    ratings = rated["rating"].to_numpy(np.float64)
    lo, hi = float(ratings.min()), float(ratings.max())
    span = hi - lo if hi > lo else 1.0
    item_mean = rated.groupby("item_id")["rating"].transform("mean").to_numpy(np.float64)
    users = rated["user_id"].to_numpy(np.int64)
    n_rated = np.bincount(users, minlength=n_users)
    deviation = np.bincount(users, weights=np.abs(ratings - item_mean), minlength=n_users)
    low = np.bincount(users, weights=(ratings <= lo + 0.25 * span).astype(np.float64), minlength=n_users)
    some = n_rated > 0
    conformity[some] = np.clip(1.0 - deviation[some] / n_rated[some] / span, 0.0, 1.0)
    low_share[some] = low[some] / n_rated[some]
    active = np.bincount(interactions["user_id"].to_numpy(np.int64), minlength=n_users) > 0
    unrated = int((active & ~some).sum())
    if unrated:
        logger.info("%d users with a history have no explicit rating: neutral conformity 0.5", unrated)
    return conformity, low_share


def _top_genres(counts: np.ndarray, genres: tuple[str, ...]) -> tuple[str, ...]:
    order = sorted((j for j in range(len(genres)) if counts[j] > 0), key=lambda j: (-counts[j], genres[j]))
    return tuple(genres[j] for j in order[:N_INTERESTS])


def _min_max(values: np.ndarray) -> np.ndarray:
    if not len(values):
        return values
    lo, hi = float(values.min()), float(values.max())
    return np.full(len(values), 0.5) if hi <= lo else (values - lo) / (hi - lo)


def _percentile(values: pd.Series, has: np.ndarray) -> np.ndarray:
    """Percentile rank in (0, 1] among users with a history (average rank for ties); 0 for the others."""
    out = np.zeros(len(values))
    out[has] = pd.Series(np.asarray(values, dtype=np.float64)[has]).rank(pct=True, method="average").to_numpy()
    return out
