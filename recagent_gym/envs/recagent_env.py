"""``recagent_gym/RecAgentCatalogue-v0`` (formerly ``RecAgent-v0``): the recommender is the policy, the user answers
page by page."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from recagent_gym.data.schema import Dataset
from recagent_gym.envs.render import render_ansi, render_rgb
from recagent_gym.envs.resolve import build_kernel, build_users, resolve_dataset, world_weights
from recagent_gym.envs.reward import RewardFn, reward_from_config
from recagent_gym.envs.settings import WorldSettings, require_settings
from recagent_gym.recommenders.search import CatalogueSearch
from recagent_gym.session import RESPONSE_CODES, SessionStream, SessionTables, observe
from recagent_gym.users.protocol import UserModel

__all__ = ["RESPONSE_CODES", "RecAgentEnv"]


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
    ``reward_fn``, ``llm`` and ``embedder`` (for the LLM users), ``render_mode`` (``"ansi"``: a text line of the last
    step; ``"rgb_array"``: the page as a small picture, genre shares per slot, the watched item green), ``tables`` and
    ``search`` (shared by the vector env's lanes). ``gymnasium.make_vec`` builds the batched
    :class:`~recagent_gym.envs.vector.RecAgentVectorEnv`.

    The env is a face of the session kernel (:mod:`recagent_gym.session`): one lane of sessions, stepped one page at
    a time by the same pipeline the vector env, the simulator and the evaluations use. Read-only for wrappers:
    ``dataset``, ``tables``, ``config``, ``user_model``, ``page_size``, ``max_pages``, ``seen_mask``, ``current_user``.

    ## Version History

    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 1}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(
        self,
        dataset: Dataset | str | None = None,
        user_model: str | UserModel | None = None,
        page_size: int | None = None,
        max_pages: int | None = None,
        social: bool | None = None,
        config: WorldSettings | None = None,
        *,
        reward_fn: RewardFn | None = None,
        llm: Any = None,
        embedder: Any = None,
        render_mode: str | None = None,
        tables: SessionTables | None = None,
        search: CatalogueSearch | None = None,
    ) -> None:
        self.config = require_settings(config, "RecAgentEnv")
        self.dataset = resolve_dataset(dataset, self.config)
        self.kernel = build_kernel(self.dataset, self.config, page_size, max_pages, social, tables, search)
        self.tables, self.page_size, self.max_pages = (
            self.kernel.tables,
            self.kernel.rules.page_size,
            self.kernel.rules.max_pages,
        )
        self.render_mode = render_mode
        self.reward_fn = reward_fn if reward_fn is not None else reward_from_config(self.config.env)
        self.user_model: UserModel = build_users(user_model, self.dataset, self.config, llm, embedder)
        reset_users = self.config.env.user_model_reset_on_seed
        self._initial_user_state = self.user_model.get_state() if reset_users else None
        n_items, n_users, n_genres = self.tables.n_items, self.tables.n_users, self.tables.n_genres
        self.action_space = spaces.MultiDiscrete(np.full(self.page_size, n_items, dtype=np.int64))
        self.observation_space = spaces.Dict(
            {
                "user_id": spaces.Box(0, n_users - 1, (1,), np.int64),
                "user_features": spaces.Box(0.0, 1.0, (n_genres + 3,), np.float32),
                "history": spaces.Box(-1, n_items - 1, (self.kernel.rules.history_length,), np.int64),
                "history_genres": spaces.Box(0.0, 1.0, (n_genres,), np.float32),
                "page": spaces.Box(0.0, 1.0, (1,), np.float32),
                "last_response": spaces.Box(0.0, 1.0, (len(RESPONSE_CODES),), np.float32),
                "last_rating": spaces.Box(0.0, 1.0, (1,), np.float32),
            }
        )
        self._lane = SessionStream(self.np_random)
        self._last_info: dict[str, Any] = {}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        lane = self._lane
        if seed is not None or lane.weights is None:
            if seed is not None and self._initial_user_state is not None:
                self.close()
                self.user_model.set_state(self._initial_user_state)
            lane.rng = self.np_random
            lane.start_world(world_weights(self.config, self.dataset, self.np_random))
        options = options or {}
        user_id, time_h = options.get("user_id"), options.get("time_h")
        started = self.kernel.restart(
            [lane],
            [0],
            self.user_model,
            user_ids=[None if user_id is None else int(user_id)],
            time_h=None if time_h is None else float(time_h),
        )
        self._last_info = {}
        return self._observation(), started[0].info

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        session = self._lane.session
        if session is None or not session.open:
            raise RuntimeError("RecAgentEnv: the session is over; call reset()")
        page = action[None] if isinstance(action, np.ndarray) else [action]  # a batch of one page
        result = self.kernel.step_sessions([session], page, self.user_model)[0]
        self._last_info = result.info()
        reward = float(self.reward_fn(result.outcome))
        return self._observation(), reward, result.terminated, result.truncated, self._last_info

    def render(self) -> Any:  # str (ansi) or an RGB array; gymnasium's own annotation differs across its versions
        if self.render_mode == "ansi":
            return render_ansi(self.dataset, self._last_info, self.current_user)
        if self.render_mode == "rgb_array":
            return render_rgb(self.tables, self._last_info, self.page_size)
        return None

    def close(self) -> None:
        session = self._lane.session
        if session is not None and session.open:
            self.kernel.end([session], models=[self.user_model])

    @property
    def seen_mask(self) -> np.ndarray:
        """Items the current user already watched (dataset history and this session); read-only."""
        if self._lane.session is None:
            raise RuntimeError("RecAgentEnv: call reset() first")
        view = self._lane.session.seen.view()
        view.flags.writeable = False
        return view

    @property
    def current_user(self) -> int | None:
        """The user of the current session, open or just ended (None before the first reset)."""
        return self._lane.user

    def _observation(self) -> dict[str, np.ndarray]:
        assert self._lane.session is not None
        return observe(self._lane.session, self.tables, self.max_pages)

    def get_state(self) -> dict[str, Any]:
        """Plain-data state of the env and its user model (restorable with :meth:`set_state`)."""
        return {"lane": self._lane.get_state(), "user_model": self.user_model.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self._lane.set_state(state["lane"], self.tables)
        self.user_model.set_state(state["user_model"])
