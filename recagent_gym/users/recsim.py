"""A RecSim interest-evolution style user (Ie et al., 2019), the classical baseline of the RecAgent paper.

State per user: an interest vector over genres in ``[-1, 1]`` (the user's genre shares in the dataset plus hidden
noise), a hidden latent taste vector, and, during a session, a time budget, a count of unrewarding pages and how
often each item was shown. One page reads like RecSim's step:

1. appeal of each shown item ``u_i = interest . topic_i + hidden_weight * latent . w_i + quality_weight * quality_i
   - allure * nutrition_i - fatigue * shown_i`` (``topic_i`` is the item's genre vector normalised to sum 1,
   ``w_i`` a unit vector per item (:attr:`RecSimUser.item_latents`), ``quality_i`` its shrunk mean rating mapped to
   ``[-1, 1]``, ``nutrition_i`` the rank of that quality mapped to ``[-1, 1]`` (:func:`item_nutrition`), ``shown_i``
   how often the item was already shown this session: re-shown and skipped items bore);
2. multinomial-logit choice over the page plus a no-click option: ``P(i) ~ exp(u_i / T)``, ``P(none) ~ mass``;
3. a click is a WATCH (rating ``round(3 + 2 u_i)`` clipped to 1..5) that costs ``watch_minutes * (1 -
   budget_restore * nutrition_ui)`` of the budget (:meth:`RecSimUser.nutrition_for`) and drifts the interest towards
   (rating >= 3) or away from the item's genres, and the latent taste towards (or away from) ``w_i`` (RecSim's
   interest evolution); no click is NEXT, a SEARCH for the favourite genre (with ``recsim_search_prob``), or LEAVE
   with probability ``1 / patience``;
4. every page consumes ``page_minutes`` of browsing time; the user LEAVEs when the budget cannot pay for a page.
   Under ``user.full_sessions`` neither the budget nor patience ends a session (the budget still runs down).

Planning (RecSim's "chocolate vs kale"): quality is distinct from appeal. With ``recsim_allure > 0`` junk is the most
clickable, and with ``recsim_budget_restore > 0`` (RecSim's ``user_update_alpha``) nutritious watches give time
back while junk drains it, so a myopic click maximiser ends sessions early and a planner that trades a little
appeal for nutrition earns more per session. Both are 0 by default (every watch costs the same);
``configs/rl_recsim.yaml`` turns them on. Nutrition is public (the observation's rating mean ranks items the same)
unless the env hides the quality column. With ``recsim_personal_nutrition = p > 0`` a share ``p`` of it is personal:
``nutrition_ui = (1 - p) * nutrition_i + p * erf(z_ui / sqrt 2)``, ``z_ui`` the user's latent affinity to the item
beyond the population's mean taste, in units of its spread over users and items. Then what keeps a session going
depends on who the user is (the current, drifting taste), and a planner needs to know the user as well as the items.

What is hidden: the latent taste (``recsim_hidden_dims``, ``recsim_hidden_weight``) and the interest noise
(``recsim_interest_noise``) are drawn once per population from ``recsim_seed``. With ``recsim_latent_from_history``
``= h`` the latent taste is ``h`` times the normalised mean latent of the user's dataset history plus ``1 - h`` times
noise: the history in the observation reveals part of it, no single feature derives it, and the rest only the
user's responses show. :meth:`RecSimUser.oracle_utilities` exposes the full appeal and
:meth:`RecSimUser.oracle_values` a planning-aware score, for an oracle reference.

Speed: the item side is precomputed (one ``(n_items, G + d)`` matrix of topics and weighted latents, one base
appeal per item, per-item drift columns and targets), the user side is one row of a ``(n_users, G + d)`` state
matrix, and a page's appeals are one small matrix-vector product; session bookkeeping is plain Python.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import erf

from recagent_gym.data.schema import Dataset
from recagent_gym.users.config import UserConfig
from recagent_gym.users.protocol import Action, Context, Page, Response
from recagent_gym.users.recsim_features import (
    apply_fit,
    bundled_fit_applies,
    collaborative_item_latents,
    history_directions,
    item_popularity,
)

_QUALITY_PRIOR_COUNT = 10.0
"""Pseudo-ratings at the global mean that shrink an item's mean rating (few ratings say little about quality)."""


def user_config(config: UserConfig | None) -> UserConfig:
    """The user section, or the defaults (the classical users take their own section, not the root config)."""
    if config is None:
        return UserConfig()
    if not isinstance(config, UserConfig):
        raise TypeError(f"the classical users take the user section (UserConfig), got {type(config).__name__}")
    return config


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


def item_nutrition(quality: np.ndarray) -> np.ndarray:
    """Rank of each item's quality mapped to ``[-1, 1]`` (ties share a rank): uniform over the catalogue, so half
    the items are junk and half nutritious whatever the dataset's rating scale."""
    n = len(quality)
    if n < 2:
        return np.zeros(n, dtype=np.float64)
    _, inverse, counts = np.unique(quality, return_inverse=True, return_counts=True)
    mid_rank = (np.cumsum(counts) - (counts + 1) / 2.0)[inverse]  # average rank of ties, from 0
    return 2.0 * mid_rank / (n - 1) - 1.0


def rating_from_utility(utility: float) -> float:
    """1..5 stars from a utility in about ``[-1, 1]``."""
    return float(min(5.0, max(1.0, round(3.0 + 2.0 * utility))))


def hidden_state(
    dataset: Dataset, config: UserConfig, interest: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(interest + noise, user latents, item latents)`` drawn from ``recsim_seed`` (one child stream each)."""
    interest_rng, user_rng, item_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(config.recsim_seed).spawn(3)
    )
    noisy = interest + config.recsim_interest_noise * interest_rng.standard_normal(interest.shape)
    dims = config.recsim_hidden_dims
    latent = user_rng.standard_normal((dataset.n_users, dims)) / math.sqrt(max(dims, 1))
    if config.recsim_item_latents == "collaborative":
        items = collaborative_item_latents(dataset, dims, config.recsim_seed)
    else:
        items = item_rng.standard_normal((dataset.n_items, dims))
        items /= np.maximum(np.linalg.norm(items, axis=1, keepdims=True), 1e-12)
    share = config.recsim_latent_from_history
    if share > 0 and dims:
        # The taste the user's dataset history points at (unit norm, as the noise's expected norm), plus noise.
        latent = share * history_directions(dataset, items) + (1.0 - share) * latent
    return np.clip(noisy, -1.0, 1.0), latent, items


def personal_scale(
    latent: np.ndarray, item_latents: np.ndarray, seed: int, sample: int = 256
) -> tuple[np.ndarray, float]:
    """The population's mean taste and the spread (SD) of ``(latent_u - mean) . w_i`` over users and items (at most
    ``sample`` users, drawn from ``seed``): the units of the personal nutrition's z-score."""
    if latent.shape[1] == 0 or len(latent) == 0:
        return np.zeros(latent.shape[1]), 1.0
    centre = latent.mean(axis=0)
    rows = np.random.default_rng(seed).permutation(len(latent))[:sample]
    spread = float(((latent[rows] - centre) @ item_latents.T).std())
    return centre, spread if spread > 0 else 1.0


class RecSimUser:
    """RecSim interest-evolution users over a dataset's catalogue (implements :class:`UserModel`)."""

    def __init__(self, dataset: Dataset, config: UserConfig | None = None) -> None:
        base = user_config(config)
        cfg = self.config = apply_fit(base, dataset, fit_here=lambda data: type(self)._fit_here(data, base))
        self.fitted_from: str | None = cfg.recsim_fitted
        """The fit whose weights this population uses (``user.recsim_fitted``), or None (hand-set weights)."""
        if cfg.recsim_fitted == "auto" and not bundled_fit_applies(dataset):
            self.fitted_from = f"auto: fitted on {dataset.name}'s real choices at start"
        self.genres = dataset.genres
        topics = item_topics(dataset)
        self._quality = item_quality(dataset)
        self._popularity = item_popularity(dataset)
        self._nutrition = item_nutrition(self._quality)
        interest, latent, self._item_latents = hidden_state(
            dataset, cfg, initial_interests(user_genre_shares(dataset, topics))
        )
        self._n_genres, dims = topics.shape[1], latent.shape[1]
        self._item_topics = topics
        # One state row per user (interest, latent taste, then a constant 1) and one item matrix (topics, weighted
        # latents, then the item's base appeal): a page's appeals are one take and one matvec.
        self._base_utility = (
            cfg.recsim_quality_weight * self._quality
            + cfg.recsim_popularity_weight * self._popularity
            - cfg.recsim_allure * self._nutrition
        )
        self._state = np.concatenate([interest, latent, np.ones((len(interest), 1))], axis=1)
        self._initial_rows = self._state.copy() if cfg.recsim_fresh_sessions else None  # each session starts here
        self.fresh_sessions = bool(cfg.recsim_fresh_sessions)
        self._item_matrix = np.concatenate(
            [cfg.recsim_interest_weight * topics, cfg.recsim_hidden_weight * self._item_latents,
             self._base_utility[:, None]], axis=1,
        )  # fmt: skip
        self._watch_cost_array = cfg.recsim_watch_minutes * (1.0 - cfg.recsim_budget_restore * self._nutrition)
        self._watch_cost = self._watch_cost_array.tolist()  # plain floats for the page step, the array for oracles
        self._personal = float(cfg.recsim_personal_nutrition) if dims else 0.0
        # z_ui as one dot with the user's state row (interest, latent, 1): the latent columns w_i / scale, the last
        # -(w_i . centre) / scale, 0 on the genres; only users with personal nutrition read it
        self._z_matrix = self._personal_z(latent, topics, cfg.recsim_seed) if self._personal else None
        # Per item, the drift of a watch as whole-row arrays (a few vector ops beat fancy indexing): the step on the
        # columns it moves (its genres and every latent column, 0 elsewhere) and where it moves them when liked
        # (+1 on its genres, its latent vector) or disliked (the opposite).
        moved = np.concatenate(
            [topics > 0, np.ones((len(topics), dims), dtype=bool), np.zeros((len(topics), 1), bool)], axis=1
        )
        self._drift_step = cfg.recsim_interest_drift * moved.astype(np.float64)
        self._drift_liked = np.concatenate(
            [(topics > 0).astype(np.float64), self._item_latents, np.ones((len(topics), 1))], axis=1
        )
        self._drift_disliked = -self._drift_liked
        self._sessions: dict[int, list[float]] = {}
        """Per user in a session: ``[budget, misses]``."""
        self._shown: dict[int, dict[int, int]] = {}
        """Per user, how often each item was shown in the user's current session (the fatigue)."""

    @property
    def _interest(self) -> np.ndarray:
        return self._state[:, : self._n_genres]

    @property
    def _latent(self) -> np.ndarray:
        return self._state[:, self._n_genres : -1]

    @property
    def interests(self) -> np.ndarray:
        """Current interest vectors ``(n_users, n_genres)`` (read-only view)."""
        view = self._interest.view()
        view.flags.writeable = False
        return view

    @property
    def item_latents(self) -> np.ndarray:
        """``(n_items, recsim_hidden_dims)`` unit vectors the hidden taste is scored against (public features)."""
        view = self._item_latents.view()
        view.flags.writeable = False
        return view

    @classmethod
    def _fit_here(cls, dataset: Dataset, user: UserConfig) -> Any:
        """``user.recsim_fitted: auto`` on a dataset without a shipped fit: fitted on its real choices, once."""
        from recagent_gym.users.recsim_fit import fit_for_dataset

        return fit_for_dataset(dataset, user, lambda history, cfg: cls(history, cfg).features)

    def features(self, user_id: int, items: np.ndarray) -> np.ndarray:
        """``(len(items), 4)`` unweighted utility terms for the user now: genre interest, latent affinity, quality,
        popularity (what ``users fit-recsim`` weighs; fatigue and allure left out)."""
        items = np.asarray(items, dtype=np.int64)
        row = self._state[user_id]
        genre = self._item_topics.take(items, axis=0) @ row[: self._n_genres]
        affinity = self._item_latents.take(items, axis=0) @ row[self._n_genres : -1]
        return np.stack([genre, affinity, self._quality[items], self._popularity[items]], axis=1)

    @property
    def nutrition(self) -> np.ndarray:
        """``(n_items,)`` the items' shared nutrition in ``[-1, 1]`` (:func:`item_nutrition`; it ranks as the rating
        mean). The user's own is :meth:`nutrition_for`."""
        view = self._nutrition.view()
        view.flags.writeable = False
        return view

    def nutrition_for(self, user_id: int, items: np.ndarray) -> np.ndarray:
        """``(len(items),)`` what a watch of each item gives back to ``user_id`` now: the shared nutrition mixed
        with the personal share (``user.recsim_personal_nutrition``; the shared one alone at 0)."""
        items = np.asarray(items, dtype=np.int64)
        shared = self._nutrition[items]
        if not self._personal:
            return shared
        z = self._z_matrix.take(items, axis=0) @ self._state[user_id]
        return (1.0 - self._personal) * shared + self._personal * erf(z / math.sqrt(2.0))

    def _personal_z(self, latent: np.ndarray, topics: np.ndarray, seed: int) -> np.ndarray:
        """``(n_items, G + d + 1)``: row i dotted with a user's state row is ``z_ui`` (:meth:`nutrition_for`)."""
        centre, scale = personal_scale(latent, self._item_latents, seed)
        w = self._item_latents
        return np.concatenate([np.zeros_like(topics), w, -(w @ centre)[:, None]], axis=1) / scale

    def _personal_cost(self, user_id: int, item: int) -> float:
        """:meth:`watch_costs` of one item in plain floats (the page step's path: no array call per watch)."""
        cfg = self.config
        z = float(self._z_matrix[item] @ self._state[user_id])
        nutrition = (1.0 - self._personal) * self._nutrition[item] + self._personal * math.erf(z / math.sqrt(2.0))
        return cfg.recsim_watch_minutes * (1.0 - cfg.recsim_budget_restore * nutrition)

    def watch_costs(self, user_id: int, items: np.ndarray) -> np.ndarray:
        """Minutes of the time budget a watch of each item costs ``user_id`` now."""
        if not self._personal:
            return self._watch_cost_array[np.asarray(items, dtype=np.int64)]
        cfg = self.config
        return cfg.recsim_watch_minutes * (1.0 - cfg.recsim_budget_restore * self.nutrition_for(user_id, items))

    def utilities(self, user_id: int, items: np.ndarray) -> np.ndarray:
        """Appeal of ``items`` for the user now, hidden taste and session fatigue included."""
        items = np.asarray(items, dtype=np.int64)
        utility = self._item_matrix.take(items, axis=0) @ self._state[user_id]
        shown = self._shown.get(user_id)
        if shown and self.config.recsim_fatigue:
            utility -= self.config.recsim_fatigue * np.array([shown.get(int(i), 0) for i in items], dtype=np.float64)
        return utility

    def oracle_utilities(self, user_id: int, items: np.ndarray) -> np.ndarray:
        """The full appeal (what a myopic oracle that knows the hidden state ranks by); same as :meth:`utilities`."""
        return self.utilities(user_id, np.asarray(items, dtype=np.int64))

    def oracle_values(self, user_id: int, items: np.ndarray, *, minute_value: float | None = None) -> np.ndarray:
        """A planning-aware score that knows the hidden state: ``exp(u_i / T) * (r_i - minute_value * cost_i)``, the
        SlateQ top-k score with the item's value its reward (1 + 0.25 per star above 3, the default reward) less
        the budget its watch costs, priced at ``minute_value`` reward per minute (default: one watch's reward per
        ``page_minutes + watch_minutes``, the price of a minute when every watch costs the same)."""
        cfg = self.config
        items = np.asarray(items, dtype=np.int64)
        utility = self.utilities(user_id, items)
        stars = np.clip(np.round(3.0 + 2.0 * utility), 1.0, 5.0)
        reward = 1.0 + 0.25 * (stars - 3.0)
        if minute_value is None:
            minute_value = 1.0 / max(cfg.recsim_page_minutes + cfg.recsim_watch_minutes, 1e-9)
        cost = self.watch_costs(user_id, items)
        top = utility.max() if len(utility) else 0.0
        return np.exp((utility - top) / cfg.recsim_choice_temperature) * (reward - minute_value * cost)

    def fork(self, user_id: int) -> RecSimUser:
        """A copy of these users for simulating ``user_id``'s session ahead (an oracle's rollouts): it shares the
        item-side tables (read-only) and owns copies of the state (interest and latent rows, the user's budget,
        misses and fatigue counts); what it is shown never touches this model. Only ``user_id``'s session is open
        in the copy."""
        twin = copy.copy(self)
        twin._state = self._state.copy()
        session = self._sessions.get(user_id)
        twin._sessions = {} if session is None else {user_id: list(session)}
        twin._shown = {user_id: dict(self._shown.get(user_id, {}))}
        return twin

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        self._sessions[user_id] = [self.config.recsim_time_budget, 0.0]
        if self._initial_rows is not None:  # recsim_fresh_sessions: the user as first drawn, every session
            self._state[user_id] = self._initial_rows[user_id]
            self._shown.pop(user_id, None)

    def end_sessions(self, user_ids: Sequence[int]) -> None:
        for user_id in user_ids:
            self._sessions.pop(user_id, None)

    def write_ended(self, *, at_least: int = 1) -> list[int]:
        return []  # nothing is written at the end of a session

    social = False
    """The classical users have no social life: :meth:`social_round` is empty and never run by the kernel."""

    def social_round(self, rng: np.random.Generator, time_h: float, incoming: Sequence[int]) -> list[dict[str, Any]]:
        return []

    def respond(self, page: Page, context: Context, rng: np.random.Generator) -> Response:
        cfg = self.config
        user = context.user_id
        session = self._sessions.get(user)
        if session is None:
            raise RuntimeError(f"RecSimUser.respond: no session started for user {user}")
        items = page.items
        if not items or (session[0] < cfg.recsim_page_minutes and not cfg.full_sessions):
            return Response(Action.LEAVE, extra={"budget": session[0]})
        session[0] -= cfg.recsim_page_minutes
        if context.step == 0 and page.source != "search":
            self._shown[user] = {}  # a new session: fatigue starts afresh (the protocol's start is left alone)
        shown = self._shown.setdefault(user, {})
        utilities = (self._item_matrix.take(items, axis=0) @ self._state[user]).tolist()
        fatigue = cfg.recsim_fatigue
        for k, item in enumerate(items):
            count = shown.get(item, 0)
            if count and fatigue:
                utilities[k] -= fatigue * count
            shown[item] = count + 1
        chosen = mnl_choice(utilities, cfg.recsim_choice_temperature, cfg.recsim_no_click_mass, rng.random())
        if chosen >= 0:
            item = items[chosen]
            utility = utilities[chosen]
            rating = rating_from_utility(utility)
            session[0] -= self._watch_cost[item] if not self._personal else self._personal_cost(user, item)
            session[1] = 0.0
            self._drift(user, item, rating >= 3.0)
            return Response(Action.WATCH, item=item, rating=rating, extra={"utility": utility})
        session[1] += 1.0
        if page.source != "search" and cfg.recsim_search_prob and rng.random() < cfg.recsim_search_prob:
            query = self.genres[int(np.argmax(self._interest[user]))]
            return Response(Action.SEARCH, query=query)
        if rng.random() < 1.0 / cfg.patience and not cfg.full_sessions:
            return Response(Action.LEAVE, extra={"misses": session[1]})
        return Response(Action.NEXT)

    def _drift(self, user: int, item: int, liked: bool) -> None:
        """Move the interest in the item's genres towards +1 (liked) or -1, and the latent taste towards (or away
        from) the item's latent vector, by ``recsim_interest_drift``: consumption shapes interest."""
        row = self._state[user]
        row += self._drift_step[item] * ((self._drift_liked if liked else self._drift_disliked)[item] - row)

    def respond_batch(
        self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[np.random.Generator]
    ) -> list[Response]:
        return [self.respond(page, context, rng) for (page, context), rng in zip(requests, rngs, strict=True)]

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        return self.utilities(user_id, np.asarray(items, dtype=np.int64))

    def get_state(self) -> dict[str, Any]:
        return {
            "interest": self._interest.tolist(),
            "latent": self._latent.tolist(),
            "shown": {str(user): {str(i): n for i, n in shown.items()} for user, shown in self._shown.items()},
            "sessions": {str(user): {"budget": s[0], "misses": s[1]} for user, s in self._sessions.items()},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        interest = np.asarray(state["interest"], dtype=np.float64)
        if interest.shape != self._interest.shape:
            raise ValueError(f"RecSimUser.set_state: interest shape {interest.shape} != {self._interest.shape}")
        self._state[:, : self._n_genres] = interest
        if "latent" in state:
            self._state[:, self._n_genres : -1] = np.asarray(state["latent"], dtype=np.float64).reshape(
                self._latent.shape
            )
        self._shown = {
            int(user): {int(i): int(n) for i, n in shown.items()} for user, shown in state.get("shown", {}).items()
        }
        self._sessions = {int(user): [float(s["budget"]), float(s["misses"])] for user, s in state["sessions"].items()}
