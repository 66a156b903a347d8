"""``recagent_gym/RecAgent-v0``: the recommender is the policy, the user answers page by page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from recagent_gym.config import Config
from recagent_gym.data.schema import Dataset
from recagent_gym.envs.activation import activation_weights, draw_user
from recagent_gym.envs.resolve import resolve_config, resolve_dataset
from recagent_gym.envs.reward import RewardFn, StepOutcome, reward_from_config
from recagent_gym.envs.tables import EnvTables
from recagent_gym.recommenders.search import CatalogueSearch
from recagent_gym.users.protocol import Action, Context, Page, Response, UserModel

RESPONSE_CODES: tuple[str, ...] = ("start", "watch", "next", "search_watch", "search_next", "leave")
"""Order of the ``last_response`` one-hot in the observation."""


@dataclass(frozen=True)
class UpcomingSession:
    """The next session of a sub-env, drawn but not started (see :meth:`RecAgentEnv.draw_session`)."""

    user_id: int
    redraws: int
    social_seed: int
    session_seed: int
    time_h: float
    social_due: bool
    """A social round should run before it (social on, the user model has one, not the world's first session)."""


class RecAgentEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """
    ## Description

    One episode is one recommender session of one simulated user (RecAgent, arXiv 2306.02552). The policy is the
    recommender: each step it shows a page of ``page_size`` catalogue items; the user model (an LLM agent, a
    RecSim interest-evolution user, or the paper's Embedding user) watches one, asks for the next page, searches,
    or leaves. A search is served by the env's catalogue search and the results page is shown to the user within
    the same step. Between sessions the social world runs (friends chat and post) when ``social`` is on and the
    user model supports it, so friends influence later sessions.

    ## Action Space

    ``MultiDiscrete([n_items] * page_size)``: the page, in display order. With the default
    ``duplicate_rule='replace'``, a slot repeating an earlier slot or holding an item the user already watched
    (in the dataset history or this session) is replaced by the most popular item that is neither; with
    ``'allow'`` the page is shown as given. Either way ``info['duplicates_replaced']`` and
    ``info['watched_replaced']`` count them. Wrappers in :mod:`recagent_gym.envs.wrappers` offer a continuous
    scoring action (top-k by score) and a discrete genre action.

    ## Observation Space

    A ``Dict`` of bounded numeric arrays (text lives in ``info``):

    | key              | space                                   | meaning                                           |
    |------------------|-----------------------------------------|---------------------------------------------------|
    | `user_id`        | Box(0, n_users - 1, (1,), int64)        | dense id of the session's user                    |
    | `user_features`  | Box(0, 1, (n_genres + 3,), float32)     | genre shares of the user's dataset history,       |
    |                  |                                         | then activity, diversity, conformity              |
    | `history`        | Box(-1, n_items - 1, (H,), int64)       | last H watched items, most recent first, -1 pad   |
    | `history_genres` | Box(0, 1, (n_genres,), float32)         | mean genre vector of `history`                    |
    | `page`           | Box(0, 1, (1,), float32)                | pages shown so far / `max_pages`                  |
    | `last_response`  | Box(0, 1, (6,), float32)                | one-hot of start, watch, next, search_watch,      |
    |                  |                                         | search_next, leave (see ``RESPONSE_CODES``)       |
    | `last_rating`    | Box(0, 1, (1,), float32)                | (rating - 1) / 4 of the last watch, 0 if none     |

    ## Rewards

    A pure function of the step's responses (:mod:`recagent_gym.envs.reward`, weights in ``EnvConfig``):
    ``reward_watch`` (1) per watch from the page plus ``reward_rating_bonus`` (0.25) per rating point above 3,
    ``reward_search_watch`` (0) for a watch from search results, 0 for next, ``reward_leave`` (0) on leave.
    ``reward_fn=`` replaces it.

    ## Starting State

    ``reset`` draws the session's user by activation (``EnvConfig.activation``: the paper's Pareto activity by
    default, drawn once per seed) unless ``options={"user_id": u}``, runs the social world first, and starts the
    user model's session. ``options={"time_h": t}`` sets the simulated clock (hours); otherwise each session
    advances it by ``EnvConfig.session_hours``. ``reset(seed=s)`` seeds everything from one generator: the
    activation, a child generator per session that the user model draws from (LLM seeds included), and, with
    ``user_model_reset_on_seed``, restores every user's state so two runs with the same seed are identical.

    ## Episode End

    Termination: the user leaves (LEAVE on the page or on the search results). Truncation: after ``max_pages``
    pages (the env's own count) or by ``TimeLimit`` (``max_episode_steps`` of the registration, 10; pass
    ``max_episode_steps`` to ``gymnasium.make`` together with a larger ``max_pages``).

    ## Arguments

    ``dataset`` (a spec such as ``"bundled"`` or a folder, or a :class:`Dataset`), ``user_model`` (``"llm"``,
    ``"recsim"``, ``"embedding"`` or a :class:`UserModel`; default ``config.user.model``), ``page_size``,
    ``max_pages``, ``social`` (defaults from ``config.env``), ``config`` (a :class:`Config`, YAML path or mapping),
    ``reward_fn``, ``llm`` and ``embedder`` (for the LLM users), ``render_mode`` (``"ansi"``).

    ## Version History

    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(
        self,
        dataset: Dataset | str | None = None,
        user_model: str | UserModel | None = None,
        page_size: int | None = None,
        max_pages: int | None = None,
        social: bool | None = None,
        config: Config | str | Path | Mapping[str, Any] | None = None,
        *,
        reward_fn: RewardFn | None = None,
        llm: Any = None,
        embedder: Any = None,
        render_mode: str | None = None,
        tables: EnvTables | None = None,
        search: CatalogueSearch | None = None,
        restore_users_on_seed: bool | None = None,
    ) -> None:
        self.config = resolve_config(config)
        env_cfg = self.config.env
        self.dataset = resolve_dataset(dataset, self.config)
        if self.dataset.n_items == 0 or self.dataset.n_users == 0:
            raise ValueError(f"dataset {self.dataset.name!r} needs at least one item and one user")
        self.page_size = int(page_size if page_size is not None else env_cfg.page_size)
        self.max_pages = int(max_pages if max_pages is not None else env_cfg.max_pages)
        if self.page_size < 1 or self.max_pages < 1:
            raise ValueError(f"page_size and max_pages must be >= 1, got {self.page_size} and {self.max_pages}")
        self.social = bool(env_cfg.social and self.config.social.enabled if social is None else social)
        self.history_length = env_cfg.history_length
        self.duplicate_rule = env_cfg.duplicate_rule
        self.render_mode = render_mode
        self.tables = tables if tables is not None else EnvTables.build(self.dataset)
        self.search = search if search is not None else CatalogueSearch(self.dataset)
        self.reward_fn = reward_fn if reward_fn is not None else reward_from_config(env_cfg)
        if user_model is None or isinstance(user_model, str):
            from recagent_gym.users.factory import build_user_model

            kind = user_model if user_model is not None else self.config.user.model
            self.user_model: UserModel = build_user_model(kind, self.dataset, self.config, llm=llm, embedder=embedder)
        else:
            self.user_model = user_model
        restore = env_cfg.user_model_reset_on_seed if restore_users_on_seed is None else restore_users_on_seed
        self._initial_user_state = self.user_model.get_state() if restore else None

        n_items, n_users, n_genres = self.tables.n_items, self.tables.n_users, self.tables.n_genres
        self.action_space = spaces.MultiDiscrete(np.full(self.page_size, n_items, dtype=np.int64))
        self.observation_space = spaces.Dict(
            {
                "user_id": spaces.Box(0, n_users - 1, (1,), np.int64),
                "user_features": spaces.Box(0.0, 1.0, (n_genres + 3,), np.float32),
                "history": spaces.Box(-1, n_items - 1, (self.history_length,), np.int64),
                "history_genres": spaces.Box(0.0, 1.0, (n_genres,), np.float32),
                "page": spaces.Box(0.0, 1.0, (1,), np.float32),
                "last_response": spaces.Box(0.0, 1.0, (len(RESPONSE_CODES),), np.float32),
                "last_rating": spaces.Box(0.0, 1.0, (1,), np.float32),
            }
        )
        self._weights: np.ndarray | None = None
        self._cumulative_weights: np.ndarray | None = None
        self._clock = 0.0
        self._sessions_started = 0
        self._user: int | None = None
        self._session_open = False
        self._session_rng = np.random.default_rng(0)
        self._seen = np.zeros(n_items, dtype=bool)
        self._history = np.full(self.history_length, -1, dtype=np.int64)
        self._history_genres = np.zeros(n_genres, dtype=np.float32)
        self._history_genre_sum = np.zeros(n_genres, dtype=np.float64)
        self._history_count = 0
        self._watched: list[int] = []
        self._page_index = 0
        self._pop_pointer = 0
        self._last_code = 0
        self._last_rating = 0.0
        self._last_page: Page | None = None
        self._search_page: Page | None = None
        self._last_info: dict[str, Any] = {}

    # ----------------------------------------------------------------------------------------------- Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None or self._weights is None:
            self.start_world(restore_users=seed is not None)
        options = options or {}
        user_id = options.get("user_id")
        time_h = options.get("time_h")
        return self.begin_session(
            None if user_id is None else int(user_id), time_h=None if time_h is None else float(time_h)
        )

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        page, context = self.begin_step(action)
        response = self.user_model.respond(page, context, self._session_rng)
        search_response = None
        request = self.search_request(response)
        if request is not None:
            search_response = self.user_model.respond(request[0], request[1], self._session_rng)
        return self.end_step(response, search_response)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        info = self._last_info
        if not info:
            return f"user {self._user}: session started"
        titles = self.dataset.items["title"]
        page = ", ".join(str(titles.iloc[i]) for i in info["page"])
        line = f"user {info['user_id']} page {info['page_index']}: [{page}] -> {info['response']}"
        if info.get("item") is not None:
            line += f" {titles.iloc[info['item']]!s} ({info.get('rating')})"
        return line

    def close(self) -> None:
        if self._session_open and self._user is not None:
            self.user_model.end_session(self._user)
            self._session_open = False

    # ------------------------------------------------------------- pieces, also driven by the vector env in batch
    @property
    def seen_mask(self) -> np.ndarray:
        """Items the current user already watched (dataset history and this session); read-only."""
        view = self._seen.view()
        view.flags.writeable = False
        return view

    @property
    def current_user(self) -> int | None:
        """The user of the open session (None before the first reset)."""
        return self._user

    @property
    def session_rng(self) -> np.random.Generator:
        """The session's child generator, which the user model draws from."""
        return self._session_rng

    def start_world(self, restore_users: bool) -> None:
        """A fresh world from ``self.np_random``: activation weights, clock, and (optionally) initial user states."""
        sim = self.config.simulation
        self._weights = activation_weights(self.config.env.activation, self.dataset, self.np_random, sim)
        self._cumulative_weights = np.cumsum(self._weights)
        self._clock = 0.0
        self._sessions_started = 0
        if restore_users and self._initial_user_state is not None:
            if self._session_open and self._user is not None:
                self.user_model.end_session(self._user)
                self._session_open = False
            self.user_model.set_state(self._initial_user_state)

    def begin_session(
        self, user_id: int | None = None, busy: frozenset[int] = frozenset(), *, time_h: float | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """End any open session, run the social world, draw the next user and start its session.

        ``time_h`` sets the simulated clock (an outer simulator's time); by default each session advances it by
        ``env.session_hours``. The vector env calls the three parts itself (:meth:`draw_session`,
        :meth:`social_round`, :meth:`open_session`) so that one social round serves all its sub-envs that start a
        session at the same step.
        """
        upcoming = self.draw_session(user_id, busy, time_h=time_h)
        events = self.social_round([upcoming.user_id], upcoming.social_seed) if upcoming.social_due else []
        return self.open_session(upcoming, events)

    def draw_session(
        self, user_id: int | None = None, busy: frozenset[int] = frozenset(), *, time_h: float | None = None
    ) -> UpcomingSession:
        """End any open session, advance the clock and draw the next session's user and seeds."""
        if self._weights is None:
            raise RuntimeError("RecAgentEnv: call reset() before starting a session")
        if self._session_open and self._user is not None:
            self.user_model.end_session(self._user)
            self._session_open = False
        if time_h is not None:
            self._clock = time_h
        elif self._sessions_started > 0:
            self._clock += self.config.env.session_hours
        redraws = 0
        if user_id is None:
            user_id, redraws = draw_user(self._cumulative_weights, self.np_random, busy)
        elif not 0 <= user_id < self.tables.n_users:
            raise ValueError(f"reset option user_id={user_id} is outside 0..{self.tables.n_users - 1}")
        # Both child seeds are drawn every session so the streams do not depend on the social switch.
        social_seed, session_seed = (int(s) for s in self.np_random.integers(0, 2**63 - 1, size=2))
        social_due = self.social and hasattr(self.user_model, "between_sessions") and self._sessions_started > 0
        return UpcomingSession(int(user_id), redraws, social_seed, session_seed, self._clock, social_due)

    def social_round(self, incoming: Sequence[int], seed: int, time_h: float | None = None) -> list[dict[str, Any]]:
        """Run the user model's social world once (``incoming`` users, about to start, sit it out); its events."""
        between = getattr(self.user_model, "between_sessions", None)
        if between is None:
            return []
        clock = self._clock if time_h is None else time_h
        return list(between(np.random.default_rng(seed), clock, list(incoming)))

    def open_session(
        self, upcoming: UpcomingSession, events: Sequence[dict[str, Any]] = ()
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start the drawn session (``events``: the social round that ran before it, reported in ``info``)."""
        user_id = upcoming.user_id
        self._session_rng = np.random.default_rng(upcoming.session_seed)
        self._user = user_id
        self._sessions_started += 1
        history = self.tables.histories[user_id]
        self._seen[:] = False
        self._seen[history] = True
        recent = history[::-1][: self.history_length]
        self._history[:] = -1
        self._history[: len(recent)] = recent
        self._update_history_genres()
        self._watched = []
        self._page_index = 0
        self._pop_pointer = 0
        self._last_code = 0
        self._last_rating = 0.0
        self._last_page = self._search_page = None
        self._last_info = {}
        self.user_model.start_session(user_id, self._session_rng)
        self._session_open = True
        info = {
            "user_id": user_id,
            "time_h": self._clock,
            "activation_redraws": upcoming.redraws,
            "social_events": list(events),
        }
        return self._observation(), info

    def begin_step(self, action: np.ndarray) -> tuple[Page, Context]:
        """Map the action to the page shown (duplicate rule applied) and the user's context."""
        if not self._session_open or self._user is None:
            raise RuntimeError("RecAgentEnv: the session is over; call reset()")
        items = np.asarray(action).reshape(-1)
        if items.shape[0] != self.page_size:
            raise ValueError(f"action must hold {self.page_size} item ids, got shape {np.shape(action)}")
        page_items = [int(i) for i in items]
        if min(page_items) < 0 or max(page_items) >= self.tables.n_items:
            raise ValueError(f"action holds item ids outside 0..{self.tables.n_items - 1}: {page_items}")
        page_items, self._duplicates, self._watched_replaced = self._apply_duplicate_rule(page_items)
        self._last_page = Page(tuple(page_items), index=self._page_index)
        self._search_page = None
        return self._last_page, self._context()

    def search_request(self, response: Response) -> tuple[Page, Context] | None:
        """The search results page to show when the user searched (None otherwise, or when nothing matched)."""
        if response.action != Action.SEARCH or response.query is None:
            return None
        results = self.search.search(response.query, self.page_size, exclude=self._seen)
        if not results:
            return None
        self._search_page = Page(tuple(results), index=self._page_index, source="search", query=response.query)
        return self._search_page, self._context()

    def end_step(
        self, response: Response, search_response: Response | None = None
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Apply the responses: reward, state, termination, observation and info."""
        assert self._user is not None and self._last_page is not None
        info: dict[str, Any] = {
            "user_id": self._user,
            "page_index": self._page_index,
            "page": self._last_page.items,
            "duplicates_replaced": self._duplicates,
            "watched_replaced": self._watched_replaced,
        }
        searched = response.action == Action.SEARCH
        search_repeat = search_empty = False
        if searched and search_response is None:
            search_empty = True
            search_response = Response(Action.NEXT, extra={"search_empty": True})
        elif searched and search_response is not None and search_response.action == Action.SEARCH:
            # One search per step: searching again on the results page counts as asking for the next page.
            search_repeat = True
            search_response = Response(Action.NEXT, text=search_response.text, usage=search_response.usage)
        final = search_response if searched and search_response is not None else response
        reward = float(self.reward_fn(StepOutcome(response, search_response if searched else None)))
        if final.action == Action.WATCH and final.item is not None:
            self._record_watch(final.item)
            self._last_rating = 0.0 if final.rating is None else (min(max(final.rating, 1.0), 5.0) - 1.0) / 4.0
            self._last_code = RESPONSE_CODES.index("search_watch") if searched else 1
        elif final.action == Action.LEAVE:
            self._last_code = 5
        else:
            self._last_code = RESPONSE_CODES.index("search_next") if searched else 2
        self._page_index += 1
        terminated = final.action == Action.LEAVE
        truncated = not terminated and self._page_index >= self.max_pages
        usage = response.usage if search_response is None or not searched else response.usage + search_response.usage
        info.update(
            response=RESPONSE_CODES[self._last_code],
            action=response.action.name.lower(),
            item=final.item if final.action == Action.WATCH else None,
            rating=final.rating if final.action == Action.WATCH else None,
            from_search=searched and final.action == Action.WATCH,
            query=response.query,
            search_page=self._search_page.items if self._search_page is not None else None,
            search_empty=search_empty,
            search_repeat=search_repeat,
            text=response.text
            if not searched or search_response is None
            else f"{response.text}\n{search_response.text}",
            feeling=final.feeling,
            usage=usage,
            parse_ok=response.parse_ok and (search_response is None or search_response.parse_ok),
            fallbacks=int(response.fallback) + int(search_response is not None and search_response.fallback),
            extra=response.extra if search_response is None else {**response.extra, "search": search_response.extra},
            time_h=self._clock,
        )
        if terminated or truncated:
            self.user_model.end_session(self._user)
            self._session_open = False
        self._last_info = info
        return self._observation(), reward, terminated, truncated, info

    # ---------------------------------------------------------------------------------------------------- helpers
    def _context(self) -> Context:
        assert self._user is not None
        return Context(user_id=self._user, step=self._page_index, time_h=self._clock, watched=tuple(self._watched))

    def _apply_duplicate_rule(self, items: list[int]) -> tuple[list[int], int, int]:
        seen = self._seen
        if self.duplicate_rule == "allow":
            return items, len(items) - len(set(items)), sum(bool(seen[i]) for i in items)
        taken: set[int] = set()
        duplicates = watched = 0
        for slot, item in enumerate(items):
            if item in taken:
                duplicates += 1
            elif seen[item]:
                watched += 1
            else:
                taken.add(item)
                continue
            replacement = self._replacement(taken)
            items[slot] = replacement
            taken.add(replacement)
        return items, duplicates, watched

    def _replacement(self, taken: set[int]) -> int:
        """The most popular item neither watched nor on the page (watched ones only if the catalogue is spent)."""
        order, seen = self.tables.popularity_order, self._seen
        n = len(order)
        pointer = self._pop_pointer
        while pointer < n and seen[order[pointer]]:
            pointer += 1
        self._pop_pointer = pointer
        for j in range(pointer, n):
            item = int(order[j])
            if not seen[item] and item not in taken:
                return item
        for item in order.tolist():
            if item not in taken:
                return item
        return int(order[0])  # page larger than the catalogue: a duplicate is unavoidable

    def _record_watch(self, item: int) -> None:
        self._seen[item] = True
        self._watched.append(item)
        evicted = int(self._history[-1])
        self._history[1:] = self._history[:-1].copy()
        self._history[0] = item
        # The window's genre sum changes by one item in and at most one out: cheaper than recomputing the mean.
        self._history_genre_sum += self.tables.topics[item]
        if evicted >= 0:
            self._history_genre_sum -= self.tables.topics[evicted]
        else:
            self._history_count += 1
        self._history_genres = (self._history_genre_sum / self._history_count).astype(np.float32)

    def _update_history_genres(self) -> None:
        valid = self._history[self._history >= 0]
        self._history_count = len(valid)
        self._history_genre_sum = self.tables.topics[valid].sum(axis=0)
        self._history_genres = (self._history_genre_sum / max(self._history_count, 1)).astype(np.float32)

    def _observation(self) -> dict[str, np.ndarray]:
        assert self._user is not None
        last = np.zeros(len(RESPONSE_CODES), dtype=np.float32)
        last[self._last_code] = 1.0
        return {
            "user_id": np.array([self._user], dtype=np.int64),
            "user_features": self.tables.user_features[self._user].copy(),
            "history": self._history.copy(),
            "history_genres": self._history_genres.copy(),
            "page": np.array([min(self._page_index / self.max_pages, 1.0)], dtype=np.float32),
            "last_response": last,
            "last_rating": np.array([self._last_rating], dtype=np.float32),
        }

    # ------------------------------------------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Plain-data state of the env and its user model (restorable with :meth:`set_state`)."""
        return {
            "np_random": self.np_random.bit_generator.state,
            "session_rng": self._session_rng.bit_generator.state,
            "weights": None if self._weights is None else self._weights.tolist(),
            "clock": self._clock,
            "sessions_started": self._sessions_started,
            "user": self._user,
            "session_open": self._session_open,
            "seen": np.flatnonzero(self._seen).tolist(),
            "history": self._history.tolist(),
            "watched": list(self._watched),
            "page_index": self._page_index,
            "pop_pointer": self._pop_pointer,
            "last_code": self._last_code,
            "last_rating": self._last_rating,
            "user_model": self.user_model.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.np_random.bit_generator.state = state["np_random"]
        self._session_rng.bit_generator.state = state["session_rng"]
        self._weights = None if state["weights"] is None else np.asarray(state["weights"], dtype=np.float64)
        self._cumulative_weights = None if self._weights is None else np.cumsum(self._weights)
        self._clock = float(state["clock"])
        self._sessions_started = int(state["sessions_started"])
        self._user = state["user"]
        self._session_open = bool(state["session_open"])
        self._seen[:] = False
        self._seen[np.asarray(state["seen"], dtype=np.int64)] = True
        self._history = np.asarray(state["history"], dtype=np.int64)
        self._update_history_genres()
        self._watched = [int(i) for i in state["watched"]]
        self._page_index = int(state["page_index"])
        self._pop_pointer = int(state["pop_pointer"])
        self._last_code = int(state["last_code"])
        self._last_rating = float(state["last_rating"])
        self.user_model.set_state(state["user_model"])
