"""The behavioural prior's ablation rows of the evaluations: ``prior`` (prior only), ``llm+prior`` (both) and
``llm+prior-parts`` (both, the agent's score taken apart).

With ``--user-model llm --user-model prior --user-model llm+prior`` and ``--set user.prior_weights=FILE`` (from
``recagent-gym calibrate``) the tables show the LLM's judgement alone, the prior alone (its ``prior_only`` weights)
and both (its ``both`` weights: one weight on the agent's score, whose LLM score and embedding term keep their
config weights) on the same users and candidates; ``llm+prior-parts`` uses the file's ``parts`` fit (the LLM's score
and the embedding term each at its own fitted weight, what ``user.prior_fit: parts`` gives the agents). The LLM rows
reuse the ``llm`` row's scores (same model, same generator: no second LLM call). Users the weights were fitted on are
never evaluated: when a prior row runs, sampled users that were calibration users are left out of every row (the
table says how many).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.runs.provenance import shown_path
from recagent_gym.users.agent.prior import BehaviouralPrior, PriorWeights, choice_scores, load_weights
from recagent_gym.users.prior_file import read_prior_file

PRIOR = "prior"
LLM_PRIOR = "llm+prior"
LLM_PRIOR_PARTS = "llm+prior-parts"
FIT_OF: dict[str, str] = {PRIOR: "prior_only", LLM_PRIOR: "both", LLM_PRIOR_PARTS: "parts"}
"""The weights file's fit each prior row uses."""
LLM_PRIOR_KINDS: tuple[str, ...] = (LLM_PRIOR, LLM_PRIOR_PARTS)
PRIOR_KINDS: tuple[str, ...] = (PRIOR, *LLM_PRIOR_KINDS)
LABELS = {PRIOR: "Behavioural prior", LLM_PRIOR: "LLM agent + prior", LLM_PRIOR_PARTS: "LLM agent + prior (parts fit)"}


def score_kind(kind: str) -> str:
    """The kind whose generator scores ``kind``: the LLM + prior rows score as ``llm`` (so they reuse its scores)."""
    return "llm" if kind in LLM_PRIOR_KINDS else kind


class PriorScorer:
    """The prior alone: ``features @ w`` with the ``prior_only`` weights."""

    def __init__(self, prior: BehaviouralPrior, weights: PriorWeights) -> None:
        self.prior, self.weights = prior, weights

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        return self.prior.features(user_id, items) @ self.weights.vector()


class PriorCombined:
    """The LLM agent's scores combined with the prior: ``both`` weights, or ``parts`` (the LLM's score and the
    embedding term each at its fitted weight)."""

    def __init__(self, model: Any, prior: BehaviouralPrior, weights: PriorWeights) -> None:
        self.model, self.prior, self.weights = model, prior, weights

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        # both from the one memoised LLM call (``Memo``): the agent's score and its two parts
        llm, embedding = self.model.score_components(user_id, items, rng)
        scores = np.asarray(self.model.score_items(user_id, items, rng), dtype=np.float64)
        return choice_scores(self.weights, self.prior.features(user_id, items), scores, llm, embedding)


class Memo:
    """A model whose ``score_items`` answers a repeated ``(user, items)`` from memory (the generator must be the
    same derivation for both callers: see :func:`score_kind`)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._seen: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}
        self._parts: dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, np.ndarray]] = {}

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        key = (int(user_id), tuple(int(i) for i in items))
        if key not in self._seen:
            if hasattr(self.model, "score_components"):  # the LLM agent: its score is its parts combined
                parts = self.score_components(user_id, items, rng)
                self._seen[key] = np.asarray(self.model.combine(*parts), dtype=np.float64)
            else:
                self._seen[key] = np.asarray(self.model.score_items(user_id, items, rng), dtype=np.float64)
        return self._seen[key]

    def score_components(
        self, user_id: int, items: Sequence[int], rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """The LLM agent's two parts (``score_components``), remembered like :meth:`score_items`; the first of the
        two to be asked for a ``(user, items)`` makes the one LLM call, the other reuses it."""
        key = (int(user_id), tuple(int(i) for i in items))
        if key not in self._parts:
            self._parts[key] = self.model.score_components(user_id, items, rng)
        return self._parts[key]


def weights_file(path: str | None, kind: str) -> str:
    """``path`` (``Resources.calibration``), or an error saying what the ``kind`` row needs."""
    if path is None:
        raise DataError(f"user model {kind!r} needs user.prior_weights to name a file from `recagent-gym calibrate` "
                        "(the shipped one applies to the bundled data and the embedded model only)")  # fmt: skip
    return str(path)


def made_on_users(dataset: Dataset, path: str | Path) -> set[int]:
    """The users of ``dataset`` the prior file ``path`` (a calibration or a fit) was made on, matched by raw id; none
    where it was made on another dataset (its raw ids name other people)."""
    meta = read_prior_file(path).meta
    if meta.get("dataset", dataset.name) != dataset.name:
        return set()
    wanted = {str(u) for u in meta.get("users_raw", [])}
    raw = dataset.users["raw_id"].astype(str).to_numpy()
    return {u for u in range(dataset.n_users) if raw[u] in wanted}


def without_calibration_users(dataset: Dataset, users: Sequence[int], path: str) -> list[int]:
    """``users`` minus those the prior file ``path`` was made on (:func:`made_on_users`): they are never evaluated."""
    fitted = made_on_users(dataset, path)
    kept = [int(u) for u in users if int(u) not in fitted]
    if not kept:
        raise DataError(f"every sampled user was a calibration user of {path}: sample more users")
    return kept


def build_prior_row(kind: str, train: Dataset, calibration: str | None, llm_model: Any) -> Any:
    """The ``prior`` or ``llm+prior`` scorer on ``train`` with the ``calibrate`` file ``calibration``
    (``llm_model``: the ``llm`` row's model, memoised)."""
    path = weights_file(calibration, kind)
    weights = load_weights(path, which=FIT_OF[kind])
    prior = BehaviouralPrior(train, window_days=float(weights.meta.get("window_days", 180.0)))
    if kind == PRIOR:
        return PriorScorer(prior, weights)
    return PriorCombined(llm_model, prior, weights)


def prior_record(calibration: str | None, models: Sequence[str]) -> dict[str, Any]:
    """The ``calibrate`` file's content when a prior row is evaluated (stored with the run and shown in its table)."""
    if not any(kind in PRIOR_KINDS for kind in models):
        return {}
    path = weights_file(calibration, "prior")
    record = {"file": path, "prior_only": load_weights(path, which="prior_only").to_dict()}
    for kind in LLM_PRIOR_KINDS:
        if kind in models:
            record[FIT_OF[kind]] = load_weights(path, which=FIT_OF[kind]).to_dict()
    record["calibration"] = {k: v for k, v in load_weights(path, which="prior_only").meta.items() if k != "users_raw"}
    return record


def prior_lines(record: dict[str, Any]) -> list[str]:
    """Markdown lines reporting the weights a run used (empty without a prior row)."""
    if not record:
        return []
    users = len(load_weights(record["file"], which="prior_only").meta.get("users_raw", []))
    lines = [f"Behavioural prior weights (`{shown_path(record['file'])}`, copied to `prior.json`; fitted by "
             f"`recagent-gym calibrate` on {users} train users, none evaluated here):", ""]  # fmt: skip
    labels = {"both": "LLM agent + prior", "parts": "LLM agent + prior (parts fit)", "prior_only": "prior only"}
    for name, label in labels.items():
        if name in record:
            weights = ", ".join(f"{k} {v:+.3f}" for k, v in record[name].items())
            lines.append(f"- {label}: {weights}")
    return [*lines, ""]
