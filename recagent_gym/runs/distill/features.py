"""Input features of the distilled user model: an item from its text embedding and metadata, a user from the
profile and the embeddings of the recent history the LLM agent is shown (its few-shot positives).

Item: ``[text embedding, genre multi-hot, year (z), log popularity (z), shrunk mean rating]``.
User: ``[mean embedding of the last history_shots distinct items, genre shares, gender (F, M), age / 100,
behaviour features (multi-hot), activity, diversity, conformity]``.

With collaborative item vectors (``FitSettings.collab_dims > 0``: a truncated SVD of the user x item matrix of the
history before every user's real next items, :func:`~recagent_gym.users.recsim_features.collaborative_item_latents`,
stored in the artefact as ``collab_items`` so that a re-encoding uses the very same vectors) both sides end with
them: the item's vector, and the user's collaborative taste (the normalised mean vector of the whole history, as the
fitted RecSim-style users build theirs). Items watched by the same people point the same way, which the text
embedding does not say: :func:`model_features`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from recagent_gym.data.schema import BEHAVIOUR_FEATURES, Dataset
from recagent_gym.users.recsim import item_quality, item_topics, user_genre_shares


def _z(values: np.ndarray) -> np.ndarray:
    std = float(values.std())
    return (values - float(values.mean())) / (std if std > 0 else 1.0)


def item_features(dataset: Dataset, text_vectors: np.ndarray) -> np.ndarray:
    """``(n_items, dim + n_genres + 3)`` float32."""
    years = dataset.items["year"].to_numpy(dtype=np.float64, na_value=np.nan)
    years = np.where(np.isnan(years), np.nanmean(years) if np.isfinite(years).any() else 0.0, years)
    popularity = np.log1p(dataset.item_popularity().astype(np.float64))
    meta = np.column_stack([dataset.genre_matrix(), _z(years), _z(popularity), item_quality(dataset)])
    return np.hstack([text_vectors.astype(np.float32), meta.astype(np.float32)])


def recent_positives(dataset: Dataset, user: int, shots: int) -> list[int]:
    """The ``shots`` most recent distinct items of the user's history (the LLM agent's positive examples)."""
    recent: list[int] = []
    for item in reversed([int(i) for i in dataset.user_history(user)["item_id"]]):
        if item not in recent:
            recent.append(item)
        if len(recent) == shots:
            break
    return recent


def user_features(dataset: Dataset, text_vectors: np.ndarray, profiles: Sequence[Any], shots: int) -> np.ndarray:
    """``(n_users, dim + n_genres + 3 + len(BEHAVIOUR_FEATURES) + 3)`` float32."""
    taste = np.zeros((dataset.n_users, text_vectors.shape[1]), dtype=np.float64)
    for user in range(dataset.n_users):
        items = recent_positives(dataset, user, max(shots, 1))
        if items:
            mean = text_vectors[items].mean(axis=0)
            norm = float(np.linalg.norm(mean))
            taste[user] = mean / norm if norm > 0 else mean
    shares = user_genre_shares(dataset, item_topics(dataset))
    rows = []
    for p in profiles:
        gender = (p.gender or "").upper()[:1]
        rows.append(
            [
                gender == "F",
                gender == "M",
                (p.age if p.age >= 0 else 35) / 100.0,
                *[f in p.features for f in BEHAVIOUR_FEATURES],
                p.activity,
                p.diversity,
                p.conformity,
            ]
        )
    return np.hstack([taste, shares, np.asarray(rows, dtype=np.float64)]).astype(np.float32)


def collaborative_taste(dataset: Dataset, collab: np.ndarray) -> np.ndarray:
    """``(n_users, d)``: the normalised mean of ``collab`` over each user's history (0 for a user without one)."""
    inter = dataset.interactions
    sums = np.zeros((dataset.n_users, collab.shape[1]), dtype=np.float64)
    np.add.at(sums, inter["user_id"].to_numpy(), collab[inter["item_id"].to_numpy()])
    return sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)


def model_features(
    dataset: Dataset, text: np.ndarray, profiles: Sequence[Any], shots: int, collab: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(users_x, items_x)`` float32: :func:`user_features` and :func:`item_features`, each followed by the
    collaborative part when ``collab`` (``(n_items, d)`` item vectors) is given."""
    users_x, items_x = user_features(dataset, text, profiles, shots), item_features(dataset, text)
    if collab is None or collab.shape[1] == 0:
        return users_x, items_x
    taste = collaborative_taste(dataset, collab)
    return (
        np.hstack([users_x, taste.astype(np.float32)]),
        np.hstack([items_x, np.asarray(collab, dtype=np.float32)]),
    )
