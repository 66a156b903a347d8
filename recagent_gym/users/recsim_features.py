"""The RecSim-style user's item features that come from real behaviour, and its weights fitted on real choices.

- :func:`item_popularity`: log interaction count mapped to ``[-1, 1]`` (the most watched item is 1, an item nobody
  watched -1).
- :func:`collaborative_item_latents`: unit item vectors from a truncated SVD of the binary user x item matrix, so
  that a user's latent taste built from the history (``recsim_latent_from_history``) scores items the way
  collaborative filtering does (items watched by the same people point the same way). The alternative, ``random``
  latents, carries no real signal: its affinity is the benchmark's invention.
- :class:`FittedWeights`: the utility's weights (genre interest, latent affinity, quality, popularity) and the
  no-click mass that ``recagent-gym users fit-recsim`` fits on real choices, as a JSON file. ``user.recsim_fitted``
  points to one (``bundled``: the file shipped for the bundled dataset); its values are the defaults of the
  fields it names, so a field set explicitly in the config wins.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.settings_section import ConfigError

logger = logging.getLogger(__name__)

BUNDLED_FIT = Path(__file__).parent / "recsim_bundled.json"
"""The weights fitted on the bundled dataset's real choices (``recagent-gym users fit-recsim``)."""

FITTED_FIELDS = (
    "recsim_interest_weight",
    "recsim_hidden_weight",
    "recsim_quality_weight",
    "recsim_popularity_weight",
    "recsim_no_click_mass",
    "recsim_item_latents",
    "recsim_latent_from_history",
    "recsim_interest_noise",
    "recsim_allure",
)
"""The user-section fields a fit sets: the four weights, the no-click mass, and the settings its features assume
(collaborative latents built wholly from the history, no interest noise, no allure)."""


def item_popularity(dataset: Dataset) -> np.ndarray:
    """``log(1 + count)`` per item, scaled so that the most watched item is 1 and an unwatched one -1."""
    counts = np.bincount(dataset.interactions["item_id"].to_numpy(), minlength=dataset.n_items).astype(np.float64)
    top = math.log1p(counts.max()) if len(counts) and counts.max() > 0 else 1.0
    return 2.0 * np.log1p(counts) / top - 1.0


SMALL_SVD = 64
"""At most this many users (or items) the SVD is dense: tiny datasets (tests, fixtures) tie singular values, and
there ARPACK returns another basis of the tied subspace from call to call."""


def collaborative_item_latents(dataset: Dataset, dims: int, seed: int) -> np.ndarray:
    """``(n_items, dims)`` unit vectors: the item side of a truncated SVD of the binary user x item matrix (rows of
    items without interactions are 0). Deterministic for a seed (the solver's start vector is seeded; small matrices
    are decomposed densely, :data:`SMALL_SVD`)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.linalg import svds

    inter = dataset.interactions
    matrix = csr_matrix(
        (np.ones(len(inter)), (inter["user_id"].to_numpy(), inter["item_id"].to_numpy())),
        shape=(dataset.n_users, dataset.n_items),
    )
    matrix.data[:] = 1.0  # repeated watches count once
    k = min(dims, min(matrix.shape) - 1)
    if k < 1:
        return np.zeros((dataset.n_items, dims), dtype=np.float64)
    if min(matrix.shape) <= SMALL_SVD:  # LAPACK: deterministic where ARPACK's basis of tied singular values is not
        _, singular, vt = np.linalg.svd(matrix.toarray(), full_matrices=False)
        singular, vt = singular[:k], vt[:k]
    else:
        v0 = np.random.default_rng(seed).standard_normal(min(matrix.shape))
        _, singular, vt = svds(matrix, k=k, v0=v0)
    order = np.argsort(-singular)
    items = (vt[order].T * np.sqrt(singular[order])).astype(np.float64)
    # The sign of an SVD factor is arbitrary: fix it (largest-magnitude entry positive) so runs agree.
    signs = np.sign(items[np.abs(items).argmax(axis=0), np.arange(k)])
    items *= np.where(signs == 0, 1.0, signs)
    out = np.zeros((dataset.n_items, dims), dtype=np.float64)
    out[:, :k] = items
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out


def history_directions(dataset: Dataset, items: np.ndarray) -> np.ndarray:
    """``(n_users, dims)``: the unit direction of each user's history among the ``items`` latents (the sum of the
    latents of the items the user watched, normalised; 0 for a user without history)."""
    inter = dataset.interactions
    users = np.zeros((dataset.n_users, items.shape[1]), dtype=np.float64)
    np.add.at(users, inter["user_id"].to_numpy(), items[inter["item_id"].to_numpy()])
    return users / np.maximum(np.linalg.norm(users, axis=1, keepdims=True), 1e-12)


@dataclass
class FittedWeights:
    """A fit of the RecSim-style user on real choices: ``values`` of :data:`FITTED_FIELDS`, and how it was made."""

    values: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": 1, "values": self.values, "meta": self.meta}

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, where: str | Path) -> FittedWeights:
        """The fit at ``where`` (``bundled`` or a path to its JSON); a configuration error for anything else."""
        path = BUNDLED_FIT if str(where) == "bundled" else Path(where)
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ConfigError(f"user.recsim_fitted: cannot read {path}: {error}") from error
        values = document.get("values") if isinstance(document, dict) else None
        if not isinstance(values, dict) or set(values) - set(FITTED_FIELDS):
            raise ConfigError(f"user.recsim_fitted: {path} is not a RecSim fit (a 'values' mapping of {FITTED_FIELDS})")
        for name, value in values.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"user.recsim_fitted: {path}: {name} is {value}")
        return cls(values, document.get("meta") or {})


def bundled_fit_applies(dataset: Dataset) -> bool:
    """Whether the shipped fit was made on ``dataset`` (the same numbers of users and items)."""
    meta = FittedWeights.load("bundled").meta
    return (meta.get("n_items"), meta.get("n_users")) == (dataset.n_items, dataset.n_users)


def apply_fit(
    config: Any, dataset: Dataset | None = None, fit_here: Callable[[Dataset], FittedWeights] | None = None
) -> Any:
    """``config`` (a :class:`~recagent_gym.users.config.UserConfig`) with its fit's values as defaults: a fitted
    field the config set explicitly keeps the config's value. Unchanged when ``recsim_fitted`` is None. With
    ``auto`` on a dataset the shipped fit was not made on, the users are fitted on ``dataset``'s real choices by
    ``fit_here`` (about 10 s; hand-set weights when it is None, as the fit's own features are). A fit file made on
    another dataset than ``dataset`` (other numbers of users or items) is a configuration error."""
    where = config.recsim_fitted
    if where is None:
        return config
    fit = FittedWeights.load("bundled" if where == "auto" else where)
    if dataset is not None and (fit.meta.get("n_items"), fit.meta.get("n_users")) != (dataset.n_items, dataset.n_users):
        if where != "auto":
            raise ConfigError(f"user.recsim_fitted: {where} was fitted on {fit.meta.get('dataset')!r}, not on "
                              f"{dataset.name!r}; fit one with 'recagent-gym users fit-recsim'")  # fmt: skip
        if fit_here is None:  # the fit's own feature builder: hand-set weights by design
            return config.model_copy(update={"recsim_fitted": None})
        try:
            fit = fit_here(dataset)
        except DataError as error:
            logger.warning("user.recsim_fitted=auto: cannot fit the RecSim-style users on %s (%s); they keep their "
                           "hand-set weights", dataset.name, error)  # fmt: skip
            return config.model_copy(update={"recsim_fitted": None})
    update = {k: v for k, v in fit.values.items() if k not in config.model_fields_set}
    try:
        return config.model_validate({**config.model_dump(), **update})
    except ValueError as error:
        raise ConfigError(f"user.recsim_fitted: {config.recsim_fitted}: {error}") from error
