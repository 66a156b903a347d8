"""Observation of ``RecAgent-v1``: the user's encoding, the session so far, and the candidates as item features.

Item features (``F = n_genres + 3 + latent_dim`` columns, every value in ``[-1, 1]``):

| columns          | meaning                                                                                  |
|------------------|------------------------------------------------------------------------------------------|
| `0 .. G-1`       | genre vector normalised to sum 1                                                         |
| `G`              | release year as its quantile in the catalogue, in [0, 1] (0.5 when unknown)             |
| `G + 1`          | popularity (interaction count) as its quantile in the catalogue, in [0, 1]               |
| `G + 2`          | shrunk mean rating as its quantile in the catalogue, in [0, 1]                           |
| `G + 3 ..`       | low-dimensional item vector: a PCA projection, scaled into [-1, 1], of the vectors the    |
|                  | user model scores with (RecSim ``item_latents``; embedding users' text embeddings;       |
|                  | distilled users' learned item table); the genre vectors for a model without any (LLM     |
|                  | agents), see ``latent_source``; a transfer passes the training env's table instead       |

The scalar columns are quantiles (ties share their mean rank) rather than min-max scaled values: the catalogue's
mean ratings crowd into a narrow band (on the bundled data the candidates' middle half spanned 0.59-0.79 of the
min-max scale), and a small network learns slowly from a feature that barely varies.

The user's encoding (swapped by the personalisation check: :data:`ENCODING_KEYS`) is ``user`` (features from the
dataset) and ``history`` (last watched items as item features); the session part is ``session``; the candidates
carry two flags after their item features: shown earlier this session, and shown to this user in an earlier session.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
from gymnasium import spaces

from recagent_gym.data.schema import Dataset
from recagent_gym.session.state import RESPONSE_CODES, SEARCH_WATCH, WATCH, RecommenderSession
from recagent_gym.session.tables import SessionTables

ENCODING_KEYS: tuple[str, ...] = ("user", "history")
"""Who the user is (the dataset's view of them), as opposed to what happened in this session."""
N_RESPONSES = len(RESPONSE_CODES)


def latent_columns(n_genres: int, width: int) -> slice:
    """Columns of the item vector in an item-feature row of ``width`` columns (after the genres, year, popularity and
    quality; module table)."""
    return slice(n_genres + 3, width)


def latent_source(user_model: Any) -> tuple[np.ndarray | None, str]:
    """The item vectors a user model scores with, if it exposes any, and their name."""
    latents = getattr(user_model, "item_latents", None)
    if latents is not None and np.asarray(latents).shape[1] > 0:
        return np.asarray(latents, dtype=np.float64), "recsim_latents"
    embeddings = getattr(user_model, "item_embeddings", None)
    if embeddings is not None:
        source = getattr(user_model, "item_embeddings_source", "text_embeddings")
        return np.asarray(embeddings, dtype=np.float64), source
    return None, "genres"


def project(vectors: np.ndarray, dim: int, *, basis_from: np.ndarray | None = None) -> np.ndarray:
    """PCA projection of ``vectors`` to ``dim`` columns (zero-padded), scaled so every value lies in [-1, 1].

    ``basis_from``: another table of the same items and width (e.g. the same model's item vectors encoded on the
    whole dataset, where ``vectors`` are re-encoded on a history split) whose PCA, mean and scale are used instead,
    so that each column means what it meant for a policy trained on that table: a PCA of its own flips components'
    signs and rotates near-tied ones. Values outside [-1, 1] are left to the caller's clip.
    """
    reference = vectors if basis_from is None else np.asarray(basis_from, dtype=np.float64)
    if reference.shape[1] != vectors.shape[1]:
        raise ValueError(f"basis of width {reference.shape[1]} for vectors of width {vectors.shape[1]}")
    mean = reference.mean(axis=0, keepdims=True)
    _, _, vt = np.linalg.svd(reference - mean, full_matrices=False)
    k = min(dim, vt.shape[0])
    out = np.zeros((len(vectors), dim), dtype=np.float64)
    out[:, :k] = (vectors - mean) @ vt[:k].T
    scale = np.abs(out if basis_from is None else (reference - mean) @ vt[:k].T).max()
    return out / scale if scale > 0 else out


def quantile01(values: np.ndarray) -> np.ndarray:
    """Each value's quantile among ``values`` in [0, 1] (ties share their mean rank; 0.5 for fewer than 2)."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n < 2:
        return np.full(n, 0.5)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    return (np.cumsum(counts) - (counts + 1) / 2.0)[inverse] / (n - 1)


def item_feature_table(
    dataset: Dataset,
    tables: SessionTables,
    user_model: Any,
    latent_dim: int,
    *,
    hide_quality: bool = False,
    latent_basis: np.ndarray | None = None,
) -> tuple[np.ndarray, str]:
    """``(n_items, F)`` float32 item features (module table) and the latent block's source. ``hide_quality``: the
    quality column is 0.5 for every item (``env.hide_quality``); ``latent_basis``: project the user model's item
    vectors in the PCA of these (see :func:`project`)."""
    year = dataset.items["year"].to_numpy(dtype=np.float64)
    known = year > 0
    year01 = np.full(len(year), 0.5)
    if known.any():
        year01[known] = quantile01(year[known])
    vectors, source = latent_source(user_model)
    basis = latent_basis if vectors is not None else None
    latent = (
        project(vectors if vectors is not None else tables.topics, latent_dim, basis_from=basis) if latent_dim else None
    )
    quality = np.full(len(year), 0.5) if hide_quality else quantile01(tables.quality)
    scalars = [year01, quantile01(tables.popularity), quality]
    columns = [tables.topics, *(column[:, None] for column in scalars)]
    if latent is not None:
        columns.append(latent)
    return np.clip(np.concatenate(columns, axis=1), -1.0, 1.0).astype(np.float32), source


class Encoder:
    """Builds the observation from the kernel's session and the candidate record; see the module docstring."""

    def __init__(
        self,
        features: np.ndarray,
        tables: SessionTables,
        *,
        n_candidates: int,
        history_length: int,
        max_pages: int,
        page_size: int,
    ) -> None:
        self.features = features
        self.tables = tables
        self.k, self.h = n_candidates, history_length
        self.max_pages, self.page_size = max_pages, page_size
        self.f = features.shape[1]
        self.session_dim = 1 + N_RESPONSES + 1 + 2 + 2 * self.f
        self.space = spaces.Dict(
            {
                "user": spaces.Box(0.0, 1.0, (tables.n_genres + 3,), np.float32),
                "history": spaces.Box(-1.0, 1.0, (self.h, self.f + 1), np.float32),
                "session": spaces.Box(-1.0, 1.0, (self.session_dim,), np.float32),
                "candidates": spaces.Box(-1.0, 1.0, (self.k, self.f + 2), np.float32),
                "candidate_mask": spaces.Box(0.0, 1.0, (self.k,), np.float32),
            }
        )

    def encode(
        self,
        session: RecommenderSession,
        candidates: np.ndarray,
        *,
        shown: Collection[int],
        shown_before: Collection[int],
        skipped: list[int],
    ) -> dict[str, np.ndarray]:
        """One observation (arrays freshly allocated): ``session`` is the kernel's (its history window, watches,
        page count and last response), ``shown`` the items shown this session, ``shown_before`` those shown to the
        user in earlier sessions, ``skipped`` the shown items not watched (one entry per showing)."""
        feats = self.features
        hist = np.zeros((self.h, self.f + 1), dtype=np.float32)
        recent = session.window[: self.h]  # most recent first
        if recent:
            hist[: len(recent), : self.f] = feats[recent]
            hist[: len(recent), self.f] = 1.0
        return {
            "user": self.tables.user_features[session.user].copy(),
            "history": hist,
            "session": self._session_vector(session, skipped),
            **self._candidate_rows(candidates, shown, shown_before),
        }

    def _session_vector(self, session: RecommenderSession, skipped: list[int]) -> np.ndarray:
        feats, watched, max_pages = self.features, session.watched, self.max_pages
        vector = np.zeros(self.session_dim, dtype=np.float32)
        vector[0] = min(session.page_index / max_pages, 1.0)
        vector[1 + session.last_code] = 1.0
        # the rating of the last page's watch; 0 when the last page got none (the kernel keeps the last watch's)
        vector[1 + N_RESPONSES] = session.last_rating if session.last_code in (WATCH, SEARCH_WATCH) else 0.0
        vector[2 + N_RESPONSES] = min(len(watched) / max(max_pages, 1), 1.0)
        vector[3 + N_RESPONSES] = min(len(skipped) / max(max_pages * self.page_size, 1), 1.0)
        base = 4 + N_RESPONSES
        if watched:
            vector[base : base + self.f] = feats[watched].mean(axis=0)
        if skipped:
            vector[base + self.f : base + 2 * self.f] = feats[skipped].mean(axis=0)
        return np.clip(vector, -1.0, 1.0)

    def _candidate_rows(
        self, candidates: np.ndarray, shown: Collection[int], shown_before: Collection[int]
    ) -> dict[str, np.ndarray]:
        cands = np.zeros((self.k, self.f + 2), dtype=np.float32)
        mask = np.zeros(self.k, dtype=np.float32)
        n = len(candidates)
        if n:
            cands[:n, : self.f] = self.features[candidates]
            if shown:
                cands[:n, self.f] = np.isin(candidates, np.fromiter(shown, np.int64, len(shown)))
            if shown_before:
                cands[:n, self.f + 1] = np.isin(candidates, np.fromiter(shown_before, np.int64, len(shown_before)))
            mask[:n] = 1.0
        return {"candidates": cands, "candidate_mask": mask}
