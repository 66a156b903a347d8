"""The distilled users as a row of the per-item evaluations (discrimination, preference, rating) and of
``evaluate agreement``: the shipped (or ``user.distilled_path``) model, its tables re-encoded on the evaluation's
training split (:func:`~recagent_gym.runs.distill.reencode.reencoded`: the shipped tables encode each user's most
recent items, which a leave-last-out split holds out), and never a user the model was distilled on.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recagent_gym.data.schema import DataError, Dataset

DISTILLED = "distilled"
LLM = "llm"


def fitting_artefact(dataset: Dataset, config: Any) -> tuple[Any, str | None]:
    """The distilled artefact when one fits ``dataset`` (same items, same users by raw id), else None and why."""
    from recagent_gym.users.distilled.errors import DistillError
    from recagent_gym.users.distilled.saved_model import Artefact
    from recagent_gym.users.distilled.user import BUNDLED_DIR

    try:
        artefact = Artefact.load(config.user.distilled_path or BUNDLED_DIR)
    except DistillError as error:
        return None, str(error)
    if artefact.meta.get("n_items") != dataset.n_items or artefact.meta.get("user_raw_ids") != [
        str(r) for r in dataset.users["raw_id"]
    ]:
        return None, f"the distilled model was fitted on {artefact.meta.get('dataset')!r}, not this dataset"
    return artefact, None


def required_artefact(dataset: Dataset, config: Any) -> Any:
    """:func:`fitting_artefact`, or a DataError that says why none fits and how to run without the row."""
    artefact, why = fitting_artefact(dataset, config)
    if artefact is None:
        raise DataError(
            f"--user-model distilled: {why} (distill one for {dataset.name} with `recagent-gym users collect` and "
            f"`users distill`, pass it with --set user.distilled_path=DIR, or leave the distilled row out)"
        )
    return artefact


def without_distilled_users(users: Sequence[int], artefact: Any) -> list[int]:
    """``users`` minus those the distilled model was fitted on: they are never evaluated."""
    fitted = {int(u) for u in artefact.meta.get("train_users", [])}
    kept = [int(u) for u in users if int(u) not in fitted]
    if not kept:
        raise DataError("every sampled user was one the distilled model was fitted on: sample more users")
    return kept


LEFT_OUT_WHY = (
    "a model was made on them: the behavioural prior's calibration, the LLM users' page-decision fit or the distilled "
    "users (left out whichever rows run, so the draw is the same for every choice of rows)"
)
"""Why an evaluation leaves sampled users out (:func:`artefact_users`)."""


def artefact_users(dataset: Dataset, config: Any, calibration: str | None, artefact: Any) -> set[int]:
    """Users of ``dataset`` that a model artefact for it was made on, whichever rows run: the distilled users' training
    users (``artefact``: the distilled model that fits the dataset, or None), and the users of the page-decision fit
    and the calibration that the config names or ships for this dataset. No evaluation draws them, so its users do
    not depend on the rows asked for (pages stay comparable) and no evaluated user's future reaches a model."""
    from recagent_gym.runs.evaluation.prior_ablation import made_on_users
    from recagent_gym.users.prior_default import AUTO, BUNDLED, BUNDLED_CALIBRATION, BUNDLED_FIT_FILE

    users: set[int] = set()
    if artefact is not None:
        users |= {int(u) for u in artefact.meta.get("train_users", [])}
    setting = config.user.prior_weights
    files = {BUNDLED_FIT_FILE, BUNDLED_CALIBRATION, calibration}
    if setting not in (None, AUTO, BUNDLED):
        files.add(setting)
    for path in {Path(f).resolve() for f in files if f is not None}:  # each file read once
        if path.is_file():
            users |= made_on_users(dataset, path)
    return users


def without_fitted_users(resources: Any, users: Sequence[int]) -> list[int]:
    """``users`` minus :func:`artefact_users` (the per-item evaluations: discrimination, preference, rating)."""
    artefact, _ = fitting_artefact(resources.dataset, resources.config)
    left_out = artefact_users(resources.dataset, resources.config, resources.calibration, artefact)
    kept = [int(u) for u in users if int(u) not in left_out]
    if not kept:
        raise DataError(f"every sampled user is one a model was made on ({len(left_out)} such users): sample more")
    return kept


def build_distilled_row(train: Dataset, artefact: Any, config: Any, item_vectors: Any) -> Any:
    """The distilled user model on ``train``, its tables re-encoded from ``train`` (``item_vectors``: the item text
    embeddings it was fitted with)."""
    from recagent_gym.runs.distill.reencode import reencoded
    from recagent_gym.users.distilled.user import DistilledUser

    tables = reencoded(artefact, train, config, text=item_vectors)
    return DistilledUser(train, tables, rating_timing=config.user.feeling_timing)
