"""A RecSim interest-evolution style user (Ie et al., 2019), the classical baseline of the RecAgent paper.

State per user: an interest vector over genres in ``[-1, 1]`` (initialised from the user's history in the dataset)
and, during a session, a time budget and a count of unrewarding pages. One page reads like RecSim's step:

1. utility of each shown item ``u_i = interest . topic_i + quality_weight * quality_i`` (``topic_i`` is the item's
   genre vector normalised to sum 1, ``quality_i`` its shrunk mean rating mapped to ``[-1, 1]``);
2. multinomial-logit choice over the page plus a no-click option: ``P(i) ~ exp(u_i / T)``, ``P(none) ~ mass``;
3. a click is a WATCH (rating ``round(3 + 2 u_i)`` clipped to 1..5) that consumes watch time and drifts the interest
   towards (rating >= 3) or away from the item's genres; no click is NEXT, a SEARCH for the favourite genre (with
   ``recsim_search_prob``), or LEAVE with probability ``1 / patience``;
4. every page consumes browsing time; the user LEAVEs when the budget cannot pay for another page.

Everything is numpy on precomputed arrays (no pandas after construction), so one response costs microseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from recagent_gym.config import Config
from recagent_gym.data.schema import Dataset
from recagent_gym.users.config import UserConfig
from recagent_gym.users.protocol import Action, Context, Page, Response

_QUALITY_PRIOR_COUNT = 10.0
"""Pseudo-ratings at the global mean that shrink an item's mean rating (few ratings say little about quality)."""


def user_config(config: Config | UserConfig | None) -> UserConfig:
    """The user section from a root config, a section, or the defaults."""
    if isinstance(config, Config):
        return config.user
    return config if config is not None else UserConfig()


def item_quality(dataset: Dataset) -> np.ndarray:
    """Shrunk mean rating per item mapped from 1..5 to ``[-1, 1]``; 0 where the dataset has no ratings."""
    inter = dataset.interactions
    ratings = inter["rating"].to_numpy(dtype=np.float64)
    rated = ~np.isnan(ratings)
    if not rated.any():
        return np.zeros(dataset.n_items, dtype=np.float64)
    items = inter["item_id"].to_numpy()[rated]
    sums = np.bincount(items, weights=ratings[rated], minlength=dataset.n_items)
    counts = np.bincount(items, minlength=dataset.n_items)
    mean = float(ratings[rated].mean())
    shrunk = (sums + _QUALITY_PRIOR_COUNT * mean) / (counts + _QUALITY_PRIOR_COUNT)
    return np.clip((shrunk - 3.0) / 2.0, -1.0, 1.0)


def item_topics(dataset: Dataset) -> np.ndarray:
    """``(n_items, n_genres)`` genre vectors normalised to sum 1 (all zeros for an item without genres)."""
    genres = dataset.genre_matrix().astype(np.float64)
    return genres / np.maximum(genres.sum(axis=1, keepdims=True), 1.0)


def user_genre_shares(dataset: Dataset, topics: np.ndarray | None = None) -> np.ndarray:
    """``(n_users, n_genres)`` share of each genre in the user's history (rows sum to 1; 0 without history)."""
    topics = item_topics(dataset) if topics is None else topics
    inter = dataset.interactions
    counts = np.zeros((dataset.n_users, topics.shape[1]), dtype=np.float64)
    np.add.at(counts, inter["user_id"].to_numpy(), topics[inter["item_id"].to_numpy()])
    return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1e-12)


def initial_interests(shares: np.ndarray) -> np.ndarray:
    """Interest in ``[-1, 1]``: the user's favourite genre is 1, genres never watched are -1, linear in between."""
    top = shares.max(axis=1, keepdims=True)
    interest = np.where(top > 0, 2.0 * shares / np.where(top > 0, top, 1.0) - 1.0, 0.0)
    return np.clip(interest, -1.0, 1.0)


def mnl_choice(utilities: Sequence[float], temperature: float, no_click_mass: float, u01: float) -> int:
    """Index drawn from the multinomial logit over ``utilities`` plus a no-click option; -1 means no click.

    ``u01`` is one uniform draw, so the caller's generator stays the only source of randomness. Plain floats: for
    a page of a few items this is several times faster than numpy's per-call overhead.
    """
    top = max(utilities)
    # Shifting by the top utility avoids overflow; the no-click weight gets the same shift, so the odds against it
    # stay exp(u / T) : mass.
    weights = [math.exp((u - top) / temperature) for u in utilities]
    draw = u01 * (math.fsum(weights) + no_click_mass * math.exp(-top / temperature))
    cumulative = 0.0
    for index, weight in enumerate(weights):
        cumulative += weight
        if draw < cumulative:
            return index
    return -1


def rating_from_utility(utility: float) -> float:
    """1..5 stars from a utility in about ``[-1, 1]``."""
    return float(min(5.0, max(1.0, round(3.0 + 2.0 * utility))))


class RecSimUser:
    """RecSim interest-evolution users over a dataset's catalogue (implements :class:`UserModel`)."""

    def __init__(self, dataset: Dataset, config: Config | UserConfig | None = None) -> None:
        self.config = user_config(config)
        self.genres = dataset.genres
        self._topics = item_topics(dataset)
        self._quality = item_quality(dataset)
        self._base_utility = self.config.recsim_quality_weight * self._quality
        self._interest = initial_interests(user_genre_shares(dataset, self._topics))
        self._item_genres = [np.flatnonzero(row).tolist() for row in self._topics > 0]
        self._sessions: dict[int, dict[str, float]] = {}

    @property
    def interests(self) -> np.ndarray:
        """Current interest vectors ``(n_users, n_genres)`` (read-only view)."""
        view = self._interest.view()
        view.flags.writeable = False
        return view

    def utilities(self, user_id: int, items: np.ndarray) -> np.ndarray:
        return self._topics[items] @ self._interest[user_id] + self._base_utility[items]

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        self._sessions[user_id] = {"budget": self.config.recsim_time_budget, "misses": 0.0}

    def end_sessions(self, user_ids: Sequence[int]) -> None:
        for user_id in user_ids:
            self._sessions.pop(user_id, None)

    def write_ended(self, *, at_least: int = 1) -> list[int]:
        return []  # nothing is written at the end of a session

    def social_round(self, rng: np.random.Generator, time_h: float, incoming: Sequence[int]) -> list[dict[str, Any]]:
        return []  # the classical users have no social life

    def respond(self, page: Page, context: Context, rng: np.random.Generator) -> Response:
        cfg = self.config
        user = context.user_id
        session = self._sessions.get(user)
        if session is None:
            raise RuntimeError(f"RecSimUser.respond: no session started for user {user}")
        if session["budget"] < cfg.recsim_page_minutes or not page.items:
            return Response(Action.LEAVE, extra={"budget": session["budget"]})
        session["budget"] -= cfg.recsim_page_minutes
        items = np.fromiter(page.items, dtype=np.int64, count=len(page.items))
        utilities = self.utilities(user, items).tolist()
        chosen = mnl_choice(utilities, cfg.recsim_choice_temperature, cfg.recsim_no_click_mass, rng.random())
        if chosen >= 0:
            item = page.items[chosen]
            utility = utilities[chosen]
            rating = rating_from_utility(utility)
            session["budget"] -= cfg.recsim_watch_minutes
            session["misses"] = 0.0
            self._drift(user, item, rating >= 3.0)
            return Response(Action.WATCH, item=item, rating=rating, extra={"utility": utility})
        session["misses"] += 1.0
        if page.source != "search" and rng.random() < cfg.recsim_search_prob:
            query = self.genres[int(np.argmax(self._interest[user]))]
            return Response(Action.SEARCH, query=query)
        if rng.random() < 1.0 / cfg.patience:
            return Response(Action.LEAVE, extra={"misses": session["misses"]})
        return Response(Action.NEXT)

    def _drift(self, user: int, item: int, liked: bool) -> None:
        """Move the interest in the item's genres towards +1 (liked) or -1, by ``recsim_interest_drift``."""
        interest = self._interest[user]
        target = 1.0 if liked else -1.0
        step = self.config.recsim_interest_drift
        for genre in self._item_genres[item]:
            interest[genre] += step * (target - interest[genre])

    def respond_batch(
        self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[np.random.Generator]
    ) -> list[Response]:
        return [self.respond(page, context, rng) for (page, context), rng in zip(requests, rngs, strict=True)]

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        return self.utilities(user_id, np.asarray(items, dtype=np.int64))

    def get_state(self) -> dict[str, Any]:
        return {
            "interest": self._interest.tolist(),
            "sessions": {str(user): dict(session) for user, session in self._sessions.items()},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        interest = np.asarray(state["interest"], dtype=np.float64)
        if interest.shape != self._interest.shape:
            raise ValueError(f"RecSimUser.set_state: interest shape {interest.shape} != {self._interest.shape}")
        self._interest = interest
        self._sessions = {int(user): dict(session) for user, session in state["sessions"].items()}
