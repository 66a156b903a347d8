"""``recagent-gym users fit-agreement``: the LLM agents' page decision fitted to the ranking, on train users only.

1. **Users.** The fit users are drawn among the users with a held-out future (the agreement test's split) that the
   default evaluation does not sample (``evaluation.agreement_users`` drawn as :func:`~.evaluate.run_agreement`
   draws them); their raw ids go into the fit file, and every evaluation with it leaves them out.
2. **Pages.** The zoo plays its sessions with the LLM agents (no prior, sessions never cut short, no searches) on
   the fit users, under both samplers, through :func:`~.evaluate.run_agreement`; every page's LLM and embedding
   scores are logged (they do not depend on the weights fitted next), with the real outcome of the page (a real
   future item on it or not) and the behavioural prior's features of its items.
3. **Fit.** :func:`~recagent_gym.users.agent.page_fit.fit_page_weights` fits the decision's weights (LLM score,
   embedding relevance, intercept; and the prior terms of the variant) to the real outcomes and to the history
   recommenders' real hit rates. **The prior is used only where it raises agreement:** each variant of
   :data:`VARIANTS` (no prior; the collaborative affinity alone; every prior term), at each weight of the ranking term
   in :data:`RANK_WEIGHTS`, is fitted on half of the fit users and scored on the other half (Kendall tau-b of the
   history recommenders' mean watch probability against their real hit rate); the pair with the highest tau-b is
   kept (a tie goes to the one listed first: the fewer terms, then the smaller rank weight), then fitted again on all
   fit users. The rank weight is a choice the data make: the larger it is, the more the fit trades the pages'
   likelihood for the recommenders' real spread of hit rates, which sharpens the decision (a larger response to real
   items) until the ranking itself suffers on the held-out half.
4. **Output.** ``prior.json`` (a ``parts`` fit with its intercept, for ``user.prior_weights`` with
   ``user.prior_fit: parts``), ``fit.md`` and the fit users' agreement report under ``zoo/``.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.pools import child_rng
from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.runs.config import Config
from recagent_gym.runs.evaluation.agreement.headline import history_rows
from recagent_gym.runs.evaluation.agreement.pools import temporal_split
from recagent_gym.users.agent.page_fit import PageRecords, PageWeights, fit_page_weights, watch_probability
from recagent_gym.users.prior_file import DEFAULT_WINDOW_DAYS, FEATURES, FIT_MADE_BY, PARTS, PARTS_BLOCK

logger = logging.getLogger(__name__)

MIN_USERS = 10
FIT_USERS = 60
"""Train users of a fit: ``users fit-agreement``'s default and the fit ``evaluate agreement``'s ``llm+fit`` row makes
first where no fit applies."""
FIT_ROW = "llm"
VARIANTS: dict[str, tuple[str, ...]] = {
    "no prior": (), "affinity": ("affinity",), "affinity+popularity": ("affinity", "popularity"), "prior": FEATURES,
}  # fmt: skip
"""The fit's variants: the prior terms each fits (the chosen one's go into the fit file's ``prior_terms``)."""
RANK_WEIGHTS: tuple[float, ...] = (1.0, 3.0, 10.0, 30.0, 100.0)
"""The weights of the ranking term the validation chooses among (``users fit-agreement --rank-weight`` fixes one)."""


@dataclass
class PageLog:
    """The LLM row's pages, as :func:`~.evaluate.run_agreement`'s ``on_page`` sees them."""

    future: Mapping[int, set[int]]
    rows: list[tuple[int, str, list[int], list[float], list[float], float, float]]
    skipped: int = 0

    def __call__(self, model: str, recommender: str, index: int, info: dict[str, Any], reward: float) -> None:
        extra = info.get("extra") or {}
        if model != FIT_ROW:
            return
        if "shown" not in extra or "llm_scores" not in extra:  # a fallback page without scores
            self.skipped += 1
            return
        user = int(info["user_id"])
        shown = [int(i) for i in extra["shown"]]
        llm = [math.nan if s is None else float(s) for s in extra["llm_scores"]]
        hit = float(any(i in self.future[user] for i in shown))
        self.rows.append((user, recommender, shown, llm, [float(s) for s in extra["embedding_scores"]],
                          float(extra["threshold"]), hit))  # fmt: skip


def sample_users(eligible: np.ndarray, n: int, seed: int, left_out: Collection[int] = ()) -> np.ndarray:
    """The agreement test's draw of ``n`` users among ``eligible`` (sorted), as :func:`fit_users` avoids it: the first
    ``n`` of a seeded order of ``eligible`` that are not in ``left_out``. Leaving a user out replaces that user only,
    so the draw is stable: the same whatever else is left out."""
    order = child_rng(seed, "agreement-users").permutation(np.asarray(eligible, dtype=np.int64))
    kept = order[~np.isin(order, np.fromiter(left_out, dtype=np.int64, count=len(left_out)))]
    return np.sort(kept[:n])


def fit_users(dataset: Dataset, config: Config, n: int, seed: int) -> tuple[np.ndarray, Any]:
    """``(fit users, split)``: ``n`` users with a future, none of those the default agreement test samples nor any
    other default evaluation (:func:`~recagent_gym.runs.evaluation.calibrate.evaluated_users`)."""
    ev = config.evaluation
    split = temporal_split(dataset, ev.agreement_future, ev.agreement_min_history, kind=ev.agreement_split,
                           quantile=ev.agreement_cut_quantile)  # fmt: skip
    eligible = np.array(sorted(split.held_out), dtype=np.int64)
    evaluated = sample_users(eligible, ev.agreement_users, ev.seed)
    from recagent_gym.runs.evaluation.calibrate import evaluated_users

    rest = np.setdiff1d(eligible, evaluated)
    others = np.setdiff1d(rest, np.array(sorted(evaluated_users(dataset, config)), dtype=np.int64))
    if len(others) >= min(n, MIN_USERS):
        rest = others
    else:  # a small dataset: every user is some evaluation's; the agreement test's own users are still left out
        logger.warning("%s: only %d users outside every default evaluation; fitting among the %d the agreement "
                       "test does not sample", dataset.name, len(others), len(rest))  # fmt: skip
    if len(rest) < min(n, MIN_USERS):
        raise DataError(
            f"{dataset.name}: {len(rest)} users with a future besides the {len(evaluated)} the "
            f"evaluation samples; the fit needs {MIN_USERS} (lower evaluation.agreement_users)"
        )
    chosen = child_rng(seed, "fit-agreement-users").choice(rest, size=min(n, len(rest)), replace=False)
    return np.sort(chosen), split


def _records(log: PageLog, history: Dataset, names: list[str]) -> PageRecords:
    from recagent_gym.users.agent.prior import BehaviouralPrior

    prior = BehaviouralPrior(history, window_days=DEFAULT_WINDOW_DAYS)
    k = max(len(r[2]) for r in log.rows)
    scores = np.full((len(log.rows), k, len(PARTS) + len(FEATURES)), np.nan)
    eligible = np.zeros((len(log.rows), k), dtype=bool)
    items = np.full((len(log.rows), k), -1, dtype=np.int64)
    for n, (user, _, shown, llm, emb, _, _) in enumerate(log.rows):
        m = len(shown)
        scores[n, :m, 0], scores[n, :m, 1], scores[n, :m, 2:] = llm, emb, prior.features(user, shown)
        items[n, :m] = shown
        eligible[n, :m] = np.isfinite(llm)
    index = {name: i for i, name in enumerate(names)}
    column = lambda j: np.array([r[j] for r in log.rows])  # noqa: E731
    return PageRecords(scores, eligible, column(5).astype(float), column(6).astype(float),
                       np.array([index[r[1]] for r in log.rows]), column(0).astype(np.int64), tuple(names),
                       items)  # fmt: skip


def score_weights(records: PageRecords, weights: PageWeights, temperature: float, rank_rows: np.ndarray
                  ) -> dict[str, float]:  # fmt: skip
    """Tau-b of the ``rank_rows``' mean watch probability against their real hit rate, and the response to real
    items (mean watch probability on pages with a real future item minus without)."""
    from scipy.stats import kendalltau

    p = watch_probability(records, weights, temperature)
    sim = [p[records.recommender == r].mean() for r in rank_rows]
    real = [records.hit[records.recommender == r].mean() for r in rank_rows]
    tau = float(kendalltau(sim, real).statistic)
    hit = records.hit > 0
    response = float(p[hit].mean() - p[~hit].mean()) if hit.any() and (~hit).any() else math.nan
    return {"tau_b": tau if math.isfinite(tau) else 0.0, "response": response, "mean_watch": float(p.mean())}


@dataclass
class Choice:
    """:func:`choose_fit`'s answer: the held-out ``rows`` (variant, rank weight, scores), the chosen pair and its
    weights fitted again on every page (``final``)."""

    rows: list[dict[str, Any]]
    variant: str
    rank_weight: float
    final: PageWeights

    @property
    def best(self) -> dict[str, Any]:
        return next(r for r in self.rows if (r["variant"], r["rank_weight"]) == (self.variant, self.rank_weight))


def choose_fit(records: PageRecords, fit_half: np.ndarray, *, start: Mapping[str, float], temperature: float,
               rank_rows: np.ndarray, rank_weights: tuple[float, ...] = RANK_WEIGHTS,
               variants: Collection[str] = tuple(VARIANTS)) -> Choice:  # fmt: skip
    """Every variant of ``variants`` (:data:`VARIANTS`' names) at every weight of ``rank_weights``, fitted on the pages
    of the users in ``fit_half`` and scored on the others' (:func:`score_weights`); the highest tau-b wins (the first
    of equals: fewer terms, then the smaller weight) and is fitted again on all pages."""

    def fit(r: PageRecords, variant: str, weight: float) -> PageWeights:
        return fit_page_weights(r, start=dict(start), temperature=temperature, prior_terms=VARIANTS[variant],
                                rank_rows=rank_rows, rank_weight=weight)  # fmt: skip

    in_fit = np.isin(records.user, fit_half)
    held, half = records.subset(~in_fit), records.subset(in_fit)
    rows: list[dict[str, Any]] = [
        {"variant": v, "rank_weight": w, **score_weights(held, fit(half, v, w), temperature, rank_rows)}
        for v in VARIANTS
        if v in variants
        for w in rank_weights
    ]
    best = max(rows, key=lambda row: float(row["tau_b"]))  # max keeps the first of equals
    variant, weight = str(best["variant"]), float(best["rank_weight"])
    return Choice(rows, variant, weight, fit(records, variant, weight))


@dataclass
class FitResult:
    weights: PageWeights
    variant: str
    validation: list[dict[str, Any]]
    """Per (variant, rank weight): its held-out scores (:func:`score_weights`), in the order tried."""
    users: np.ndarray
    pages: int
    skipped: int
    seconds: float
    meta: dict[str, Any]
    zoo: Any = None
    """The train users' own agreement run (the LLM agents before the fit), for its report."""


def run_fit_agreement(config: Config, dataset: Dataset, *, out: Path, users: int, seed: int,
                      play: Callable[..., Any], rank_weight: float | None = None, progress: bool = True,
                      say: Callable[[str], None] = logger.info, pages: Path | None = None,
                      variant: str | None = None) -> FitResult:  # fmt: skip
    """The whole fit (see the module docstring); ``play`` is :func:`~.evaluate.run_agreement` (passed in: the
    agreement test calls this fit in turn); ``rank_weight`` fixes the ranking term's weight (None: chosen among
    :data:`RANK_WEIGHTS` by the validation), ``variant`` the variant (None: chosen among :data:`VARIANTS`);
    ``pages``: an earlier fit's ``pages.npz`` on the same dataset and users, whose pages are fitted again (no LLM
    call: the scores it logged do not depend on the weights)."""
    started = time.perf_counter()
    if variant is not None and variant not in VARIANTS:
        raise DataError(f"variant {variant!r}: not one of {list(VARIANTS)}")
    chosen, split = fit_users(dataset, config, users, seed)
    if pages is not None:
        records = PageRecords.load(pages)
        if not set(np.unique(records.user).tolist()) <= set(chosen.tolist()):
            raise DataError(f"{pages}: its pages are not of the {len(chosen)} fit users this dataset, --users and "
                            "--seed draw; give the fit's own --users and --seed")  # fmt: skip
        say(f"{dataset.name}: fitting the page decision again on {len(records.hit)} pages logged in {pages}")
        return _choose_and_describe(config, dataset, records, chosen, seed, started, rank_weight=rank_weight,
                                    variant=variant, skipped=0, zoo=None, say=say)  # fmt: skip
    cfg = config.model_copy(deep=True)
    cfg.user.prior_weights = None
    cfg.user.full_sessions = True  # every page of every session is logged, as the real users see them
    cfg.user.search_interest_probability = cfg.user.search_heard_probability = 0.0
    cfg.evaluation.agreement_user_models = [FIT_ROW]  # type: ignore[list-item]
    cfg.evaluation.agreement_users = len(chosen)
    log = PageLog({int(u): set(split.held_out[int(u)]) for u in chosen}, [])
    say(f"{dataset.name}: fitting the LLM agents' page decision on {len(chosen)} train users")
    zoo = play(cfg, dataset, out=out / "zoo", only_users=chosen.tolist(), progress=progress, say=say, on_page=log)
    if not log.rows:
        raise DataError("no page of the LLM agents reported its scores; nothing to fit")
    records = _records(log, split.train, zoo.recommenders)
    records.save(out / "pages.npz")
    return _choose_and_describe(config, dataset, records, chosen, seed, started, rank_weight=rank_weight,
                                variant=variant, skipped=log.skipped, zoo=zoo, say=say)  # fmt: skip


def _choose_and_describe(config: Config, dataset: Dataset, records: PageRecords, chosen: np.ndarray, seed: int,
                         started: float, *, rank_weight: float | None, variant: str | None, skipped: int, zoo: Any,
                         say: Callable[[str], None]) -> FitResult:  # fmt: skip
    """The validation's choice (:func:`choose_fit`) on ``records`` (``rank_weight``, ``variant``: fixed, or None
    where the validation chooses), and the fit's description."""
    names = list(records.names)
    rank_rows = np.array([names.index(r) for r in history_rows(names)])
    ucfg = config.user
    start = {PARTS[0]: ucfg.score_llm_weight, PARTS[1]: ucfg.score_embedding_weight}
    halves = child_rng(seed, "fit-agreement-halves").permutation(chosen)
    weights = RANK_WEIGHTS if rank_weight is None else (rank_weight,)
    choice = choose_fit(records, halves[: len(halves) // 2], start=start, temperature=ucfg.watch_temperature,
                        rank_rows=rank_rows, rank_weights=weights,
                        variants=tuple(VARIANTS) if variant is None else (variant,))  # fmt: skip
    best = choice.best
    say(f"fit-agreement: chose {choice.variant!r} at rank weight {choice.rank_weight:g} (validation tau-b "
        f"{best['tau_b']:.3f}, response {best['response']:+.3f})")  # fmt: skip
    raw = dataset.users["raw_id"].astype(str).to_numpy()
    meta = {
        "dataset": dataset.name, "n_users": dataset.n_users, "n_items": dataset.n_items,
        "llm_item_score": ucfg.llm_item_score,
        "users_raw": [str(raw[u]) for u in chosen], "made_by": FIT_MADE_BY, "seed": seed,
        "rank_weight": choice.rank_weight, "rank_weight_chosen": rank_weight is None,
        "variant_chosen": variant is None,
        "futures_set_aside": config.evaluation.agreement_future,
        "prior_used": bool(VARIANTS[choice.variant]), "prior_terms": list(VARIANTS[choice.variant]),
        "variant": choice.variant, "validation": choice.rows,
    }  # fmt: skip
    return FitResult(choice.final, choice.variant, choice.rows, chosen, len(records.hit), skipped,
                     time.perf_counter() - started, meta, zoo)  # fmt: skip


def write_fit(result: FitResult, out: Path, llm_name: str | None) -> Path:
    """``out/prior.json`` (a prior file with the ``parts`` fit) and ``out/fit.md``."""
    out.mkdir(parents=True, exist_ok=True)
    meta = {**result.meta, "llm": llm_name}
    fits = {PARTS_BLOCK: {"weights": result.weights.weights}}
    body = {**meta, "window_days": DEFAULT_WINDOW_DAYS, "parts_fits": fits}
    path = out / "prior.json"
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    (out / "fit.md").write_text(fit_markdown(result), encoding="utf-8")
    return path


def fit_markdown(result: FitResult) -> str:
    lines = [
        "# The LLM agents' page decision fitted to the ranking (`recagent-gym users fit-agreement`)", "",
        f"{len(result.users)} train users (none of them evaluated), {result.pages} logged pages "
        f"({result.skipped} without scores skipped), {result.seconds:.0f} s.", "",
        "Validation (the fit on half of the train users, scored on the other half): tau-b of the history "
        "recommenders' mean watch probability against their real hit rate, and the response to real items (mean "
        "watch probability on pages with a real future item minus without).", "",
        "| variant | rank weight | tau-b | response | mean watch |", "|---|---|---|---|---|",
    ]  # fmt: skip
    for row in result.validation:
        lines.append(f"| {row['variant']} | {row['rank_weight']:g} | {row['tau_b']:.3f} | {row['response']:+.3f} | "
                     f"{row['mean_watch']:.3f} |")  # fmt: skip
    terms = ", ".join(VARIANTS[result.variant])
    chosen = f"`{result.variant}` ({terms})" if terms else "`no prior` (no prior term raised agreement)"
    weight = result.meta["rank_weight"]
    given = [what for what, key in (("the variant", "variant_chosen"), ("the rank weight", "rank_weight_chosen"))
             if not result.meta.get(key, True)]  # fmt: skip
    how = f"{' and '.join(given)} given on the command line" if given else "the highest tau-b"
    lines += ["", f"Chosen: {chosen} at rank weight {weight:g}, {how}. Weights (fitted again on all train users):",
              ""]  # fmt: skip
    lines += [f"- `{k}`: {v:+.4f}" for k, v in result.weights.weights.items()]
    return "\n".join(lines) + "\n"
