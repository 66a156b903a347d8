"""``user.prior_weights: auto``: the page decision ``users fit-agreement`` fitted on the bundled data, where it
applies; and the behavioural prior ``calibrate`` fitted there, for the evaluations' ``llm+prior`` rows.

``fit_bundled.json`` is ``recagent-gym users fit-agreement`` on the bundled data (train users that no default
evaluation samples): the decision's weights (the LLM's title-continuation score, the embedding relevance, an
intercept, and the prior's terms only where the fit's validation users said they raise agreement: the affinity) fitted
to the real outcomes of the pages a zoo of history recommenders showed them
(:mod:`recagent_gym.runs.evaluation.agreement.fit`). :func:`resolve_prior` turns ``auto`` (the default) into that
file, with its item score (``llm_item_score``) and the ``parts`` fit as defaults of fields the config does not set,
by one rule on every dataset: with the model it was fitted for, and on another dataset only where the fit uses no
prior term but portable ones (:data:`~recagent_gym.users.prior_file.PORTABLE_FEATURES`: its weights then price the
LLM's score, the embedding relevance and the user's collaborative affinity, which every dataset's history gives;
the other terms price one catalogue's popularity and time). Elsewhere (another model, ``decision_strategy:
direct``, a fit with such terms on another dataset) ``auto`` is off and the log says why. ``bundled`` asks for the
file and is an error where it does not apply; ``null`` turns it off; a path uses that file (a fit or a calibration)
as it is.

``prior_bundled.json`` is ``recagent-gym calibrate`` with the title-continuation item score on the bundled data (120
train users, their raw ids in the file; every evaluation with it leaves them out; fitted when the score still read
the title's year): the ``llm+prior`` and ``llm+prior-parts`` rows of the evaluations use it (:func:`shipped_file`).
"""

from __future__ import annotations

import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from recagent_gym.llm.config import EMBEDDED_MODEL
from recagent_gym.settings_section import ConfigError
from recagent_gym.users.prior_file import PARTS_BLOCK, PORTABLE_FEATURES, PriorFile, is_fit_file, read_prior_file

logger = logging.getLogger(__name__)

BUNDLED_FIT_FILE = Path(__file__).parent / "fit_bundled.json"
"""``recagent-gym users fit-agreement`` on the bundled data (see the module docstring)."""
BUNDLED_CALIBRATION = Path(__file__).parent / "prior_bundled.json"
"""``recagent-gym calibrate`` on the bundled data (120 train users, title-continuation score), for the evaluations'
``llm+prior`` and ``llm+prior-parts`` rows, which need a calibrate file."""
BUNDLED_PRIOR = BUNDLED_FIT_FILE
"""The file ``auto`` resolves to (see the module docstring)."""
BUNDLED_FIT = PARTS_BLOCK
"""The fit of :data:`BUNDLED_PRIOR` the agents use by default (the one block ``users fit-agreement`` writes)."""
AUTO, BUNDLED = "auto", "bundled"
"""``user.prior_weights`` values that name the shipped calibration."""


@lru_cache(maxsize=1)
def bundled_prior() -> PriorFile:
    return read_prior_file(BUNDLED_PRIOR)


_said: set[str] = set()


def _say_once(message: str, level: int = logging.INFO) -> None:
    """Log ``message`` the first time only (a run resolves the same setting in several places)."""
    if message not in _said:
        _said.add(message)
        logger.log(level, message)


def shipped_file(path: Path, dataset: Any, llm_name: str | None) -> str | None:
    """``path`` (:data:`BUNDLED_FIT_FILE` or :data:`BUNDLED_CALIBRATION`) where it applies to ``dataset`` and the
    model named ``llm_name``, else None."""
    if not path.is_file():
        return None
    meta = dict(read_prior_file(path).meta)
    same = (dataset.name, dataset.n_users, dataset.n_items) == (meta.get("dataset"), meta.get("n_users"),
                                                                 meta.get("n_items"))  # fmt: skip
    return str(path) if same and llm_name == meta.get("llm") else None


def calibration_file(where: str | None, dataset: Any, llm_name: str | None) -> str | None:
    """The ``calibrate`` file the evaluations' prior rows (``prior``, ``llm+prior``, ``llm+prior-parts``) use when
    ``user.prior_weights`` is ``where``: that file where it is a calibration, else the shipped calibration where it
    applies (:func:`shipped_file`), else None."""
    if where is None:
        return None
    if where not in (AUTO, BUNDLED) and not is_fit_file(where):
        return str(where)
    return shipped_file(BUNDLED_CALIBRATION, dataset, llm_name)


def configured_llm_name(llm: Any) -> str | None:
    """The name (``LanguageModel.name``) of the model ``llm`` (an ``LLMConfig``) builds, where known without building
    it: the packaged embedded model's; None for anything else."""
    if llm is None or getattr(llm, "backend", None) != "embedded" or getattr(llm, "model_path", None) is not None:
        return None
    return f"embedded:{EMBEDDED_MODEL}"


def catalogue_bound(meta: dict[str, Any]) -> bool:
    """Whether a weights file's ``meta`` says it prices one catalogue: a calibration, or a fit that uses a prior term
    beyond :data:`~recagent_gym.users.prior_file.PORTABLE_FEATURES` (fits written before ``prior_terms`` existed: any
    prior term)."""
    terms = meta.get("prior_terms")
    if terms is None:
        return bool(meta.get("prior_used", True))
    return bool(set(terms) - PORTABLE_FEATURES)


def _why_not(user: Any, dataset: Any, llm_name: str | None, meta: dict[str, Any]) -> str | None:
    other = (dataset.name, dataset.n_users, dataset.n_items) != (meta.get("dataset"), meta.get("n_users"),
                                                                 meta.get("n_items"))  # fmt: skip
    if other and catalogue_bound(meta):  # a calibration, or a fit with prior terms: one catalogue's
        fitted = f"{meta.get('dataset')!r} ({meta.get('n_users')} users, {meta.get('n_items')} items)"
        return (f"its prior terms were fitted on {fitted}, not on {dataset.name!r} ({dataset.n_users} users, "
                f"{dataset.n_items} items)")  # fmt: skip
    if llm_name != meta.get("llm"):
        return f"it prices the scores of {meta.get('llm')}, and the agents run {llm_name or 'another model'}"
    if user.decision_strategy == "direct":
        return "user.decision_strategy=direct produces no item scores to adjust"
    return None


def resolve_prior(user: Any, dataset: Any, llm_name: str | None) -> Any:
    """``user`` (a ``UserConfig``) with ``prior_weights`` ``auto`` / ``bundled`` resolved for ``dataset`` and the model
    named ``llm_name`` (see the module docstring); any other value is returned unchanged."""
    where = user.prior_weights
    if where is None:
        return user
    if where not in (AUTO, BUNDLED):
        if is_fit_file(where) and user.prior_fit != PARTS_BLOCK:  # a fit file holds one fit, ``parts``: that one
            user = user.model_copy(update={"prior_fit": PARTS_BLOCK})
        return _with_file_defaults(user, read_prior_file(where), {})
    shipped = bundled_prior()
    reason = _why_not(user, dataset, llm_name, dict(shipped.meta))
    if reason is not None:
        if where == BUNDLED:
            raise ConfigError(f"user.prior_weights=bundled: {BUNDLED_PRIOR.name} does not apply here: {reason}")
        _say_once(f"user.prior_weights=auto: the shipped fit {BUNDLED_PRIOR.name} does not apply ({reason}); the "
                  "LLM agents use their own scores. Fit one with 'recagent-gym users fit-agreement'.")  # fmt: skip
        return user.model_copy(update={"prior_weights": None})
    resolved = _with_file_defaults(user, shipped, {"prior_weights": str(BUNDLED_PRIOR), "prior_fit": BUNDLED_FIT})
    fitted = "" if shipped.meta.get("dataset") == dataset.name else f", fitted on {shipped.meta.get('dataset')}"
    _say_once(
        f"user.prior_weights={where}: the page decision shipped in {BUNDLED_PRIOR.name} ({resolved.prior_fit} "
        f"fit, {resolved.llm_item_score} item score{fitted}; --set user.prior_weights=null turns it off)"
    )
    return resolved


def _with_file_defaults(user: Any, file: PriorFile, update: dict[str, Any]) -> Any:
    """``user`` with ``update`` and the item score ``file`` was fitted with (``llm_item_score``, recorded by
    ``calibrate``) as defaults of the fields the config does not set; a set item score that differs is logged."""
    update = {**update, "llm_item_score": file.meta.get("llm_item_score")}
    unset = set(type(user).model_fields) - user.model_fields_set | {"prior_weights"}
    update = {k: v for k, v in update.items() if v is not None and k in unset}
    fitted = file.meta.get("llm_item_score")
    if "llm_item_score" in user.model_fields_set and fitted not in (None, user.llm_item_score):
        _say_once(f"user.llm_item_score={user.llm_item_score}, but the prior weights {file.path} were fitted on "
                  f"{fitted} scores", logging.WARNING)  # fmt: skip
    if all(getattr(user, k) == v for k, v in update.items()):
        return user
    checked = type(user).model_validate({**user.model_dump(), **update})  # the file's values checked as settings
    # a copy, not the validated model: that would mark every field as set, and fields set explicitly win over other
    # fits' defaults (``user.recsim_fitted``)
    return user.model_copy(update={k: getattr(checked, k) for k in update})


def keep_weights(config: Any, dataset: Any, out: str | Path, llm: Any = None) -> str | None:
    """The prior file the LLM agents of ``config`` (the whole configuration) use on ``dataset`` with ``llm`` (the
    model they were given; None: the one ``config.llm`` builds), copied to ``out/prior.json`` so that the run folder
    keeps the weights; None (nothing written) when they use none."""
    name = llm.name if llm is not None else configured_llm_name(config.llm)
    user = resolve_prior(config.user, dataset, name)
    if user.prior_weights is None:
        return None
    target = Path(out) / "prior.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    if Path(user.prior_weights).resolve() != target.resolve():  # atomic: a killed copy never leaves half a file
        tmp = target.with_name(f".prior.json.{os.getpid()}.tmp")
        tmp.write_bytes(Path(user.prior_weights).read_bytes())
        os.replace(tmp, target)
    return str(user.prior_weights)


def prior_note(config: Any, dataset: Any) -> str:
    """How the LLM agents of ``config`` score items on ``dataset``, for a report's title or header."""
    user = resolve_prior(config.user, dataset, configured_llm_name(config.llm))
    if user.prior_weights is None:
        return f"{user.llm_item_score} item score, no fitted decision or prior"
    fit = f"{user.prior_fit} fit, {Path(user.prior_weights).name}"
    what = "fitted page decision" if is_fit_file(user.prior_weights) else "behavioural prior"
    return f"{user.llm_item_score} item score + {what} ({fit})"
