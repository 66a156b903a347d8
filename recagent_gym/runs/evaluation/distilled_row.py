"""The distilled users as a row of the per-item evaluations (discrimination, preference, rating) and of
``evaluate agreement``: the shipped (or ``user.distilled_path``) model, its tables re-encoded on the evaluation's
training split (:func:`~recagent_gym.runs.distill.reencode.reencoded`: the shipped tables encode each user's most
recent items, which a leave-last-out split holds out), and never a user the model was distilled on.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def left_out_why(models: Sequence[str], llm_fit: str | None = None) -> str:
    """Why an evaluation left sampled users out: the rows that never evaluate the users they were fitted on
    (``llm_fit``: the page-decision file the ``llm`` row reads, if any)."""
    from recagent_gym.runs.evaluation.prior_ablation import PRIOR_KINDS

    why = ["the behavioural prior was calibrated on them"] if any(m in PRIOR_KINDS for m in models) else []
    if LLM in models and llm_fit:
        why.append("the LLM users' page decision was fitted on them")
    return " or ".join(why + (["the distilled users were fitted on them"] if DISTILLED in models else []))


def without_fitted_users(resources: Any, users: Sequence[int]) -> list[int]:
    """``users`` minus those a row about to run was made on: the prior rows' calibration, the ``llm`` row's
    page-decision fit (the default users read ``users/fit_bundled.json``, made on 80 train users of the bundled
    data) and the distilled users' training users. No evaluated user's future reaches a model it is scored by."""
    from recagent_gym.runs.evaluation.prior_ablation import PRIOR_KINDS, weights_file, without_calibration_users

    models, full = resources.eval.user_models, resources.dataset
    kept = [int(u) for u in users]
    if any(kind in PRIOR_KINDS for kind in models):
        kept = without_calibration_users(full, kept, weights_file(resources.calibration, "prior"))
    fit = llm_fit_file(resources)
    if LLM in models and fit:
        kept = without_calibration_users(full, kept, fit)
    if DISTILLED in models:
        kept = without_distilled_users(kept, resources.distilled_artefact())
    return kept


def llm_fit_file(resources: Any) -> str | None:
    """The page-decision file the ``llm`` row's users read (``user.prior_weights`` resolved), or None."""
    setting = resources.config.user.prior_weights
    return str(setting) if setting else None


def build_distilled_row(train: Dataset, artefact: Any, config: Any, item_vectors: Any) -> Any:
    """The distilled user model on ``train``, its tables re-encoded from ``train`` (``item_vectors``: the item text
    embeddings it was fitted with)."""
    from recagent_gym.runs.distill.reencode import reencoded
    from recagent_gym.users.distilled.user import DistilledUser

    tables = reencoded(artefact, train, config, text=item_vectors)
    return DistilledUser(
        train, tables, rating_timing=config.user.feeling_timing, full_sessions=config.user.full_sessions
    )
