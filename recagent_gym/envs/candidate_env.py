"""``recagent_gym/RecAgentCandidates-v0`` (formerly ``RecAgent-v1``): each step the policy ranks K retrieved
candidates; the user answers the page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from recagent_gym.data.schema import Dataset
from recagent_gym.envs.candidates import CandidateRetriever
from recagent_gym.envs.encoding import RESPONSE_CODES, Encoder, item_feature_table
from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.envs.reward import RewardFn
from recagent_gym.runs.config import Config
from recagent_gym.users.protocol import UserModel

ACTION_MODES: tuple[str, ...] = ("scores", "slate")


class RecAgentCandidateEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """
    ## Description

    The candidate-slate form of RecAgent-v0 (same users, sessions, reward and social world), shaped like RecSim's
    interest-evolution env: each step a retrieval stage (:mod:`recagent_gym.envs.candidates`: a documented mix of
    MF, genre-matched, popular, friends' and random items, never an item the user watched) offers
    ``n_candidates`` items, the observation describes them as item features next to the user's encoding, and the
    policy picks the page among them. A policy that scores items with shared weights therefore learns
    item-level preferences and generalises to unseen users and items.

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
    |                  |                                      | this user in an earlier session                      |
    | `candidate_mask` | Box(0, 1, (K,))                      | 1 for a valid candidate                              |

    ## Rewards

    RecAgent-v0's reward (:mod:`recagent_gym.envs.reward`): by default +1 per watch from the page plus 0.25 per
    rating point above 3. ``info`` is v0's with ``slate``, ``slate_repairs`` and ``candidates`` added; ``item`` and
    ``rating`` are -1 when nothing was watched (values that Gymnasium's vector envs can batch).

    ## Starting State

    ``reset`` picks the session's user uniformly from ``users`` (all users by default; the training users of a
    held-out split in the RL protocol) unless ``options={"user_id": u}``; ``reset(seed=s)`` restores every user's
    state (v0's ``reset(seed)``), so two runs with the same seed are identical.

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
      It composes a v0 env (one session at a time); ``gymnasium.make_vec`` vectorises it with the generic
      synchronous vector env for now (no batched user-model call across sub-envs yet).
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
        self.core = RecAgentEnv(
            dataset,
            user_model,
            page_size,
            max_pages,
            social,
            config,
            reward_fn=reward_fn,
            llm=llm,
            embedder=embedder,
            render_mode=render_mode,
        )
        self.dataset, self.tables, self.config = self.core.dataset, self.core.tables, self.core.config
        self.user_model = self.core.user_model
        self.page_size, self.max_pages = self.core.page_size, self.core.max_pages
        if n_candidates < self.page_size:
            raise ValueError(f"n_candidates ({n_candidates}) must be >= page_size ({self.page_size})")
        self.users = np.arange(self.tables.n_users) if users is None else np.asarray(users, dtype=np.int64)
        if len(self.users) == 0 or self.users.min() < 0 or self.users.max() >= self.tables.n_users:
            raise ValueError(f"users must be a non-empty set of ids in 0..{self.tables.n_users - 1}")
        self.n_candidates, self.action_mode, self.render_mode = n_candidates, action_mode, render_mode
        if retriever is None:
            retriever = CandidateRetriever(self.dataset, self.tables, k=n_candidates, mix=candidate_mix)
        elif retriever.k != n_candidates or retriever.n_users != self.tables.n_users:
            raise ValueError(
                f"retriever: built for K={retriever.k} and {retriever.n_users} users, but the env has "
                f"n_candidates={n_candidates} and {self.tables.n_users} users"
            )
        self.retriever = retriever
        if item_features is None:
            item_features = item_feature_table(
                self.dataset, self.tables, self.user_model, latent_dim, hide_quality=self.config.env.hide_quality
            )
        elif item_features[0].shape[0] != self.tables.n_items:
            raise ValueError(
                f"item_features has {item_features[0].shape[0]} rows, but the dataset has {self.tables.n_items} items"
            )
        self.item_features, self.latent_source = np.asarray(item_features[0], dtype=np.float32), item_features[1]
        self.encoder = Encoder(
            self.item_features, self.tables, n_candidates=n_candidates, history_length=history_length
        )
        self.observation_space = self.encoder.space
        if action_mode == "scores":
            self.action_space: spaces.Space = spaces.Box(-1.0, 1.0, (n_candidates,), np.float32)
        else:
            self.action_space = spaces.MultiDiscrete(np.full(self.page_size, n_candidates, dtype=np.int64))
        self._shown_before: dict[int, set[int]] = {}
        self._candidates = np.zeros(0, dtype=np.int64)
        self._user = 0
        self._new_session_state()

    # ----------------------------------------------------------------------------------------------- Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        user = options.pop("user_id", None)
        user = int(self.np_random.choice(self.users)) if user is None else int(user)
        core_seed = None if seed is None else int(self.np_random.integers(0, 2**31 - 1))
        if seed is not None:
            self._shown_before = {}  # the users' state is restored: so is what they were shown
        _, info = self.core.reset(seed=core_seed, options={**options, "user_id": user})
        self._user = user
        self._new_session_state()
        self._history = [int(i) for i in self.tables.histories[user]]
        self._retrieve()
        return self._observation(), {**info, "candidates": self._candidates.copy(), "latent_source": self.latent_source}

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        slate, repairs = self.slate(action)
        page = self._candidates[slate]
        _, reward, terminated, truncated, info = self.core.step(page)
        shown = [int(i) for i in info["page"]]
        for item in shown:
            self._shown_counts[item] = self._shown_counts.get(item, 0) + 1
        watched = info.get("item")
        if watched is not None:
            self._watched.append(int(watched))
            self._history.append(int(watched))
        self._skipped.extend(i for i in shown if i != watched)
        self._last_code = RESPONSE_CODES.index(info["response"])
        rating = info.get("rating")
        self._last_rating = 0.0 if rating is None else (min(max(float(rating), 1.0), 5.0) - 1.0) / 4.0
        self._page_index += 1
        if terminated or truncated:
            self._shown_before.setdefault(self._user, set()).update(self._shown_counts)
        # Gymnasium's vector envs batch info values by the first sub-env's type: no None beside an int or float.
        info = {
            **info,
            "item": -1 if watched is None else int(watched),
            "rating": -1.0 if rating is None else float(rating),
            "slate": slate,
            "slate_repairs": repairs,
            "candidates": self._candidates.copy(),
        }
        self._retrieve()
        return self._observation(), float(reward), bool(terminated), bool(truncated), info

    def render(self) -> str | None:
        return self.core.render()

    def close(self) -> None:
        self.core.close()

    # ---------------------------------------------------------------------------------------------------- pieces
    @property
    def current_user(self) -> int:
        return self._user

    @property
    def candidate_ids(self) -> np.ndarray:
        """Catalogue ids of the current candidates (read-only view), for oracles and baselines that need ids."""
        view = self._candidates.view()
        view.flags.writeable = False
        return view

    def slate(self, action: Any) -> tuple[np.ndarray, int]:
        """Candidate indices of the page for ``action`` (distinct and valid), and how many slots were repaired."""
        n = len(self._candidates)
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

    def _new_session_state(self) -> None:
        self._history: list[int] = []
        self._shown_counts: dict[int, int] = {}
        self._watched: list[int] = []
        self._skipped: list[int] = []
        self._page_index = 0
        self._last_code = 0
        self._last_rating = 0.0

    def _retrieve(self) -> None:
        self._candidates = self.retriever.retrieve(self._user, np.array(self.core.seen_mask), self.np_random)

    def _observation(self) -> dict[str, np.ndarray]:
        return self.encoder.encode(
            user=self._user,
            history=self._history,
            candidates=self._candidates,
            shown_counts=self._shown_counts,
            shown_before=self._shown_before.get(self._user, set()),
            watched=self._watched,
            skipped=self._skipped,
            page_fraction=self._page_index / self.max_pages,
            last_code=self._last_code,
            last_rating=self._last_rating,
            max_pages=self.max_pages,
            page_size=self.page_size,
        )
