"""Fit the RecSim-style user's utility on real choices (``recagent-gym users fit-recsim``, and ``user.recsim_fitted:
auto`` on a dataset without a shipped fit).

Protocol:

1. **Never the evaluation's future.** Each user's last ``holdout`` items (the agreement test's real future, 10 by
   default) are dropped first; nothing below reads them. Of what is left, each user's last ``choices`` items are
   the real choices to explain, and the rest (all users) is the history the features are built on: the fit sits
   strictly before the period the agreement test evaluates, like every recommender it compares.
2. **Pages.** Per user with enough history, a pool of ``pool`` candidates (the real choices among never-seen
   negatives, with the agreement test's two samplers) and ``pages`` random pages of ``page_size`` from it. A page
   is a real watch when it shows one of the real choices (the replayed real user watches it), else no watch.
3. **Model.** The RecSim user's page choice: a multinomial logit over the page's items plus the no-click option,
   ``P(i) ~ exp(x_i . beta)``, ``P(none) ~ m``, with ``x_i`` the user's unweighted utility terms
   (:meth:`RecSimUser.features`: genre interest, collaborative affinity, quality, popularity; latents built wholly
   from the history, no noise). The likelihood of a page: ``P(the user watches one of its real choices)`` for a
   real watch, ``P(none)`` otherwise, so a simulated watch of an item the real user passed over is a miss.
4. **Fit.** Maximum likelihood (L-BFGS, L2 ``l2 * |beta|^2``); the utility weights are ``beta * T`` (T the
   choice temperature) and the no-click mass ``m``.

The result (:class:`~recagent_gym.users.recsim_features.FittedWeights`) names the dataset, users, pages and the
log-likelihood against the null model (every weight 0).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from recagent_gym.data.pools import build_pools, child_rng
from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.data.splits import leave_last_out
from recagent_gym.users.config import UserConfig
from recagent_gym.users.recsim_features import FittedWeights

logger = logging.getLogger(__name__)

TERMS = ("recsim_interest_weight", "recsim_hidden_weight", "recsim_quality_weight", "recsim_popularity_weight")
SAMPLERS = ("uniform", "popularity-matched")


@dataclass
class Pages:
    """``x``: ``(n_pages, page_size, 4)`` utility terms; ``real``: ``(n_pages, page_size)`` the real choices."""

    x: np.ndarray
    real: np.ndarray


def fit_features(user: UserConfig) -> UserConfig:
    """The user section the fit measures its terms with: collaborative latents from the history, no noise."""
    update = {"recsim_fitted": None, "recsim_item_latents": "collaborative", "recsim_latent_from_history": 1.0,
              "recsim_interest_noise": 0.0, "recsim_allure": 0.0}  # fmt: skip
    return user.model_copy(update=update)


Features = Callable[[Dataset, UserConfig], Callable[[int, np.ndarray], np.ndarray]]
"""``features(history, user section)`` -> ``terms(user, items)``: the RecSim user's unweighted utility terms
(:meth:`~recagent_gym.users.recsim.RecSimUser.features`; passed in, so that this module does not import the user)."""


def choice_split(dataset: Dataset, *, holdout: int, choices: int, min_history: int) -> Any:
    """Each user's last ``holdout`` items dropped (never read), the ``choices`` before them held out as the real
    choices; the rest is ``.train``, the history the features are built on."""
    base = leave_last_out(dataset, holdout, min_train=min_history).train
    return leave_last_out(base, choices, min_train=min_history)


def build_pages(
    dataset: Dataset, user: UserConfig, *, holdout: int, choices: int, min_history: int, pool: int, pages: int,
    page_size: int, seed: int, features: Features,
) -> tuple[Pages, list[int]]:  # fmt: skip
    """Random pages of real choices and never-seen negatives (see the module docstring); ``(pages, users)``."""
    split = choice_split(dataset, holdout=holdout, choices=choices, min_history=min_history)
    users = sorted(split.held_out)
    if len(users) < 2:
        raise DataError(f"{dataset.name}: fewer than 2 users with {holdout + choices + min_history} items to fit on")
    terms_of = features(split.train, fit_features(user))
    xs, reals = [], []
    for sampler in SAMPLERS:
        for u, p in build_pools(split.train, split, users, sampler=sampler, size=pool, seed=seed).items():
            terms = terms_of(u, p.candidates)
            real = np.isin(p.candidates, p.future)
            rng = child_rng(seed, "recsim-fit-pages", sampler, u)
            for _ in range(pages):
                page = rng.choice(len(p.candidates), size=min(page_size, len(p.candidates)), replace=False)
                xs.append(terms[page])
                reals.append(real[page])
    return Pages(np.stack(xs), np.stack(reals)), users


def _loss(params: np.ndarray, pages: Pages, l2: float) -> tuple[float, np.ndarray]:
    """Negative log-likelihood (plus L2 on beta) and its gradient in ``(beta, log m)``."""
    beta, log_m = params[:-1], params[-1]
    u = pages.x @ beta  # (n, k)
    all_terms = np.concatenate([u, np.full((len(u), 1), log_m)], axis=1)
    log_denom = logsumexp(all_terms, axis=1)
    p_all = np.exp(all_terms - log_denom[:, None])
    hit = pages.real.any(axis=1)
    masked = np.where(pages.real, u, -np.inf)
    log_pos = logsumexp(np.where(hit[:, None], masked, 0.0), axis=1)
    q = np.where(pages.real, np.exp(np.where(pages.real, u, 0.0) - log_pos[:, None]), 0.0)
    ll = np.where(hit, log_pos, log_m) - log_denom
    # d ll / d beta = E_q[x] (hit pages) - E_p[x]; d ll / d log m = [no hit] - p_none
    expected = np.einsum("nk,nkf->nf", p_all[:, :-1], pages.x)
    chosen = np.einsum("nk,nkf->nf", q, pages.x)
    g_beta = (np.where(hit[:, None], chosen, 0.0) - expected).sum(axis=0)
    g_m = (np.where(hit, 0.0, 1.0) - p_all[:, -1]).sum()
    loss = -ll.sum() + l2 * float(beta @ beta)
    grad = -np.concatenate([g_beta, [g_m]]) + np.concatenate([2 * l2 * beta, [0.0]])
    return float(loss), grad


def fit_pages(pages: Pages, l2: float) -> tuple[np.ndarray, float, float, float]:
    """``(beta, m, log-likelihood, null log-likelihood)``; the null model has beta 0 and its best ``m``."""
    start = np.zeros(pages.x.shape[2] + 1)
    result = minimize(_loss, start, args=(pages, l2), jac=True, method="L-BFGS-B")
    if not result.success and not np.isfinite(result.fun):
        raise DataError(f"the RecSim fit did not converge: {result.message}")
    null = minimize(lambda p: _loss(np.concatenate([np.zeros(pages.x.shape[2]), p]), pages, 0.0)[0], [0.0])
    beta = result.x[:-1]
    ll = -(result.fun - l2 * float(beta @ beta))
    return beta, float(np.exp(result.x[-1])), float(ll), float(-null.fun)


def fit_recsim(
    dataset: Dataset, user: UserConfig, *, holdout: int = 10, choices: int = 10, min_history: int = 10, pool: int = 50,
    pages: int = 8, page_size: int = 5, seed: int = 0, l2: float = 1e-3, say: Callable[[str], None] = logger.info,
    features: Features,
) -> FittedWeights:  # fmt: skip
    """The fit (see the module docstring) as :class:`FittedWeights`."""
    data, users = build_pages(dataset, user, holdout=holdout, choices=choices, min_history=min_history, pool=pool,
                              pages=pages, page_size=page_size, seed=seed, features=features)  # fmt: skip
    say(f"{dataset.name}: fitting on {len(users)} users, {len(data.x)} pages ({data.real.any(axis=1).mean():.3f} "
        "with a real choice)")  # fmt: skip
    beta, mass, ll, null = fit_pages(data, l2)
    temperature = user.recsim_choice_temperature
    values: dict[str, object] = {name: round(float(b * temperature), 6) for name, b in zip(TERMS, beta, strict=True)}
    values.update(recsim_no_click_mass=round(mass, 6), recsim_item_latents="collaborative",
                  recsim_latent_from_history=1.0, recsim_interest_noise=0.0, recsim_allure=0.0)  # fmt: skip
    meta = {
        "dataset": dataset.name, "n_items": dataset.n_items, "n_users": dataset.n_users, "users": len(users),
        "pages": len(data.x), "real_watch_pages": float(data.real.any(axis=1).mean()), "holdout": holdout,
        "choices": choices, "min_history": min_history, "pool": pool, "page_size": page_size, "seed": seed, "l2": l2,
        "temperature": temperature, "hidden_dims": user.recsim_hidden_dims, "beta": [float(b) for b in beta],
        "log_likelihood": ll, "null_log_likelihood": null, "mean_ll_gain_per_page": (ll - null) / len(data.x),
    }  # fmt: skip
    return FittedWeights(values, meta)


def fit_markdown(fit: FittedWeights) -> str:
    m = fit.meta
    rows = "\n".join(f"| {k} | {v} |" for k, v in fit.values.items())
    return (
        f"# RecSim-style users fitted on real choices ({m['dataset']})\n\n"
        f"{m['users']} users, {m['pages']} random pages of {m['page_size']} from pools of {m['pool']} "
        f"({m['real_watch_pages']:.3f} of them show a real choice); each user's last {m['holdout']} items never read, "
        f"the {m['choices']} before them the real choices. Log-likelihood {m['log_likelihood']:.1f} vs "
        f"{m['null_log_likelihood']:.1f} with every weight 0 ({m['mean_ll_gain_per_page']:+.4f} per page).\n\n"
        f"| field | fitted |\n|---|---|\n{rows}\n"
    )


def dataset_key(dataset: Dataset) -> tuple[Any, ...]:
    """A fingerprint of ``dataset``'s interactions: the key of the fits made at start in this process."""
    inter = dataset.interactions
    return (dataset.name, dataset.n_users, dataset.n_items, len(inter), int(inter["timestamp"].sum()),
            int(inter["item_id"].sum()))  # fmt: skip


_FITTED: dict[tuple[Any, ...], FittedWeights] = {}
"""Fits made by :func:`fit_for_dataset` in this process, by dataset fingerprint (a handful at most)."""


def fit_for_dataset(dataset: Dataset, user: UserConfig, features: Features) -> FittedWeights:
    """The fit on ``dataset`` with the command's defaults, made once per process and dataset (``user.recsim_fitted:
    auto`` on a dataset without a shipped fit: every RecSim-style population built on it shares the fit)."""
    key = (*dataset_key(dataset), user.recsim_choice_temperature, user.recsim_hidden_dims)
    if key not in _FITTED:
        started = time.perf_counter()
        fit = fit_recsim(dataset, user, features=features, say=lambda line: None)
        fit.meta["fitted_at_start"] = True
        logger.info("user.recsim_fitted=auto: no shipped fit for %s; fitted the RecSim-style users on its real "
                    "choices (%d users, %.1f s; 'recagent-gym users fit-recsim' writes the same fit to a file)",
                    dataset.name, fit.meta["users"], time.perf_counter() - started)  # fmt: skip
        if len(_FITTED) >= 4:
            _FITTED.pop(next(iter(_FITTED)))
        _FITTED[key] = fit
    return _FITTED[key]
