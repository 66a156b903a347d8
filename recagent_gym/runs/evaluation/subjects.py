"""What the evaluations share: seeded draws, sampled users, donor swaps, and user models built on a training split.

Randomness: every draw comes from :func:`child_rng`, a generator derived from the evaluation seed and the names of
what is drawn (``("negatives", sampler, a, b, user)``), so adding a model or a setting never changes other draws.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recagent_gym.data.pools import child_rng as child_rng  # re-exported: the evaluations' seeded streams
from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.runs.config import Config
from recagent_gym.runs.config.evaluation_section import EvaluationConfig
from recagent_gym.users.protocol import UserModel

logger = logging.getLogger(__name__)


def history_counts(dataset: Dataset) -> np.ndarray:
    return np.bincount(dataset.interactions["user_id"].to_numpy(), minlength=dataset.n_users)


def sample_users(dataset: Dataset, n: int, min_interactions: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` distinct users (sorted) with at least ``min_interactions`` interactions; fewer if fewer qualify."""
    eligible = np.flatnonzero(history_counts(dataset) >= min_interactions)
    if len(eligible) == 0:
        raise DataError(f"{dataset.name}: no user has {min_interactions} or more interactions")
    if len(eligible) < n:
        logger.warning("%s: only %d users have >= %d interactions (asked for %d)", dataset.name, len(eligible),
                       min_interactions, n)  # fmt: skip
    return np.sort(rng.choice(eligible, size=min(n, len(eligible)), replace=False))


def pick_donors(
    dataset: Dataset, users: Sequence[int], min_interactions: int, rng: np.random.Generator
) -> dict[int, int]:
    """For each user another random user (with enough history) whose history replaces it in the swap check."""
    eligible = np.flatnonzero(history_counts(dataset) >= min_interactions)
    if len(eligible) < 2:
        raise DataError(f"{dataset.name}: the personalization check needs two users with enough history")
    donors = {}
    for user in users:
        others = eligible[eligible != user]
        donors[int(user)] = int(rng.choice(others))
    return donors


def swap_histories(train: Dataset, donors: dict[int, int], hidden: dict[int, Sequence[int]]) -> Dataset:
    """``train`` where each user ``u`` in ``donors`` has the donor's training history and profile instead of its own.

    The donor's interactions with ``hidden[u]`` (u's held-out items, or every candidate shown to u) are dropped, so
    a swap never hands an answer over, right or wrong. Other users keep their rows, so popularity and quality
    statistics barely move.
    """
    inter = train.interactions
    swapped_users = set(donors)
    kept = inter[~inter["user_id"].isin(swapped_users)]
    parts = [kept]
    users = train.users.copy()
    profile_columns = [c for c in users.columns if c not in ("user_id", "raw_id")]
    for user, donor in donors.items():
        rows = inter[(inter["user_id"] == donor) & ~inter["item_id"].isin(list(hidden.get(user, ())))].copy()
        rows["user_id"] = user
        parts.append(rows)
        for column in profile_columns:  # cell by cell: tuple-valued columns must not be broadcast
            users.at[user, column] = train.users.at[donor, column]
    interactions = pd.concat(parts, ignore_index=True).sort_values(["user_id", "timestamp"], kind="stable")
    return replace(train, users=users, interactions=interactions.reset_index(drop=True))


class PrecomputedEmbedder:
    """An embedder that answers known texts (the catalogue) from a precomputed matrix and the rest from ``base``.

    Lets every user model built during an evaluation reuse one pass of item embeddings.
    """

    def __init__(self, texts: Sequence[str], vectors: np.ndarray, base: Callable[[Sequence[str]], np.ndarray]):
        self._index = {text: row for row, text in enumerate(texts)}
        self._vectors = np.asarray(vectors, dtype=np.float32)
        self._base = base
        self.name = getattr(base, "name", type(base).__name__)
        self.dim = self._vectors.shape[1]

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing = [i for i, text in enumerate(texts) if text not in self._index]
        for i, text in enumerate(texts):
            if text in self._index:
                out[i] = self._vectors[self._index[text]]
        if missing:
            out[missing] = np.asarray(self._base([texts[i] for i in missing]), dtype=np.float32)
        return out


@dataclass
class Resources:
    """The dataset, configuration, and lazily built shared heavy parts (LLM, embedder, item embeddings)."""

    dataset: Dataset
    config: Config
    eval: EvaluationConfig
    llm: Any = None
    """A :class:`~recagent_gym.llm.protocol.LanguageModel`; built from ``config.llm`` on first use when None."""
    judge: Any = None
    """The judge's language model; built from ``eval.judge_llm`` (or shares ``llm``) on first use when None."""
    base_embedder: Any = None
    progress: bool = True
    """Show progress bars of the heavy steps (item embeddings)."""
    _embedder: Any = field(default=None, repr=False)
    _item_vectors: np.ndarray | None = field(default=None, repr=False)
    _distilled: Any = field(default=None, repr=False)
    prior_setting: str | None = field(default=None, init=False)
    """``user.prior_weights`` as configured, before ``auto`` is resolved (``evaluate agreement``'s ``llm+fit`` row)."""

    def __post_init__(self) -> None:
        # ``user.prior_weights: auto`` resolved once for this dataset and model: every evaluation reads a file or None.
        from recagent_gym.users.prior_default import configured_llm_name, resolve_prior

        self.prior_setting = self.config.user.prior_weights
        name = self.llm.name if self.llm is not None else configured_llm_name(self.config.llm)
        user = resolve_prior(self.config.user, self.dataset, name)
        if user is not self.config.user:
            self.config = self.config.model_copy(update={"user": user})

    def row_label(self, kind: str, model: Any) -> str | None:
        """The label of a row whose users say more than their kind, once ``model`` is built: the ``llm`` row names
        its language model and page-decision file (:meth:`llm_label`), the ``recsim`` and ``embedding`` rows whether
        their users are fitted on real choices (the defaults, ``user.recsim_fitted`` / ``user.embedding_fitted``:
        ``auto``) or hand-set; None for any other row."""
        if kind == "llm":
            return self.llm_label()
        if kind == "recsim":
            return f"RecSim ({'fitted' if getattr(model, 'fitted_from', None) else 'hand-set'})"
        if kind == "embedding":
            return f"Embedding ({'fitted' if getattr(model, 'fitted', False) else 'hand-set'})"
        return None

    def llm_label(self) -> str:
        """The ``llm`` row's label: the language model and the page-decision file the users read (the default
        users read ``users/fit_bundled.json``), e.g. ``LLM agent (embedded:gemma-3-270m; fit_bundled.json)``."""
        decision = self.config.user.prior_weights
        tail = f"; {Path(decision).name}" if decision else ""
        return f"LLM agent ({self.language_model().name}{tail})"

    @property
    def calibration(self) -> str | None:
        """The ``calibrate`` file of the prior rows (``prior``, ``llm+prior``, ``llm+prior-parts``), or None
        (:func:`~recagent_gym.users.prior_default.calibration_file`)."""
        from recagent_gym.users.prior_default import calibration_file, configured_llm_name

        name = self.llm.name if self.llm is not None else configured_llm_name(self.config.llm)
        return calibration_file(self.config.user.prior_weights, self.dataset, name)

    def language_model(self) -> Any:
        if self.llm is None:
            from recagent_gym.llm.factory import build_llm

            self.llm = build_llm(self.config.llm)
        return self.llm

    def judge_model(self) -> Any:
        if self.judge is None:
            if self.eval.judge_llm is None or self.eval.judge_llm == self.config.llm:
                self.judge = self.language_model()
            else:
                from recagent_gym.llm.factory import build_llm

                self.judge = build_llm(self.eval.judge_llm)
        return self.judge

    def usage_line(self) -> str:
        """The LLM calls, tokens and latency spent so far (models with a ``total`` usage meter), or ``""``."""
        parts = []
        for role, model in (("agent", self.llm), ("judge", self.judge)):
            total = getattr(model, "total", None)
            if total is None or (role == "judge" and model is self.llm):
                continue
            parts.append(f"{role} {getattr(model, 'name', '')}: {total.calls} calls, {total.total_tokens} tokens, "
                         f"{total.latency_s:.1f} s latency")  # fmt: skip
        return "LLM usage: " + "; ".join(parts) + "." if parts else ""

    def item_vectors(self) -> np.ndarray:
        """``(n_items, dim)`` unit item embeddings, computed once (cached on disk with ``embedding_cache_dir``)."""
        if self._item_vectors is None:
            from recagent_gym.llm.embedder import embed_items

            self._item_vectors = embed_items(
                self.dataset, self._base(), self.eval.embedding_cache_dir, progress=self.progress
            )
        return self._item_vectors

    def embedder(self) -> PrecomputedEmbedder:
        if self._embedder is None:
            texts = [self.dataset.item_text(i) for i in range(self.dataset.n_items)]
            self._embedder = PrecomputedEmbedder(texts, self.item_vectors(), self._base())
        return self._embedder

    def _base(self) -> Any:
        if self.base_embedder is None:
            if self.eval.embedder == "hashing":
                from recagent_gym.llm.testing import HashingEmbedder

                self.base_embedder = HashingEmbedder()
            else:
                from recagent_gym.llm.embedder import SentenceEmbedder

                self.base_embedder = SentenceEmbedder()
        return self.base_embedder

    def distilled_artefact(self) -> Any:
        """The distilled model that fits the dataset (loaded once), or a DataError saying why none does."""
        if self._distilled is None:
            from recagent_gym.runs.evaluation.distilled_row import required_artefact

            self._distilled = required_artefact(self.dataset, self.config)
        return self._distilled

    def build(self, kind: str, train: Dataset) -> UserModel:
        """A user model of ``kind`` built on ``train`` (the LLM agent shares one LLM across builds; the distilled
        users' tables re-encoded from ``train``)."""
        from recagent_gym.users.factory import build_user_model

        if kind == "distilled":
            from recagent_gym.runs.evaluation.distilled_row import build_distilled_row

            return build_distilled_row(train, self.distilled_artefact(), self.config, self.item_vectors())
        if kind == "embedding":
            from recagent_gym.users.embedding_user import EmbeddingUser

            # The factory's class, given the precomputed matrix: skips re-reading every item text per build.
            return EmbeddingUser(train, self.config.user, item_embeddings=self.item_vectors())
        llm = self.language_model() if kind == "llm" else None
        embedder = self.embedder() if kind == "llm" else None
        return build_user_model(kind, train, **self.config.user_model_sections(), llm=llm, embedder=embedder)
