"""RecAgent-v1 (``recagent_gym/RecAgentCandidates-v0``) batched: N sub-envs' sessions stepped together, their users
answering all pages in one ``respond_batch`` call.

:class:`RecAgentCandidateVectorEnv` is what ``gymnasium.make_vec`` builds for the candidate env (its
``vector_entry_point``). It is a Gymnasium ``VectorEnv`` with same-step autoreset, as RecAgent-v0's
:class:`~recagent_gym.envs.vector.RecAgentVectorEnv`: a finished session's last observation and info are in
``info['final_obs']`` / ``info['final_info']`` and the returned observation is the next session's first. Its N
streams of sessions (:class:`~recagent_gym.envs.candidate_slate_env.SlateStream`) share one
:class:`~recagent_gym.envs.candidate_slate_env.RecAgentCandidateEnv` (``face``: dataset, kernel, user model,
retriever, encoder, spaces) and are stepped by its methods, so a sub-env behaves as that env does, with these
differences, all from sharing one user population:

* two sub-envs never run the same user at once: a user drawn while busy in another sub-env is redrawn among the
  pool's free users (``info['env_infos'][i]['reset']['activation_redraws']``);
* the sub-envs that start a session at the same step share ONE social round, and the world runs at most one round
  per clock time (a sub-env reaching a time the world's round already ran at starts without one);
* ended sessions are written ``user.session_end_batch`` per sub-env at a time (N x in all, as N separate envs);
* the user model, and what each user was shown in earlier sessions, are the population's, not a sub-env's.

Sub-env ``i`` reset with seed ``s + i`` otherwise runs as ``RecAgentCandidateEnv`` reset with that seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from recagent_gym.data.schema import Dataset
from recagent_gym.envs.candidate_slate_env import RecAgentCandidateEnv, SlateStream
from recagent_gym.envs.settings import WorldSettings, hold_ended_per_sub_env, vector_page_limit
from recagent_gym.users.protocol import UserModel


class RecAgentCandidateVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` concurrent RecAgent-v1 sessions over one user population (see the module docstring).

    ``max_episode_steps`` (what ``gymnasium.make_vec`` passes from the registration) caps ``max_pages``; the other
    arguments are :class:`RecAgentCandidateEnv`'s. ``reset(seed=s)`` seeds sub-env ``i`` with ``s + i`` (or takes
    one seed per sub-env); ``options={"user_ids": [...]}`` picks the users.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(
        self,
        num_envs: int,
        dataset: Dataset | str | None = None,
        user_model: str | UserModel | None = None,
        page_size: int | None = None,
        max_pages: int | None = None,
        social: bool | None = None,
        config: WorldSettings | None = None,
        *,
        render_mode: str | None = None,
        max_episode_steps: int | None = None,
        **candidate_args: Any,
    ) -> None:
        face = "RecAgentCandidateVectorEnv"
        max_pages = vector_page_limit(face, num_envs, render_mode, max_pages, max_episode_steps, config)
        self.face = RecAgentCandidateEnv(dataset, user_model, page_size, max_pages, social, config, **candidate_args)
        if num_envs > len(self.face.users):
            raise ValueError(f"num_envs={num_envs} but the pool has {len(self.face.users)} users: one user per sub-env")
        hold_ended_per_sub_env(self.face.kernel, num_envs)
        self.config, self.dataset, self.user_model = self.face.config, self.face.dataset, self.face.user_model
        self.slates = [SlateStream(np.random.default_rng()) for _ in range(num_envs)]
        self.num_envs = num_envs
        self.single_observation_space = self.face.observation_space
        self.single_action_space = self.face.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Seed the sub-envs and start a session in each (``options={"user_ids": [...]}``: one user per sub-env)."""
        seeds = self._seeds(seed)
        user_ids = (options or {}).get("user_ids") or [None] * self.num_envs
        if len(user_ids) != self.num_envs:
            raise ValueError(f"options['user_ids'] needs {self.num_envs} entries, got {len(user_ids)}")
        if seed is not None:
            self.face.restore_users(self.slates)
        for slate, slate_seed in zip(self.slates, seeds, strict=True):
            if slate_seed is not None:
                slate.rng = np.random.default_rng(slate_seed)
        infos = self.face.start_sessions(
            self.slates,
            list(range(self.num_envs)),
            seeded=[s is not None for s in seeds],
            user_ids=[None if u is None else int(u) for u in user_ids],
        )
        return self._batch_obs(), {"env_infos": infos}

    def step(self, actions: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if any(s.stream.busy_user is None for s in self.slates):
            raise RuntimeError("RecAgentCandidateVectorEnv: call reset() before step()")
        steps = self.face.step_streams(self.slates, list(actions))
        rewards = np.array([s.reward for s in steps], dtype=np.float64)
        terminations = np.array([s.result.terminated for s in steps], dtype=bool)
        truncations = np.array([s.result.truncated for s in steps], dtype=bool)
        env_infos = [s.info for s in steps]
        done = terminations | truncations
        final_obs = np.full(self.num_envs, None, dtype=object)
        final_info = np.full(self.num_envs, None, dtype=object)
        finished = np.flatnonzero(done).tolist()
        if finished:
            for i in finished:
                final_obs[i], final_info[i] = self.face.observe(self.slates[i]), env_infos[i]
            started = self.face.start_sessions(
                self.slates, finished, seeded=[False] * len(finished), user_ids=[None] * len(finished)
            )
            for i, info in zip(finished, started, strict=True):
                env_infos[i] = {**env_infos[i], "reset": info}
        infos = {
            "env_infos": env_infos,
            "final_obs": final_obs,
            "_final_obs": done,
            "final_info": final_info,
            "_final_info": done,
        }
        return self._batch_obs(), rewards, terminations, truncations, infos

    def close_extras(self, **kwargs: Any) -> None:
        if hasattr(self, "slates"):  # gymnasium's __del__ closes an env whose __init__ failed half-way too
            self.face.end_open(self.slates)

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"reset needs {self.num_envs} seeds, got {len(seeds)}")
        return seeds

    def _batch_obs(self) -> dict[str, np.ndarray]:
        rows = [self.face.observe(s) for s in self.slates]
        return {key: np.stack([row[key] for row in rows]) for key in rows[0]}
