"""Fit the Embedding users' choice on real choices (``user.embedding_fitted: auto``, the default).

The Embedding user (:mod:`recagent_gym.users.embedding_user`) chooses on a page by a softmax over the items' cosine
to its history vector at ``embedding_temperature``, beside a no-click option of cosine
``embedding_no_click_threshold``. Hand-set (0.1, 0.5) the users barely respond to what they are shown: on pages
holding one of the user's real next items their reward rose by 0.06-0.12 (issue 49), and on both MovieLens datasets
they failed a sanity row (future oracle above random, random above the anti-oracle).

The fit is the RecSim-style users' (:mod:`recagent_gym.users.recsim_fit`) with one term, the cosine: the same pages
of real choices and never-seen negatives (each user's last ``holdout`` items never read; the ``choices`` before them
the real choices; the history before those builds the user vectors), the same multinomial logit
``P(i) ~ exp(cos_i / T)``, ``P(none) ~ exp(c / T)``. The user vectors' recency half-life
(``embedding_half_life``) is the likelihood's best of :data:`HALF_LIVES` on those pages (bundled history and
MovieLens-1M: 5 items, against the plain mean). Maximum likelihood alone keeps the users about as flat as the
hand-set values (bundled data: T 0.095, c 0.61; response 0.05 on the fit's pages), because one page's choice says
little; the replayed real users respond with 1. So the temperature is chosen for the response: the likelihood's own
and the colder :data:`TEMPERATURES`, each with its likelihood-best no-click cosine ``c``; the one whose expected
response on the fit's pages (watch probability on pages holding a real choice minus on pages without) is highest is
kept, the warmest of those within :data:`TOLERANCE` of it (the bundled history the agreement test reads: half-life
5, T 0.01, c 0.549, response 0.18; 0.15 with the plain mean). Made once per process and dataset (under a minute on
MovieLens-1M); a field the config sets explicitly wins;
where the data cannot be fitted (too few users, no positive slope) the users keep the hand-set values and the log
says why.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import minimize_scalar

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.users.config import UserConfig
from recagent_gym.users.recsim_fit import Pages, _loss, build_pages, dataset_key, fit_pages

logger = logging.getLogger(__name__)

FITTED_FIELDS = ("embedding_temperature", "embedding_no_click_threshold", "embedding_half_life")
CHOICE_FIELDS = ("embedding_temperature", "embedding_no_click_threshold")
"""A config that sets both is not fitted (its half-life stays as it is)."""

Similarities = Callable[[Dataset, "float | None"], Callable[[int, np.ndarray], np.ndarray]]
"""``similarities(history, half_life)`` -> ``cos(user, items)`` of users built on ``history`` with that history
half-life (passed in by the user model)."""


TEMPERATURES = (0.05, 0.02, 0.01, 0.005)
"""Temperatures tried below the likelihood's own, each with its likelihood-best no-click cosine."""
HALF_LIVES: tuple[float | None, ...] = (None, 20.0, 10.0, 5.0, 2.0)
"""History half-lives tried (in items; None: the plain mean); the likelihood's best is kept."""
TOLERANCE = 0.01
"""Responses within this of the best count as equal; the warmest (least deterministic) of them is kept."""


class _HalfLifeFit(NamedTuple):
    """The likelihood fit of one half-life's cosines."""

    half_life: float | None
    pages: Pages
    slope: float
    mass: float
    log_likelihood: float
    null: float


def fit_embedding(
    dataset: Dataset, user: UserConfig, similarities: Similarities, *, holdout: int = 10, choices: int = 10,
    min_history: int = 10, pool: int = 50, pages: int = 8, page_size: int = 5, seed: int = 0, l2: float = 1e-3,
) -> dict[str, Any]:  # fmt: skip
    """``{"values": {temperature, threshold, half-life}, "meta": {...}}``; a :class:`DataError` where it cannot be
    fitted. One set of pages; each half-life of :data:`HALF_LIVES` is one column of cosines on them."""

    def features(history: Dataset, _: UserConfig) -> Callable[[int, np.ndarray], np.ndarray]:
        cosines = [similarities(history, half_life) for half_life in HALF_LIVES]
        return lambda user_id, items: np.stack([cos(user_id, items) for cos in cosines], axis=1)

    data, users = build_pages(dataset, user, holdout=holdout, choices=choices, min_history=min_history, pool=pool,
                              pages=pages, page_size=page_size, seed=seed, features=features)  # fmt: skip
    fits: list[_HalfLifeFit] = []
    why: list[str] = []
    for column, half_life in enumerate(HALF_LIVES):
        column_pages = Pages(data.x[:, :, column : column + 1], data.real)
        beta, mass, ll, null = fit_pages(column_pages, l2)
        if float(beta[0]) > 0.0:
            fits.append(_HalfLifeFit(half_life, column_pages, float(beta[0]), mass, ll, null))
        else:
            why.append(f"half-life {half_life}: the cosine does not raise real choices (slope {float(beta[0]):+.3f})")
    if not fits:
        raise DataError(f"{dataset.name}: {'; '.join(why)}")
    kept = max(fits, key=lambda fit: fit.log_likelihood)  # the first of equals: HALF_LIVES' order
    rows = [_row(kept.pages, 1.0 / kept.slope, math.log(kept.mass))]
    rows += [_row(kept.pages, t, _log_mass_at(kept.pages, 1.0 / t)) for t in TEMPERATURES
             if t < rows[0]["temperature"]]  # fmt: skip
    best = max(row["response"] for row in rows)
    chosen = next(row for row in rows if row["response"] >= best - TOLERANCE)
    if not -1.0 <= chosen["threshold"] <= 1.0:
        raise DataError(f"{dataset.name}: the fitted no-click cosine {chosen['threshold']:+.3f} lies outside [-1, 1]")
    ll, null = kept.log_likelihood, kept.null
    plain = next((fit for fit in fits if fit.half_life is None), None)  # the plain mean at the chosen temperature
    t = chosen["temperature"]
    plain_response = None if plain is None else _row(plain.pages, t, _log_mass_at(plain.pages, 1.0 / t))["response"]
    meta = {"dataset": dataset.name, "users": len(users), "pages": len(data.x), "response": chosen["response"],
            "plain_mean_response": plain_response,
            "real_watch_pages": float(data.real.any(axis=1).mean()), "log_likelihood": ll,
            "null_log_likelihood": null, "mean_ll_gain_per_page": (ll - null) / len(data.x), "grid": rows,
            "half_lives": [{"half_life": f.half_life, "log_likelihood": f.log_likelihood} for f in fits],
            "not_fitted": why}  # fmt: skip
    return {"values": {"embedding_temperature": round(chosen["temperature"], 6),
                       "embedding_no_click_threshold": round(chosen["threshold"], 6),
                       "embedding_half_life": kept.half_life}, "meta": meta}  # fmt: skip


def _log_mass_at(data: Pages, slope: float) -> float:
    """The likelihood-best log no-click mass with the cosine's slope held at ``slope``."""
    result = minimize_scalar(lambda log_m: _loss(np.array([slope, log_m]), data, 0.0)[0])
    return float(result.x)


def _row(data: Pages, temperature: float, log_mass: float) -> dict[str, float]:
    """One grid row: the temperature, its no-click cosine, the log-likelihood and the expected response (watch
    probability on pages holding a real choice minus on pages without; the replayed real users' is 1)."""
    slope = 1.0 / temperature
    u = data.x[:, :, 0] * slope
    top = u.max(axis=1, keepdims=True)
    items = np.exp(u - top).sum(axis=1)
    p_watch = items / (items + np.exp(log_mass - top[:, 0]))
    real = data.real.any(axis=1)
    return {
        "temperature": float(temperature),
        "threshold": float(log_mass / slope),
        "log_likelihood": -_loss(np.array([slope, log_mass]), data, 0.0)[0],
        "response": float(p_watch[real].mean() - p_watch[~real].mean()),
    }


_FITTED: dict[tuple[Any, ...], dict[str, Any] | str] = {}
"""Fits (or why there is none) by dataset and item-vector fingerprint, made in this process (a handful at most)."""


def fitted_config(config: UserConfig, dataset: Dataset, items: np.ndarray, similarities: Similarities) -> UserConfig:
    """``config`` with the fit's values (:func:`fit_embedding`) for the fields it does not set; unchanged unless
    ``embedding_fitted`` is ``auto``, and with ``embedding_fitted`` None where the config sets both fields or the
    data cannot be fitted (so that :attr:`EmbeddingUser.fitted` says what the users run with)."""
    if config.embedding_fitted != "auto":
        return config
    if set(CHOICE_FIELDS) <= config.model_fields_set:  # both set by the config: nothing left to fit
        return config.model_copy(update={"embedding_fitted": None})
    key = (*dataset_key(dataset), items.shape, float(np.round(items.sum(), 6)))
    if key not in _FITTED:
        if len(_FITTED) >= 4:
            _FITTED.pop(next(iter(_FITTED)))
        _FITTED[key] = _fit_or_why(dataset, config, similarities)
    fit = _FITTED[key]
    if isinstance(fit, str):
        return config.model_copy(update={"embedding_fitted": None})
    update = {k: v for k, v in fit["values"].items() if k not in config.model_fields_set}
    return config.model_validate({**config.model_dump(), **update})


def _fit_or_why(dataset: Dataset, config: UserConfig, similarities: Similarities) -> dict[str, Any] | str:
    """The fit, said in the log; or why there is none (a warning)."""
    started = time.perf_counter()
    try:
        fit = fit_embedding(dataset, config, similarities)
    except DataError as error:
        logger.warning("user.embedding_fitted=auto: cannot fit the Embedding users on %s (%s); they keep the "
                       "hand-set temperature and no-click cosine", dataset.name, error)  # fmt: skip
        return str(error)
    meta = fit["meta"]
    plain = meta["plain_mean_response"]
    logger.info("user.embedding_fitted=auto: the Embedding users fitted on %s's real choices (%d users, %.1f s): "
                "temperature %.4f, no-click cosine %+.3f, history half-life %s; response on the fit's pages %.3f "
                "(%s with the plain mean)", dataset.name, meta["users"], time.perf_counter() - started,
                *fit["values"].values(), meta["response"], "n/a" if plain is None else f"{plain:.3f}")  # fmt: skip
    return fit
