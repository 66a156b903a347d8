"""The observation's item features on the real side of the RL comparison, built on the history before the futures.

The simulator's item features count every interaction of the dataset: the popularity and quality quantiles, and the
RecSim-style users' collaborative item latents (an SVD of the whole user x item matrix), the held-out users' future
items included. Handed to the replayed real users as they are, they tell a policy (or the ``latent`` row) which
items the held-out users went on to watch. So the real side re-builds the table on the history split, as every
history recommender there is fitted: the quantiles from the history's counts and ratings, and collaborative
latents from an SVD of the history, turned onto the simulator's latents by an orthogonal Procrustes rotation (a
``dims x dims`` rotation fitted over the items; an SVD's basis is arbitrary up to one) and projected in the
simulator's PCA basis, so that each column means what it meant in training. Other latents (random, text
embeddings) carry no interaction data and are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset


def history_item_features(env: Any) -> Callable[[Dataset], tuple[np.ndarray, str]]:
    """``history -> (item features, latent source)`` for RecAgent-v1 ``env`` (the simulator's evaluation env)."""
    model, source = env.user_model, env.latent_source
    latents = np.asarray(model.item_latents, dtype=np.float64) if source == "recsim_latents" else None
    from recagent_gym.envs.encoding import latent_columns

    block = latent_columns(int(env.tables.n_genres), env.item_features.shape[1])
    latent_dim = block.stop - block.start
    hide_quality = bool(env.config.env.hide_quality)
    collaborative = getattr(getattr(model, "config", None), "recsim_item_latents", None) == "collaborative"

    def build(history: Dataset) -> tuple[np.ndarray, str]:
        from recagent_gym.envs.encoding import item_feature_table
        from recagent_gym.session.tables import SessionTables

        tables = SessionTables.build(history)
        if latents is None:  # no item vectors of the users' own (genres; or a table the env was handed): keep them
            table, _ = item_feature_table(history, tables, SimpleNamespace(), latent_dim, hide_quality=hide_quality)
            table[:, block] = env.item_features[:, block]
            return table, source
        vectors = aligned_history_latents(history, latents, model.config.recsim_seed) if collaborative else latents
        holder = SimpleNamespace(item_latents=vectors)
        table, _ = item_feature_table(history, tables, holder, latent_dim, hide_quality=hide_quality,
                                      latent_basis=latents)  # fmt: skip
        return table, source

    return build


def aligned_history_latents(history: Dataset, latents: np.ndarray, seed: int) -> np.ndarray:
    """The collaborative item latents of ``history`` (same width and seed as ``latents``), rotated onto ``latents``
    by orthogonal Procrustes over the items with a vector in both."""
    from scipy.linalg import orthogonal_procrustes

    from recagent_gym.users.recsim_features import collaborative_item_latents

    own = collaborative_item_latents(history, latents.shape[1], seed)
    both = (np.abs(own).sum(axis=1) > 0) & (np.abs(latents).sum(axis=1) > 0)
    if both.sum() < latents.shape[1]:
        return own
    rotation, _ = orthogonal_procrustes(own[both], latents[both])
    return own @ rotation
