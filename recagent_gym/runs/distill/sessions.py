"""Sessions of any user model over page sources, stepped by the session kernel: one decision row per page answered.

The loop of ``users collect`` (LLM users, rows go to Parquet) and ``users fidelity`` (every user model, the same pages
and session rules). It is the kernel's page step (:meth:`~recagent_gym.session.kernel.SessionKernel.step_sessions`),
with its rules, as the envs and the simulator run it: sessions start with ``restart`` (the planned user, no social
round), each step shows the source's page; a SEARCH is answered within the same step on the catalogue's results (no
page of its own, so it does not count toward ``max_pages``; a second search there counts as NEXT); a session ends on
LEAVE (terminated) or after ``max_pages`` steps (truncated); the reward of a step is the env's (``EnvConfig``'s
``reward_*``) on the step's outcome. Sessions of one batch are lanes of one kernel, so a step is one
``respond_batch`` across the batch (and one more for those who searched).

Rows (:data:`~recagent_gym.runs.distill.log_schema.COLUMNS`) are what the user model answered, as it answered
(a search on the results page is logged as ``search``; the kernel counts it as next): a step whose user searched
has two rows with the step's ``page_index``, the page's (``page_source == "recommender"``) and the results page's
(``"search"``). The step's reward is on its first row; the results row has 0 (``search_watch`` is a reward of the
step). Deferred ratings (written when the session ends) are filled in after the batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recagent_gym.users.protocol import Action, Context, Page, Response

ACTIONS: tuple[str, ...] = tuple(a.name.lower() for a in Action)
"""Action names in :class:`Action` order: watch, next, search, leave."""

END_BATCH = 1 << 30
"""``SessionRules.end_batch`` of these sessions: ended sessions are written together once the batch is over."""


@dataclass(frozen=True)
class SessionPlan:
    session_id: int
    user_id: int
    source: str


PLAN_VERSION = 2
"""``collect.json``'s ``plan``: 2 draws the users' order from its own stream (``[seed, 1]``). Version 1 (no field)
drew it from ``default_rng(seed)``, the very permutation the RL protocol's user split takes its held-out users
from (``policies.protocol.split_users``), so with ``train.split_seed == seed`` the first ``test_fraction`` of the
sessions were all held-out users: fewer sessions than that left nothing to distil on."""


def plan_sessions(user_ids: Sequence[int], sources: Sequence[str], n_sessions: int, seed: int) -> list[SessionPlan]:
    """``n_sessions`` plans: users in a seeded order (cycled), the sources rotating so each user meets all of them."""
    if not user_ids or not sources:
        raise ValueError("plan_sessions needs at least one user and one source")
    order = np.random.default_rng([seed, 1]).permutation(np.asarray(user_ids, dtype=np.int64))
    n = len(order)
    return [SessionPlan(k, int(order[k % n]), sources[(k + k // n) % len(sources)]) for k in range(n_sessions)]


def session_patience(model: Any, user: int) -> float:
    """Patience left in the user's open session, where the model exposes it (the LLM agent, distilled users)."""
    session = getattr(model, "session", None)
    if session is None:
        return math.nan
    try:
        return float(session(user).patience)
    except (KeyError, AttributeError, TypeError):
        return math.nan


def _floats(values: Any, n: int) -> list[float]:
    if values is None:
        return [math.nan] * n
    return [math.nan if v is None else float(v) for v in values]


def decision_row(
    plan: SessionPlan, page_index: int, watched_count: int, page: Page, response: Response, patience_before: float
) -> dict[str, Any]:
    """One logged decision: ``plan``'s session at its ``page_index``-th step, ``watched_count`` watches before it."""
    extra = response.extra
    shown = [int(i) for i in extra.get("shown", page.items)]
    n = len(shown)
    position = shown.index(response.item) if response.item is not None and response.item in shown else -1
    return {
        "session_id": plan.session_id,
        "user_id": plan.user_id,
        "source": plan.source,
        "page_index": page_index,
        "page_source": page.source,
        "watched_count": watched_count,
        "patience_before": patience_before,
        "patience_left": float(extra.get("patience_left", math.nan)),
        "items": [int(i) for i in page.items],
        "shown": shown,
        "permutation": [int(k) for k in extra.get("permutation", range(n))],
        "scores": _floats(extra.get("scores"), n),
        "llm_scores": _floats(extra.get("llm_scores"), n),
        "embedding_scores": _floats(extra.get("embedding_scores"), n),
        "threshold": float(extra.get("threshold", math.nan)),
        "p_watch": float(extra.get("p_watch", math.nan)),
        "action": response.action.name.lower(),
        "item": -1 if response.item is None or position < 0 else int(response.item),
        "position": position,
        "rating": _rating_of(response),
        "query": response.query or "",
        "fallback": bool(response.fallback),
        "reward": 0.0,
    }


def _rating_of(response: Response) -> float:
    """The response's rating, else one a user model rated after the fact (``extra["rating"]``: distilled users with
    deferred ratings), else NaN (the LLM agent's deferred ratings are filled in after the session)."""
    rating = response.rating if response.rating is not None else response.extra.get("rating")
    return math.nan if rating is None else float(rating)


class Recorder:
    """A user model that answers through ``inner`` and keeps a decision row per page it answers for the users of
    the registered plans (``plans``: user id -> plan); the kernel steps it as it would ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.plans: dict[int, SessionPlan] = {}
        self.rows: dict[int, list[dict[str, Any]]] = {}

    def __getattr__(self, name: str) -> Any:  # the rest of the user-model protocol, and what callers probe for
        return getattr(self.inner, name)

    def track(self, plans: Sequence[SessionPlan]) -> None:
        """Record the sessions of ``plans`` (one per user) from now on, and no others."""
        self.plans = {p.user_id: p for p in plans}
        self.rows = {p.user_id: [] for p in plans}

    def respond_batch(
        self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[np.random.Generator]
    ) -> list[Response]:
        patience = [session_patience(self.inner, context.user_id) for _, context in requests]
        responses = self.inner.respond_batch(requests, rngs)
        for (page, context), response, before in zip(requests, responses, patience, strict=True):
            plan = self.plans.get(context.user_id)
            if plan is not None:
                row = decision_row(plan, page.index, len(context.watched), page, response, before)
                self.rows[context.user_id].append(row)
        return responses

    def respond(self, page: Page, context: Context, rng: np.random.Generator) -> Response:
        return self.respond_batch([(page, context)], [rng])[0]


def session_kernel(dataset: Any, config: Any, *, page_size: int, max_pages: int) -> Any:
    """The kernel of these sessions: the env's (``config.env``'s rules, the defaults without a config) with
    ``page_size`` and ``max_pages``, no social round, ended sessions written per batch."""
    from recagent_gym.envs.resolve import build_kernel

    return build_kernel(dataset, _settings(config), page_size, max_pages, social=False, end_batch=END_BATCH)


def reward_function(config: Any) -> Any:
    """The env's reward of a step (``config.env``'s weights; the defaults without a config)."""
    from recagent_gym.envs.reward import reward_from_config

    return reward_from_config(_settings(config).env)


def _settings(config: Any) -> Any:
    from recagent_gym.runs.config import Config

    return config if config is not None else Config()


@dataclass
class _Open:
    plan: SessionPlan
    rng: np.random.Generator
    genre: int
    shown: set[int] = field(default_factory=set)


def run_sessions(
    model: Any, plans: Sequence[SessionPlan], sources: Any, kernel: Any, reward: Any, *, seed: int
) -> list[dict[str, Any]]:
    """Run ``plans`` side by side through ``kernel`` (one user at most once in a batch; ``sources``: a
    :class:`~recagent_gym.runs.distill.pages.PageSources`, ``reward``: a step's reward from its outcome); the
    decision rows, ratings filled in."""
    from recagent_gym.session import SessionStream

    users = [p.user_id for p in plans]
    if len(set(users)) != len(users):
        raise ValueError("run_sessions: a batch holds one session per user")
    if not plans:
        return []
    recorder = Recorder(model)
    recorder.track(plans)
    lanes = [SessionStream(np.random.default_rng([seed, p.session_id])) for p in plans]
    kernel.restart(lanes, list(range(len(plans))), recorder, user_ids=users, time_h=0.0)
    opened = []
    for plan in plans:
        page_rng = np.random.default_rng([seed, plan.session_id, 1])  # the pages' draws, apart from the user's
        opened.append(_Open(plan, page_rng, sources.session_genre(plan.user_id, page_rng)))
    active = list(range(len(plans)))
    while active:
        sessions = [lanes[k].session for k in active]
        pages = []
        for k, s in zip(active, sessions, strict=True):
            o = opened[k]
            exclude = o.shown | set(s.watched)
            pages.append(sources.page(o.plan.source, o.plan.user_id, exclude, o.rng, o.genre))
        before = [len(recorder.rows[opened[k].plan.user_id]) for k in active]
        results = kernel.step_sessions(sessions, pages, recorder)
        for k, result, n in zip(active, results, before, strict=True):
            o = opened[k]
            o.shown.update(result.page.items)
            if result.search_page is not None:
                o.shown.update(result.search_page.items)
            rows = recorder.rows[o.plan.user_id]
            if len(rows) > n:
                rows[n]["reward"] = float(reward(result.outcome))
        active = [k for k in active if lanes[k].session.open]
    model.write_ended()
    return [row for p in plans for row in finish_rows(model, p.user_id, recorder.rows[p.user_id])]


def finish_rows(model: Any, user: int, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A finished session's rows with the ratings written after it filled in."""
    ratings = _deferred_ratings(model, user)
    for row in rows:
        if row["item"] >= 0 and math.isnan(row["rating"]) and row["item"] in ratings:
            row["rating"] = float(ratings[row["item"]])
    return rows


def _deferred_ratings(model: Any, user: int) -> dict[int, float]:
    """Ratings the LLM agent wrote at the end of the session (deferred feelings); empty for other models."""
    agent = getattr(model, "agent", None)
    if agent is None:
        return {}
    try:
        return dict(agent(user).ratings)
    except (KeyError, AttributeError, TypeError):
        return {}
