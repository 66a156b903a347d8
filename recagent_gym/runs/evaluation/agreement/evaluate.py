"""The agreement test from a config and a dataset: subjects, user models, the zoo, arms; see the package docstring."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.runs.config import Config
from recagent_gym.runs.evaluation.agreement.fit import FIT_USERS, sample_users
from recagent_gym.runs.evaluation.agreement.pools import PoolRetriever, build_pools, temporal_split
from recagent_gym.runs.evaluation.agreement.run import REAL, Arm, run_arms
from recagent_gym.runs.evaluation.agreement.zoo import Zoo
from recagent_gym.runs.evaluation.distilled_row import build_distilled_row, fitting_artefact
from recagent_gym.runs.evaluation.prior_ablation import FIT_OF, LLM_PRIOR_KINDS, made_on_users
from recagent_gym.runs.evaluation.subjects import Resources
from recagent_gym.runs.make_env import candidates_env
from recagent_gym.users.distilled.user import DistilledUser

logger = logging.getLogger(__name__)

LLM_PRIOR_FITS = {kind: FIT_OF[kind] for kind in LLM_PRIOR_KINDS}
"""The LLM + prior rows and the weights file's fit each uses (``user.prior_fit``), as in the per-item evaluations."""
LLM_FIT = "llm+fit"
"""The LLM agents with the page decision ``users fit-agreement`` fitted for this dataset (:func:`dataset_fit`: the
fit ``user.prior_weights`` names or the shipped one on its dataset, else a fit on other users made first): the
default users on the bundled data."""
OTHER_FIT = "llm+fit:"
"""Prefix of the rows of fits given by name (``--fit NAME=PATH``: e.g. another dataset's fit, for the transfer);
they share the ``llm`` rows' score cache."""
ABLATIONS: dict[str, dict[str, float]] = {
    "llm-only": {"score_embedding_weight": 0.0},
    "llm-embedding-term": {"score_llm_weight": 0.0},
}
"""The LLM agent's item score taken apart: the LLM's score alone, the embedding relevance alone (both share the
``llm`` row's score cache: no LLM call of their own)."""
CALIBRATION_USERS = 40


@dataclass
class AgreementRun:
    """Everything the report needs."""

    dataset: str
    users: np.ndarray
    samplers: list[str]
    user_models: list[str]
    recommenders: list[str]
    arms: list[Arm]
    settings: dict[str, Any]
    seconds_per_user: dict[str, float] = field(default_factory=dict)
    """Per user model: seconds of its sessions (every recommender and sampler) per held-out user."""
    notes: list[str] = field(default_factory=list)
    prior: dict[str, Any] = field(default_factory=dict)

    def arm(self, sampler: str, user_model: str, recommender: str) -> Arm:
        for a in self.arms:
            if (a.sampler, a.user_model, a.recommender) == (sampler, user_model, recommender):
                return a
        raise KeyError((sampler, user_model, recommender))


def own_fit(setting: str | None, dataset: Any, llm_name: str | None) -> str | None:
    """The ``llm+fit`` row's file for ``user.prior_weights`` as configured (``setting``, before ``auto`` is resolved):
    a fit-agreement file it names, else the fit shipped for the bundled data on that data; None: fit first (the
    shipped fit ``auto`` carries to another dataset is not that dataset's fit; ``--fit`` adds its row)."""
    from recagent_gym.users.prior_default import AUTO, BUNDLED, BUNDLED_FIT_FILE, shipped_file
    from recagent_gym.users.prior_file import is_fit_file

    if setting not in (None, AUTO, BUNDLED) and is_fit_file(setting):
        return str(setting)
    return shipped_file(BUNDLED_FIT_FILE, dataset, llm_name)


def _fit_weights(resources: Resources, dataset: Dataset, out: Path, progress: bool, say: Callable[[str], None]
                 ) -> tuple[str, bool]:  # fmt: skip
    """The ``llm+fit`` row's file (:func:`own_fit`), else a fit on other users written to ``out/fit``;
    ``(path, fresh)``."""
    path = own_fit(resources.prior_setting, dataset, resources.language_model().name)
    if path is not None:
        return path, False
    from recagent_gym.runs.evaluation.agreement.fit import run_fit_agreement, write_fit

    say(f"llm+fit: no fit for {dataset.name}; fitting the page decision on {FIT_USERS} other users first")
    result = run_fit_agreement(
        resources.config,
        dataset,
        play=run_agreement,
        out=out / "fit",
        users=FIT_USERS,
        seed=resources.config.evaluation.seed,
        progress=progress,
        say=say,
    )
    return str(write_fit(result, out / "fit", resources.language_model().name)), True


def _prior_weights(resources: Resources, out: Path, progress: bool, say: Callable[[str], None]) -> tuple[str, bool]:
    """The ``calibrate`` file of the run (``Resources.calibration``), or a fresh calibration on other users written
    to ``out/prior``; ``(path, fresh)``."""
    if resources.calibration is not None:
        return resources.calibration, False
    from recagent_gym.runs.evaluation.calibrate import run_calibration, write_calibration

    say(f"llm+prior: no user.prior_weights given; calibrating on {CALIBRATION_USERS} other users first")
    result = run_calibration(resources, users=CALIBRATION_USERS, progress=progress)
    return str(write_calibration(result, out / "prior")["prior.json"]), True


def artefact_users(dataset: Dataset, config: Config, calibration: str | None, artefact: Any) -> set[int]:
    """Users of ``dataset`` that a model artefact for it was made on, whichever rows run: the distilled users' training
    users (``artefact``: the distilled model that fits the dataset, or None), and the users of the page-decision fit
    and the calibration that the config names or ships for this dataset. Never in the test's own draw, so its users
    do not depend on the rows asked for (pages stay comparable)."""
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


def run_agreement(
    config: Config,
    dataset: Dataset,
    *,
    out: Path,
    policies: Mapping[str, Sequence[Path]] | None = None,
    fits: Mapping[str, str | Path] | None = None,
    ready: Mapping[str, Sequence[Any]] | None = None,
    only_users: Sequence[int] | None = None,
    item_features: tuple[np.ndarray, str] | Callable[[Dataset], tuple[np.ndarray, str]] | None = None,
    distilled_features: bool = False,
    resources: Resources | None = None,
    progress: bool = True,
    say: Callable[[str], None] = logger.info,
    on_page: Callable[[str, str, int, dict[str, Any], float], None] | None = None,
) -> AgreementRun:
    """The whole test (see the package docstring). ``policies``: trained RecAgent-v1 policies by name (paths);
    ``fits``: more fit-agreement files by name, each a row ``llm+fit:NAME`` (a fit made on another dataset reads
    the transfer); ``ready``: recommenders already built; ``only_users``: sample among these users only (a policy's
    held-out users); ``item_features``: the observation's item features, or a function of the history split that
    builds them (default: see :func:`_item_features`);
    ``distilled_features``: describe the candidates with the distilled users' item table (re-encoded on the history)
    even when those users are not evaluated (the quickstart's policies were trained on it);
    ``resources`` may bring an LLM and embedder (tests do); ``on_page(user model, recommender row, user index, info,
    reward)`` sees every page (``users fit-agreement`` logs the agents' scores with it)."""
    ev = config.evaluation
    samplers = ["uniform", "popularity-matched"] if ev.negatives == "both" else [ev.negatives]
    models = list(ev.agreement_user_models)
    notes: list[str] = []
    resources = resources or Resources(dataset, config, ev, progress=progress)
    if ev.agreement_full_sessions and not resources.config.user.full_sessions:
        # every page seen, as the replayed real users see them; the caller's resources keep their own config
        user = resources.config.user.model_copy(update={"full_sessions": True})
        resources = copy.copy(resources)
        resources.config = resources.config.model_copy(update={"user": user})
    config = resources.config  # user.prior_weights resolved (auto: the shipped calibration where it applies)
    split = temporal_split(dataset, ev.agreement_future, ev.agreement_min_history, kind=ev.agreement_split,
                           quantile=ev.agreement_cut_quantile)  # fmt: skip
    history = split.train
    # the test's own draw leaves every artefact's users out; users the caller names (a policy's held-out users) lose
    # only those of the rows that run
    wanted = "distilled" in models or distilled_features
    artefact, why = fitting_artefact(dataset, config) if wanted or only_users is None else (None, None)
    excluded = artefact_users(dataset, config, resources.calibration, artefact) if only_users is None else set()
    if not wanted:
        artefact = None  # loaded for its users only: no row, no item table
    elif artefact is None:
        what = "distilled users" if "distilled" in models else "the distilled users' item table"
        if "distilled" in models:
            models.remove("distilled")
        notes.append(f"{what} left out: {why}")
    elif "distilled" in models:
        excluded |= {int(u) for u in artefact.meta.get("train_users", [])}
    prior: dict[str, Any] = {}
    if any(name in LLM_PRIOR_FITS for name in models):
        from recagent_gym.users.agent.prior import load_weights

        path, fresh = _prior_weights(resources, out, progress, say)
        excluded |= made_on_users(dataset, path)
        used = [fit for name, fit in LLM_PRIOR_FITS.items() if name in models]
        prior = {
            "file": path,
            "calibrated_here": fresh,
            "weights": {f: load_weights(path, which=f).to_dict() for f in used},
        }
    if LLM_FIT in models:
        from recagent_gym.users.agent.prior import load_weights
        from recagent_gym.users.prior_file import read_prior_file

        path, fresh = _fit_weights(resources, dataset, out, progress, say)
        fitted = read_prior_file(path).meta
        excluded |= made_on_users(dataset, path)
        prior.update({"fit_file": path, "fitted_here": fresh, "prior_used": fitted.get("prior_used"),
                      "prior_terms": fitted.get("prior_terms"),
                      "fit_weights": load_weights(path, which="parts").to_dict()})  # fmt: skip
    for name, given in (fits or {}).items():
        from recagent_gym.users.agent.prior import load_weights
        from recagent_gym.users.prior_file import read_prior_file

        fitted = read_prior_file(given).meta
        excluded |= made_on_users(dataset, given)
        prior.setdefault("other_fits", {})[name] = {
            "file": str(given),
            "dataset": fitted.get("dataset"),
            "weights": load_weights(given, which="parts").to_dict(),
        }
        models.append(OTHER_FIT + name)
    if only_users is not None:
        excluded |= set(split.held_out) - {int(u) for u in only_users}
    eligible = len(set(split.held_out) - excluded)
    if eligible < 2:
        raise DataError(f"{dataset.name}: fewer than 2 users with {ev.agreement_min_history} items of history and "
                        "held-out items that no model was fitted on")  # fmt: skip
    n = min(ev.agreement_users, eligible)
    if n < ev.agreement_users:
        notes.append(f"only {eligible} eligible users (asked for {ev.agreement_users})")
    users = sample_users(np.array(sorted(split.held_out), dtype=np.int64), n, ev.seed, excluded)
    future = {int(u): tuple(dict.fromkeys(split.held_out[int(u)])) for u in users}
    say(f"{dataset.name}: {n} held-out users, {sum(len(f) for f in future.values()) / n:.1f} future items each "
        f"on average, pools of {ev.agreement_pool}, {ev.agreement_pages} pages of {config.env.page_size}")  # fmt: skip

    zoo = Zoo(ev.agreement_recommenders, history, future, policies=policies, ready=ready, seed=ev.seed,
              swapped=ev.agreement_swapped, say=say)  # fmt: skip
    built = _user_models(models, history, config, resources, artefact, prior, future, dataset)
    shipped = None if artefact is None else DistilledUser(dataset, artefact).item_embeddings
    described_by = built
    if distilled_features and artefact is not None and "distilled" not in built:  # its table only, no sessions
        described_by = _user_models(["distilled"], history, config, resources, artefact, prior, future, dataset)
    if callable(item_features):
        features = item_features(history)
    else:
        features = item_features or _item_features(history, described_by, resources, shipped)
    arms: list[Arm] = []
    pools_of = {
        sampler: build_pools(dataset, split, users, sampler=sampler, size=ev.agreement_pool, seed=ev.seed,
                             n_bands=ev.popularity_bands)
        for sampler in samplers
    }  # fmt: skip
    every_item = {int(u): sorted({int(i) for pools in pools_of.values() for i in pools[int(u)].candidates})
                  for u in users}  # fmt: skip
    prefetch_seconds: dict[str, float] = {}
    for s, sampler in enumerate(samplers):
        pools = pools_of[sampler]
        retriever = PoolRetriever(pools, ev.agreement_pool, history.n_users)
        envs = {name: _env_builder(history, config, model, state, retriever, users, features, ev)
                for name, (model, state) in built.items()}  # fmt: skip
        played, extra = run_arms(envs, zoo, users, future, sampler=sampler, seed=ev.seed, k=config.env.page_size,
                                 pages=ev.agreement_pages, prefetch=every_item if s == 0 else None,
                                 progress=progress, sessions=ev.agreement_sessions, on_page=on_page)  # fmt: skip
        arms += played
        for name, seconds in extra.items():
            prefetch_seconds[name] = prefetch_seconds.get(name, 0.0) + seconds
    per_user = {
        name: (sum(a.seconds for a in arms if a.user_model == name) + prefetch_seconds.get(name, 0.0)) / n
        for name in built
    }
    caches: dict[int, tuple[Any, list[str]]] = {}
    for name, (model, _) in built.items():
        cache = getattr(model, "score_cache", None)
        if cache is not None:
            caches.setdefault(id(cache), (cache, []))[1].append(name)
    for cache, names in caches.values():
        notes.append(f"item score cache of the {' and '.join(names)} users: {cache.stats()}")
    if resources.llm is not None and (usage := resources.usage_line()):
        notes.append(usage.rstrip("."))
    settings = {
        "pool": ev.agreement_pool, "future": ev.agreement_future, "pages": ev.agreement_pages,
        "sessions": ev.agreement_sessions, "full_sessions": config.user.full_sessions,
        "page_size": config.env.page_size, "min_history": ev.agreement_min_history, "seed": ev.seed,
        "split": ev.agreement_split if ev.agreement_split == "leave-last-out"
        else f"global (cut at the {ev.agreement_cut_quantile:g} quantile of time)",
        "real_metric": ev.agreement_real_metric, "item_features": features[1],
        "llm": (f"{config.llm.backend}" + (f" {config.llm.model}" if getattr(config.llm, "model", None) else ""))
        if resources.llm is not None else "none",
        "embedder": ev.embedder, "memory": config.memory.implementation, "recsim": _recsim_line(built),
        "embedding_users": _embedding_line(built),
    }  # fmt: skip
    return AgreementRun(dataset.name, users, samplers, list(built), zoo.all_names(), arms, settings, per_user, notes,
                        prior)  # fmt: skip


def _recsim_line(built: Mapping[str, Any]) -> str:
    """How the RecSim users were made: hand-set weights, or which fit (and its weights)."""
    model = built.get("recsim", (None,))[0]
    if model is None:
        return "none"
    cfg = model.config
    where = getattr(model, "fitted_from", None)
    weights = (f"interest {cfg.recsim_interest_weight:+.3f}, affinity {cfg.recsim_hidden_weight:+.3f}, quality "
               f"{cfg.recsim_quality_weight:+.3f}, popularity {cfg.recsim_popularity_weight:+.3f}, no-click mass "
               f"{cfg.recsim_no_click_mass:.1f}")  # fmt: skip
    return f"fitted on real choices ({where}: {weights})" if where else f"hand-set ({weights})"


def _embedding_line(built: Mapping[str, Any]) -> str:
    """How the Embedding users choose: fitted on real choices (``user.embedding_fitted``) or hand-set."""
    model = built.get("embedding", (None,))[0]
    if model is None:
        return "none"
    cfg = model.config
    half_life = "none (the plain mean)" if cfg.embedding_half_life is None else f"{cfg.embedding_half_life:g} items"
    values = (f"temperature {cfg.embedding_temperature:.4f}, no-click cosine {cfg.embedding_no_click_threshold:+.3f}, "
              f"history half-life {half_life}")  # fmt: skip
    return f"fitted on real choices ({values})" if getattr(model, "fitted", False) else f"hand-set ({values})"


def _user_models(
    models: Sequence[str], history: Dataset, config: Config, resources: Resources, artefact: Any,
    prior: dict[str, Any], future: Mapping[int, Sequence[int]], dataset: Dataset,
) -> dict[str, tuple[Any, dict[str, Any]]]:  # fmt: skip
    """``name -> (model built on the history, its starting state)``; ``real`` first."""
    from recagent_gym.users.factory import build_user_model
    from recagent_gym.users.replay import ReplayUser

    inter = dataset.interactions
    wanted = {(u, i) for u, items in future.items() for i in items}
    ratings = {
        (int(u), int(i)): float(r)
        for u, i, r in zip(inter["user_id"], inter["item_id"], inter["rating"], strict=True)
        if (int(u), int(i)) in wanted and np.isfinite(r)
    }
    out: dict[str, tuple[Any, dict[str, Any]]] = {REAL: (ReplayUser(future, ratings), {})}
    for name in models:
        if name == "distilled":
            model = build_distilled_row(history, artefact, config, resources.item_vectors())
        elif name == "embedding":
            model = resources.build("embedding", history)
        elif name in ("llm", LLM_FIT, *LLM_PRIOR_FITS, *ABLATIONS) or name.startswith(OTHER_FIT):
            cfg = config.model_copy(deep=True)
            cfg.user.prior_weights = prior["file"] if name in LLM_PRIOR_FITS else None  # the llm row: the LLM alone
            cfg.user.prior_fit = LLM_PRIOR_FITS.get(name, cfg.user.prior_fit)  # type: ignore[assignment]
            if name == LLM_FIT:
                cfg.user.prior_weights, cfg.user.prior_fit = prior["fit_file"], "parts"
            if name.startswith(OTHER_FIT):
                cfg.user.prior_weights = prior["other_fits"][name.removeprefix(OTHER_FIT)]["file"]
                cfg.user.prior_fit = "parts"
            for field, value in ABLATIONS.get(name, {}).items():
                setattr(cfg.user, field, value)
            model = build_user_model("llm", history, **cfg.user_model_sections(), llm=resources.language_model(),
                                     embedder=resources.embedder())  # fmt: skip
            llm_rows = ("llm", LLM_FIT, *LLM_PRIOR_FITS, *ABLATIONS)
            shared = [out[n][0].score_cache for n in out if (n in llm_rows or n.startswith(OTHER_FIT))
                      and getattr(out[n][0], "score_cache", None) is not None]  # fmt: skip
            if shared:
                # The same agents in the same contexts (the prior and the weights act after the LLM's score): their
                # raw item scores are the first LLM row's, so one cache serves all and the others cost no LLM call.
                model.score_cache = shared[0]
        else:
            model = resources.build(name, history)
        out[name] = (model, model.get_state())
    return out


def _item_features(
    history: Dataset, built: Mapping[str, Any], resources: Resources, shipped_item_vectors: np.ndarray | None
) -> Any:
    """One item-feature table for every env (so every recommender sees the same observation): the distilled
    users' item vectors where they run (the observation the quickstart's policies were trained on), else the item
    text embeddings."""
    from types import SimpleNamespace

    from recagent_gym.envs.encoding import item_feature_table
    from recagent_gym.session.tables import SessionTables

    tables = SessionTables.build(history)
    source = built["distilled"][0] if "distilled" in built else SimpleNamespace(
        item_embeddings=resources.item_vectors(), item_embeddings_source="text_embeddings"
    )  # fmt: skip
    # The distilled users' item table is re-encoded on the history: project it in the PCA of the shipped table (what
    # the quickstart's policies were trained on), or a policy reads sign-flipped, rotated latent columns.
    basis = shipped_item_vectors if "distilled" in built else None
    return item_feature_table(history, tables, source, 8, latent_basis=basis)


def _env_builder(
    history: Dataset, config: Config, model: Any, state: dict[str, Any], retriever: PoolRetriever, users: np.ndarray,
    features: Any, ev: Any,
) -> Callable[[], Any]:  # fmt: skip
    def build() -> Any:

        if state:
            model.set_state(state)
        return candidates_env(
            history, model, config.env.page_size, ev.agreement_pages, False, config, n_candidates=ev.agreement_pool,
            users=users, retriever=retriever, item_features=features,
        )  # fmt: skip

    return build
