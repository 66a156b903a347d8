"""Sessions of any user model over page sources, one decision row per page: the loop shared by ``users collect``
(LLM users, rows go to Parquet) and ``users fidelity`` (every user model, the same pages and session rules).

A session starts with ``start_session``; each step shows the source's page (or, after a SEARCH, the catalogue's
results for the query, ``page_source == "search"``); it ends on LEAVE or after ``max_pages`` decisions. Sessions of
one batch run side by side, so the LLM agents decide all their pages in one batched call per step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recagent_gym.recommenders.search import CatalogueSearch
from recagent_gym.runs.distill.pages import PageSources
from recagent_gym.users.protocol import Action, Context, Page, Response, UserModel

ACTIONS: tuple[str, ...] = tuple(a.name.lower() for a in Action)
"""Action names in :class:`Action` order: watch, next, search, leave."""


@dataclass(frozen=True)
class SessionPlan:
    session_id: int
    user_id: int
    source: str


def plan_sessions(user_ids: Sequence[int], sources: Sequence[str], n_sessions: int, seed: int) -> list[SessionPlan]:
    """``n_sessions`` plans: users in a seeded order (cycled), the sources rotating so each user meets all of them."""
    if not user_ids or not sources:
        raise ValueError("plan_sessions needs at least one user and one source")
    order = np.random.default_rng(seed).permutation(np.asarray(user_ids, dtype=np.int64))
    n = len(order)
    return [SessionPlan(k, int(order[k % n]), sources[(k + k // n) % len(sources)]) for k in range(n_sessions)]


@dataclass
class _Open:
    plan: SessionPlan
    rng: np.random.Generator
    genre: int
    shown: set[int] = field(default_factory=set)
    watched: list[int] = field(default_factory=list)
    query: str | None = None
    page_index: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)


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
    """One logged decision: ``plan``'s session at its ``page_index``-th page, ``watched_count`` watches before it."""
    extra = response.extra
    shown = [int(i) for i in extra.get("shown", page.items)]
    n = len(shown)
    position = shown.index(response.item) if response.item is not None else -1
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
        "item": -1 if response.item is None else int(response.item),
        "position": position,
        "rating": _rating_of(response),
        "query": response.query or "",
        "fallback": bool(response.fallback),
    }


def _rating_of(response: Response) -> float:
    """The response's rating, else one a user model rated after the fact (``extra["rating"]``: distilled users with
    deferred ratings), else NaN (the LLM agent's deferred ratings are filled in after the session)."""
    rating = response.rating if response.rating is not None else response.extra.get("rating")
    return math.nan if rating is None else float(rating)


def step_reward(row: dict[str, Any]) -> float:
    """The env's default reward of a decision: +1 per watch from a recommended page, 0.25 per rating point over 3."""
    if row["action"] != "watch" or row["page_source"] != "recommender":
        return 0.0
    rating = row["rating"]
    return 1.0 + (0.0 if math.isnan(rating) else 0.25 * (rating - 3.0))


def run_sessions(
    model: UserModel,
    plans: Sequence[SessionPlan],
    sources: PageSources,
    search: CatalogueSearch,
    *,
    max_pages: int,
    seed: int,
) -> list[dict[str, Any]]:
    """Run ``plans`` side by side (one user at most once in a batch); the decision rows, ratings filled in."""
    users = [p.user_id for p in plans]
    if len(set(users)) != len(users):
        raise ValueError("run_sessions: a batch holds one session per user")
    opened = []
    for plan in plans:
        rng = np.random.default_rng([seed, plan.session_id])
        model.start_session(plan.user_id, rng)
        opened.append(_Open(plan, rng, sources.session_genre(plan.user_id, rng)))
    active = list(opened)
    while active:
        requests, rngs, patience = [], [], []
        for s in active:
            if s.query is not None:
                exclude = np.fromiter(s.watched, dtype=np.int64, count=len(s.watched))
                items = search.search(s.query, sources.page_size, exclude=exclude)
                page = Page(tuple(items), s.page_index, "search", s.query)
            else:
                items = sources.page(s.plan.source, s.plan.user_id, s.shown, s.rng, s.genre)
                page = Page(tuple(items), s.page_index)
            s.shown.update(page.items)
            context = Context(user_id=s.plan.user_id, step=s.page_index, watched=tuple(s.watched))
            requests.append((page, context))
            rngs.append(s.rng)
            patience.append(session_patience(model, s.plan.user_id))
        responses = model.respond_batch(requests, rngs)
        still = []
        for s, (page, _), response, before in zip(active, requests, responses, patience, strict=True):
            s.rows.append(decision_row(s.plan, s.page_index, len(s.watched), page, response, before))
            s.page_index += 1
            s.query = response.query if response.action == Action.SEARCH else None
            if response.item is not None:
                s.watched.append(int(response.item))
            if response.action != Action.LEAVE and s.page_index < max_pages:
                still.append(s)
        active = still
    model.end_sessions(users)
    model.write_ended()
    return [row for s in opened for row in finish_rows(model, s.plan.user_id, s.rows)]


def finish_rows(model: Any, user: int, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A finished session's rows with the ratings written after it filled in, and each row's reward."""
    ratings = _deferred_ratings(model, user)
    for row in rows:
        if row["item"] >= 0 and math.isnan(row["rating"]) and row["item"] in ratings:
            row["rating"] = float(ratings[row["item"]])
        row["reward"] = step_reward(row)
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
