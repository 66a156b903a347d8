"""``recagent_gym/RecAgentCandidates-v0`` (formerly ``RecAgent-v1``): each step the policy ranks K retrieved
candidates; the user answers the page.

:class:`RecAgentCandidateEnv` is a face of the session kernel, as RecAgent-v0 is: a :class:`SlateStream` is one
kernel stream of sessions plus what v1 adds to its open session (the candidates on offer, the items shown and
skipped). The env steps one stream; the batched vector env
(:class:`~recagent_gym.envs.candidate_slate_vector.RecAgentCandidateVectorEnv`) steps N through the same methods
(:meth:`RecAgentCandidateEnv.start_sessions`, :meth:`~RecAgentCandidateEnv.step_streams`), so the users of all of
them answer in one ``respond_batch``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from recagent_gym.data.schema import Dataset
from recagent_gym.envs.candidates import CandidateRetriever
from recagent_gym.envs.encoding import Encoder, item_feature_table
from recagent_gym.envs.render import render_ansi, render_rgb
from recagent_gym.envs.resolve import build_kernel, build_users, resolve_dataset, world_weights
from recagent_gym.envs.reward import RewardFn, reward_from_config
from recagent_gym.envs.settings import WorldSettings, require_settings
from recagent_gym.session import RecommenderSession, SessionStream, StepResult
from recagent_gym.users.protocol import UserModel, forgets_sessions

ACTION_MODES: tuple[str, ...] = ("scores", "slate")
SEED_RANGE = 2**31 - 1
"""The kernel stream's seed is drawn below it from the env's generator (as RecAgent-v0's ``reset(seed)`` takes)."""


@dataclass
class SlateStream:
    """One stream of RecAgent-v1 sessions (the single env, or one sub-env of the vector env): the kernel's stream and
    what v1 adds to its open session."""

    rng: np.random.Generator
    """v1's generator: the session's user (from the pool), the kernel stream's seed, the random candidates."""
    stream: SessionStream = field(default_factory=lambda: SessionStream(np.random.default_rng()))
    candidates: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Catalogue ids on offer for the next page."""
    shown: dict[int, int] = field(default_factory=dict)
    """Items shown this session (after the duplicate rule), with how often."""
    skipped: list[int] = field(default_factory=list)
    """Shown items the user did not watch, one entry per showing."""

    @property
    def session(self) -> RecommenderSession | None:
        """The kernel's session: open, or just ended (None before the first)."""
        return self.stream.session


class SlateStep(NamedTuple):
    """One stream's page step: the kernel's result, the reward and v1's ``info``."""

    result: StepResult
    reward: float
    info: dict[str, Any]


class RecAgentCandidateEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """
    ## Description

    The candidate-slate form of RecAgent-v0 (same users, sessions, reward and social world), shaped like RecSim's
    interest-evolution env: each step a retrieval stage (:mod:`recagent_gym.envs.candidates`: a documented mix of
    MF, genre-matched, popular, friends' and random items, never an item the user watched) offers
    ``n_candidates`` items, the observation describes them as item features next to the user's encoding, and the
    policy picks the page among them. A policy that scores items with shared weights therefore learns
    item-level preferences and generalises to unseen users and items.

    Hidden state: with ``env.hide_quality`` the quality column is constant, but RecSim-style users' nutrition
    (the hidden "kale", which follows the mean rating) is partly public: ridge regression on the observed item
    columns recovers it with out-of-sample R2 0.32 (linear) / 0.36 (quadratic) over the 2,814 items offered to 200
    training users, mostly through the latent block (0.29; popularity 0.01). The retriever adds nothing to that
    (its blocks are ordered by public signals; block and position add 0.002 to the R2): see
    ``benchmarks/probe_hidden_nutrition.py``.

    ## Action Space

    ``action_mode='scores'`` (default): ``Box(-1, 1, (n_candidates,), float32)``, one score per candidate; the page
    is the ``page_size`` best-scored valid candidates (distinct by construction). ``action_mode='slate'``:
    ``MultiDiscrete([n_candidates] * page_size)``, candidate indices in display order; a repeated or masked index is
    replaced by the lowest unused valid index (counted in ``info['slate_repairs']``), so repeats never reach the
    user. ``candidate_mask`` in the observation marks valid candidates (all of them unless the catalogue is short).

    ## Observation Space

    A ``Dict`` (details of the item features in :mod:`recagent_gym.envs.encoding`; ``F = n_genres + 3 +
    latent_dim``, ``G = n_genres``):

    | key              | space                                | meaning                                              |
    |------------------|--------------------------------------|------------------------------------------------------|
    | `user`           | Box(0, 1, (G + 3,))                  | dataset genre shares, activity, diversity, conformity|
    | `history`        | Box(-1, 1, (H, F + 1))               | last H watched items (dataset, then this session) as |
    |                  |                                      | item features, most recent first; last column: valid |
    | `session`        | Box(-1, 1, (10 + 2F,))               | pages shown / max_pages, last response one-hot (6),  |
    |                  |                                      | last rating, watched and skipped counts, mean item   |
    |                  |                                      | features of the session's watched, then skipped items|
    | `candidates`     | Box(-1, 1, (K, F + 2))               | item features, shown earlier this session, shown to  |
    |                  |                                      | this user in an earlier session (always 0 for users  |
    |                  |                                      | who start each session afresh, e.g. RecSim's)        |
    | `candidate_mask` | Box(0, 1, (K,))                      | 1 for a valid candidate                              |

    ## Rewards

    RecAgent-v0's reward (:mod:`recagent_gym.envs.reward`): by default +1 per watch from the page plus 0.25 per
    rating point above 3. ``info`` is v0's with ``slate``, ``slate_repairs`` and ``candidates`` added; ``item`` and
    ``rating`` are -1 when nothing was watched (values that Gymnasium's vector envs can batch).

    ## Starting State

    ``reset`` picks the session's user uniformly from ``users`` (all users by default; the training users of a
    held-out split in the RL protocol) unless ``options={"user_id": u}`` (``options={"time_h": t}`` sets the
    clock); ``reset(seed=s)`` restores every user's state (v0's ``reset(seed)``), so two runs with the same seed are
    identical.

    ## Episode End

    Termination: the user leaves. Truncation: after ``max_pages`` pages, or by ``TimeLimit`` (``max_episode_steps``
    of the registration, 10).

    ## Arguments

    As RecAgent-v0 (``dataset``, ``user_model``, ``page_size``, ``max_pages``, ``social``, ``config``,
    ``reward_fn``, ``llm``, ``embedder``, ``render_mode``) plus ``n_candidates`` (K, 50), ``action_mode``
    (``scores`` or ``slate``), ``candidate_mix`` (shares per source, see :data:`~recagent_gym.envs.candidates.
    DEFAULT_MIX`), ``latent_dim`` (8), ``history_length`` (H, 10), ``users`` (the pool ``reset`` draws from)
    and ``retriever`` (a :class:`~recagent_gym.envs.candidates.CandidateRetriever` to share between envs over the
    same dataset: its MF factorisation is the slowest part of building an env; ``candidate_mix`` is then the
    retriever's; any object with ``k``, ``n_users`` and ``retrieve(user, excluded, rng)`` serves, e.g. the fixed
    pools of ``evaluate agreement``) and ``item_features`` (another env's ``(item_features, latent_source)``, so
    that a policy trained there sees the same observation here: a policy trained on distilled users, evaluated on
    LLM users).

    ## Version History

    * v1: candidate-slate version of v0 (retrieval stage, item-feature observation, candidate-index actions).
      A face of the session kernel (:mod:`recagent_gym.session`), as v0 is: one stream of sessions, whose
      kernel session (history window, watches, page count, last response) the observation reads; the env adds
      the candidates and the items shown and skipped. ``gymnasium.make_vec`` builds the batched
      :class:`~recagent_gym.envs.candidate_slate_vector.RecAgentCandidateVectorEnv` (one user-model call per step
      for all sub-envs).
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
        n_candidates: int = 50,
        action_mode: str = "scores",
        candidate_mix: Mapping[str, float] | None = None,
        latent_dim: int = 8,
        history_length: int = 10,
        users: Sequence[int] | np.ndarray | None = None,
        retriever: CandidateRetriever | None = None,
        item_features: tuple[np.ndarray, str] | None = None,
        reward_fn: RewardFn | None = None,
        llm: Any = None,
        embedder: Any = None,
        render_mode: str | None = None,
    ) -> None:
        if action_mode not in ACTION_MODES:
            raise ValueError(f"unknown action_mode {action_mode!r}; expected one of {', '.join(ACTION_MODES)}")
        self.config = require_settings(config, "RecAgentCandidateEnv")
        self.dataset = resolve_dataset(dataset, self.config)
        self.kernel = build_kernel(
            self.dataset, self.config, page_size, max_pages, social, history_length=history_length
        )
        rules = self.kernel.rules
        self.tables, self.page_size, self.max_pages = self.kernel.tables, rules.page_size, rules.max_pages
        self.reward_fn = reward_fn if reward_fn is not None else reward_from_config(self.config.env)
        self.user_model: UserModel = build_users(user_model, self.dataset, self.config, llm, embedder)
        self._initial_user_state = self.user_model.get_state() if self.config.env.user_model_reset_on_seed else None
        if n_candidates < self.page_size:
            raise ValueError(f"n_candidates ({n_candidates}) must be >= page_size ({self.page_size})")
        self.users = np.arange(self.tables.n_users) if users is None else np.asarray(users, dtype=np.int64)
        if len(self.users) == 0 or self.users.min() < 0 or self.users.max() >= self.tables.n_users:
            raise ValueError(f"users must be a non-empty set of ids in 0..{self.tables.n_users - 1}")
        self.n_candidates, self.action_mode, self.render_mode = n_candidates, action_mode, render_mode
        self.retriever = self._checked_retriever(retriever, candidate_mix)
        self.item_features, self.latent_source = self._checked_item_features(item_features, latent_dim)
        self.encoder = Encoder(
            self.item_features,
            self.tables,
            n_candidates=n_candidates,
            history_length=history_length,
            max_pages=self.max_pages,
            page_size=self.page_size,
        )
        self.observation_space = self.encoder.space
        self.action_space = (
            spaces.Box(-1.0, 1.0, (n_candidates,), np.float32)
            if action_mode == "scores"
            else spaces.MultiDiscrete(np.full(self.page_size, n_candidates, dtype=np.int64))
        )
        self.shown_before: dict[int, set[int]] = {}
        """Per user, the items shown in ended sessions since the last seeded reset (see :func:`forgets_sessions`)."""
        self._slate_stream = SlateStream(self.np_random)
        self._last_result: StepResult | None = None

    def _checked_retriever(
        self, retriever: CandidateRetriever | None, mix: Mapping[str, float] | None
    ) -> CandidateRetriever:
        if retriever is None:
            return CandidateRetriever(self.dataset, self.tables, k=self.n_candidates, mix=mix)
        if retriever.k != self.n_candidates or retriever.n_users != self.tables.n_users:
            raise ValueError(
                f"retriever: built for K={retriever.k} and {retriever.n_users} users, but the env has "
                f"n_candidates={self.n_candidates} and {self.tables.n_users} users"
            )
        return retriever

    def _checked_item_features(
        self, item_features: tuple[np.ndarray, str] | None, latent_dim: int
    ) -> tuple[np.ndarray, str]:
        if item_features is None:
            item_features = item_feature_table(
                self.dataset, self.tables, self.user_model, latent_dim, hide_quality=self.config.env.hide_quality
            )
        elif item_features[0].shape[0] != self.tables.n_items:
            raise ValueError(
                f"item_features has {item_features[0].shape[0]} rows, but the dataset has {self.tables.n_items} items"
            )
        return np.asarray(item_features[0], dtype=np.float32), item_features[1]

    # ----------------------------------------------------------------------------------------------- Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        self._slate_stream.rng = self.np_random
        if seed is not None:
            self.restore_users([self._slate_stream])
        time_h = options.get("time_h")
        [info] = self.start_sessions(
            [self._slate_stream],
            [0],
            seeded=[seed is not None],
            user_ids=[options.get("user_id")],
            time_h=None if time_h is None else float(time_h),
        )
        self._last_result = None
        return self._observation(), info

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        session = self._slate_stream.session
        if session is None or not session.open:
            raise RuntimeError("RecAgentCandidateEnv: the session is over; call reset()")
        [step] = self.step_streams([self._slate_stream], [action])
        self._last_result = step.result
        return self._observation(), step.reward, step.result.terminated, step.result.truncated, step.info

    def render(self) -> Any:  # str (ansi) or an RGB array; gymnasium's own annotation differs across its versions
        info = {} if self._last_result is None else self._last_result.info()
        if self.render_mode == "ansi":
            return render_ansi(self.dataset, info, self.current_user)
        if self.render_mode == "rgb_array":
            return render_rgb(self.tables, info, self.page_size)
        return None

    def close(self) -> None:
        self.end_open([self._slate_stream])

    # -------------------------------------------------------------------------------- N streams (this env and the
    # vector env)
    def restore_users(self, slates: Sequence[SlateStream]) -> None:
        """A seeded reset: what the users were shown is forgotten; with ``user_model_reset_on_seed`` the streams'
        open sessions end and the user model returns to its initial state."""
        self.shown_before = {}
        if self._initial_user_state is not None:
            self.end_open(slates)
            self.user_model.set_state(self._initial_user_state)

    def start_sessions(
        self,
        slates: Sequence[SlateStream],
        indices: Sequence[int],
        *,
        seeded: Sequence[bool],
        user_ids: Sequence[int | None],
        time_h: float | None = None,
    ) -> list[dict[str, Any]]:
        """Start the next session of ``slates[i]`` for each ``i`` in ``indices`` in one kernel restart (one social
        round); returns their reset ``info``. ``seeded``: the stream's world restarts from its generator (a seeded
        reset); ``user_ids``: the users (None: drawn from the pool, never one busy in another stream)."""
        busy = {u for j, s in enumerate(slates) if j not in indices and (u := s.stream.busy_user) is not None}
        chosen, redraws = [], []
        for k, i in enumerate(indices):
            slate = slates[i]
            user, redrawn = self._pick_user(slate.rng, user_ids[k], busy)
            busy.add(user)
            chosen.append(user)
            redraws.append(redrawn)
            if seeded[k] or slate.stream.weights is None:
                # The kernel stream's generator seeded from v1's, as a seeded v0 env. The activation weights are
                # drawn although v1 picks its users: the stream's later draws stay what they always were.
                seed = int(slate.rng.integers(0, SEED_RANGE)) if seeded[k] else None
                slate.stream.rng = np.random.default_rng(seed)
                slate.stream.start_world(world_weights(self.config, self.dataset, slate.stream.rng))
        streams = [s.stream for s in slates]
        started = self.kernel.restart(streams, indices, self.user_model, user_ids=chosen, time_h=time_h)
        infos = []
        for begun, redrawn in zip(started, redraws, strict=True):
            slate = slates[begun.stream]
            slate.shown, slate.skipped = {}, []
            self._retrieve(slate)
            info = {**begun.info, "candidates": slate.candidates.copy(), "latent_source": self.latent_source}
            if redrawn:
                info["activation_redraws"] = redrawn
            infos.append(info)
        return infos

    def _pick_user(self, rng: np.random.Generator, wanted: int | None, busy: set[int]) -> tuple[int, int]:
        """``wanted``, or a user drawn uniformly from the pool; one busy in another stream is redrawn among the
        free ones. Returns ``(user, redraws)``."""
        if wanted is not None:
            return int(wanted), 0
        user = int(rng.choice(self.users))
        if user not in busy:
            return user, 0
        free = self.users[~np.isin(self.users, np.fromiter(busy, np.int64, len(busy)))]
        if len(free) == 0:
            raise ValueError(f"all {len(self.users)} users of the pool are in a session: use fewer sub-envs")
        return int(rng.choice(free)), 1

    def step_streams(self, slates: Sequence[SlateStream], actions: Sequence[Any]) -> list[SlateStep]:
        """One page for each stream's open session, in ONE kernel step (one ``respond_batch`` of the user model),
        then the next candidates of each."""
        picks = [self._slate(s.candidates, action) for s, action in zip(slates, actions, strict=True)]
        pages = [s.candidates[indices] for s, (indices, _) in zip(slates, picks, strict=True)]
        results = self.kernel.step_sessions([s.session for s in slates], pages, self.user_model)  # type: ignore[misc]
        steps = []
        for slate, (indices, repairs), result in zip(slates, picks, results, strict=True):
            info = result.info()
            shown, watched, rating = info["page"], info["item"], info["rating"]
            for item in shown:
                slate.shown[item] = slate.shown.get(item, 0) + 1
            slate.skipped.extend(i for i in shown if i != watched)
            if result.done and not forgets_sessions(self.user_model):  # as the held-out users' first sessions
                self.shown_before.setdefault(result.user, set()).update(slate.shown)
            # Gymnasium's vector envs batch info values by the first sub-env's type: no None beside an int or float.
            info = {
                **info,
                "item": -1 if watched is None else int(watched),
                "rating": -1.0 if rating is None else float(rating),
                "slate": indices,
                "slate_repairs": repairs,
                "candidates": slate.candidates.copy(),
            }
            steps.append(SlateStep(result, float(self.reward_fn(result.outcome)), info))
            self._retrieve(slate)
        return steps

    def end_open(self, slates: Sequence[SlateStream]) -> None:
        """End the streams' open sessions (the user model writes them)."""
        sessions = [s.session for s in slates if s.session is not None and s.session.open]
        if sessions:
            self.kernel.end(sessions, models=[self.user_model] * len(sessions))

    def observe(self, slate: SlateStream) -> dict[str, np.ndarray]:
        """The observation of ``slate``'s session (fresh arrays)."""
        session = slate.session
        assert session is not None
        return self.encoder.encode(
            session,
            slate.candidates,
            shown=slate.shown,
            shown_before=self.shown_before.get(session.user, ()),
            skipped=slate.skipped,
        )

    def _retrieve(self, slate: SlateStream) -> None:
        session = slate.session
        assert session is not None
        slate.candidates = self.retriever.retrieve(session.user, session.seen, slate.rng)

    # ---------------------------------------------------------------------------------------------------- pieces
    @property
    def current_user(self) -> int | None:
        """The user of the current session, open or just ended (None before the first reset)."""
        return self._slate_stream.stream.user

    @property
    def seen_mask(self) -> np.ndarray:
        """Items the current user already watched (dataset history and this session); read-only."""
        session = self._slate_stream.session
        if session is None:
            raise RuntimeError("RecAgentCandidateEnv: call reset() first")
        view = session.seen.view()
        view.flags.writeable = False
        return view

    @property
    def candidate_ids(self) -> np.ndarray:
        """Catalogue ids of the current candidates (read-only view), for oracles and baselines that need ids."""
        view = self._slate_stream.candidates.view()
        view.flags.writeable = False
        return view

    @property
    def session(self) -> RecommenderSession | None:
        """The current kernel session (open or just ended), for an oracle that simulates the rest of it on a copy
        (:meth:`RecommenderSession.fork`); never step it."""
        return self._slate_stream.session

    @property
    def shown_this_session(self) -> dict[int, int]:
        """Items shown this session (after the duplicate rule) with how often; a copy."""
        return dict(self._slate_stream.shown)

    def slate(self, action: Any) -> tuple[np.ndarray, int]:
        """Candidate indices of the page for ``action`` (distinct and valid), and how many slots were repaired."""
        return self._slate(self._slate_stream.candidates, action)

    def _slate(self, candidates: np.ndarray, action: Any) -> tuple[np.ndarray, int]:
        n = len(candidates)
        size = min(self.page_size, n)
        if self.action_mode == "scores":
            scores = np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[: self.n_candidates], -1.0, 1.0)
            scores = scores[:n]
            return np.argsort(-scores, kind="stable")[:size].astype(np.int64), 0
        wanted = [int(i) for i in np.asarray(action).reshape(-1)[: self.page_size]]
        used: set[int] = set()
        out, repairs = [], 0
        spare = iter(range(n))
        for index in wanted[:size]:
            if not 0 <= index < n or index in used:
                repairs += 1
                index = next(j for j in spare if j not in used)
            used.add(index)
            out.append(index)
        return np.asarray(out, dtype=np.int64), repairs

    def _observation(self) -> dict[str, np.ndarray]:
        return self.observe(self._slate_stream)
