"""Many users' sessions stepped together; the user model answers all pages in one ``respond_batch`` call.

:class:`RecAgentVectorEnv` is a Gymnasium ``VectorEnv`` (same-step autoreset: a finished session's last observation
and info are in ``info['final_obs']`` / ``info['final_info']`` and the returned observation is the next session's
first). It is N lanes of the session kernel (the single env is one) sharing one dataset, one search index and one
user model, so an LLM user model sends the whole batch to its backend at once. Two sub-envs never run the same user
at the same time
(the activation redraws a busy user; ``info['env_infos'][i]['activation_redraws']`` counts it). The sub-envs that
start a new session at the same step share ONE social round (one batched take-action, chat and post call for the
world, not one round per sub-env), and the world runs at most one round per clock time: a sub-env whose clock reaches
a time another sub-env's restart already ran the round at starts its session without one. Ended sessions are written
``user.session_end_batch`` per sub-env at a time (N x in all, as N separate envs hold back).
:class:`SB3VecEnv` adapts it to stable-baselines3's ``VecEnv``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

from recagent_gym.data.schema import Dataset
from recagent_gym.envs.adapters import TRAINING_KEYS, ObsFlattener, PageAdapter
from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.envs.resolve import world_weights
from recagent_gym.envs.reward import RewardFn
from recagent_gym.envs.settings import WorldSettings, hold_ended_per_sub_env, vector_page_limit
from recagent_gym.envs.wrappers import page_adapter
from recagent_gym.session import SessionStream, StartedSession
from recagent_gym.session.observation import ObservationBatch
from recagent_gym.users.protocol import UserModel


class RecAgentVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` concurrent sessions over one user population.

    ``action``: ``"page"`` (raw ``MultiDiscrete`` pages), ``"score"`` or ``"genre"`` (see
    :mod:`recagent_gym.envs.adapters`), or a :class:`PageAdapter`. ``flatten``: False keeps ``Dict`` observations,
    True flattens :data:`TRAINING_KEYS`, a sequence flattens those keys. ``max_episode_steps`` (what
    ``gymnasium.make_vec`` passes from the registration) caps ``max_pages``. Other arguments as :class:`RecAgentEnv`.
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
        action: str | PageAdapter = "page",
        flatten: bool | Sequence[str] = False,
        reward_fn: RewardFn | None = None,
        llm: Any = None,
        embedder: Any = None,
        render_mode: str | None = None,
        max_episode_steps: int | None = None,
    ) -> None:
        max_pages = vector_page_limit("RecAgentVectorEnv", num_envs, render_mode, max_pages, max_episode_steps, config)
        # One env face holds what the lanes share: config, dataset, kernel, user model, reward, spaces.
        self.face = RecAgentEnv(
            dataset, user_model, page_size, max_pages, social, config, reward_fn=reward_fn, llm=llm, embedder=embedder
        )
        self.config, self.dataset, self.user_model = self.face.config, self.face.dataset, self.face.user_model
        self.kernel = self.face.kernel
        hold_ended_per_sub_env(self.kernel, num_envs)
        self.lanes = [SessionStream(np.random.default_rng()) for _ in range(num_envs)]
        rules = self.kernel.rules
        self._observations = ObservationBatch(num_envs, self.kernel.tables, rules.history_length, rules.max_pages)
        self.adapter = page_adapter(action, self.face) if isinstance(action, str) else action
        self.flattener: ObsFlattener | None = None
        if flatten:
            keys = TRAINING_KEYS if flatten is True else tuple(flatten)
            self.flattener = ObsFlattener(self.face.observation_space, keys)
        self.num_envs = num_envs
        self.single_action_space = self.face.action_space if self.adapter is None else self.adapter.space
        self.single_observation_space = self.face.observation_space if self.flattener is None else self.flattener.space
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Seed every lane (``seed + i`` from an int) and start a session in each.

        ``options={"user_ids": [...]}`` picks the users (one per sub-env).
        """
        seeds = self._seeds(seed)
        if seed is not None and self.face._initial_user_state is not None:
            self.close_extras()
            self.user_model.set_state(self.face._initial_user_state)
        user_ids = (options or {}).get("user_ids") or [None] * self.num_envs
        if len(user_ids) != self.num_envs:
            raise ValueError(f"options['user_ids'] needs {self.num_envs} entries, got {len(user_ids)}")
        for lane, lane_seed in zip(self.lanes, seeds, strict=True):
            if lane_seed is not None or lane.weights is None:
                lane.rng = np.random.default_rng(lane_seed)
                lane.start_world(world_weights(self.config, self.dataset, lane.rng))
        started = self.kernel.restart(
            self.lanes,
            list(range(self.num_envs)),
            self.user_model,
            user_ids=[None if u is None else int(u) for u in user_ids],
        )
        return self._batch_obs(), {"env_infos": [s.info for s in started]}

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if any(lane.session is None for lane in self.lanes):
            raise RuntimeError("RecAgentVectorEnv: call reset() before step()")
        sessions = [lane.session for lane in self.lanes]
        if self.adapter is None:
            pages = actions
        else:
            pages = [self.adapter.to_page(actions[i], s.seen) for i, s in enumerate(sessions)]  # type: ignore[union-attr]
        results = self.kernel.step_sessions(sessions, pages, self.user_model)  # type: ignore[arg-type]
        reward_fn = self.face.reward_fn
        rewards = np.array([reward_fn(r.outcome) for r in results], dtype=np.float64)
        terminations = np.array([r.terminated for r in results], dtype=bool)
        truncations = np.array([r.truncated for r in results], dtype=bool)
        env_infos = [r.info() for r in results]
        done = terminations | truncations
        final_obs = np.full(self.num_envs, None, dtype=object)
        final_info = np.full(self.num_envs, None, dtype=object)
        finished = np.flatnonzero(done).tolist()
        if finished:
            self._observations.update(sessions)  # type: ignore[arg-type]
            for i in finished:
                final_obs[i], final_info[i] = self._row(i), env_infos[i]
            started: list[StartedSession] = self.kernel.restart(self.lanes, finished, self.user_model)
            for s in started:
                env_infos[s.stream] = {**env_infos[s.stream], "reset": s.info}
        infos = {
            "env_infos": env_infos,
            "final_obs": final_obs,
            "_final_obs": done,
            "final_info": final_info,
            "_final_info": done,
        }
        return self._batch_obs(), rewards, terminations, truncations, infos

    def close_extras(self, **kwargs: Any) -> None:
        open_sessions = [lane.session for lane in self.lanes if lane.session is not None and lane.session.open]
        if open_sessions:
            self.kernel.end(open_sessions, models=[self.user_model] * len(open_sessions))

    # ---------------------------------------------------------------------------------------------------- helpers
    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"reset needs {self.num_envs} seeds, got {len(seeds)}")
        return seeds

    def _row(self, i: int) -> Any:
        """Sub-env ``i``'s observation as a single env returns it (before its next session starts)."""
        row = self._observations.row(i)
        return row if self.flattener is None else self.flattener.flatten(row)

    def _batch_obs(self) -> Any:
        """The observations of every lane's current session."""
        self._observations.update([lane.session for lane in self.lanes])  # type: ignore[misc]
        arrays = self._observations.arrays
        if self.flattener is not None:
            return self.flattener.flatten_batch(arrays)  # a new array
        return self._observations.batch()

    def get_state(self) -> dict[str, Any]:
        """Plain-data state of every lane and the shared user model."""
        return {"lanes": [lane.get_state() for lane in self.lanes], "user_model": self.user_model.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        for lane, lane_state in zip(self.lanes, state["lanes"], strict=True):
            lane.set_state(lane_state, self.kernel.tables)
        self.user_model.set_state(state["user_model"])


class SB3VecEnv(VecEnv):
    """stable-baselines3 ``VecEnv`` over a :class:`RecAgentVectorEnv` (terminal observations in ``infos``)."""

    def __init__(self, venv: RecAgentVectorEnv) -> None:
        self.venv = venv
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self._actions: Any = None

    def reset(self) -> Any:
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        obs, infos = self.venv.reset(seed=seeds)
        self.reset_infos = list(infos["env_infos"])
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, terminations, truncations, infos = self.venv.step(self._actions)
        dones = terminations | truncations
        out: list[dict[str, Any]] = []
        for i, info in enumerate(infos["env_infos"]):
            info = dict(info)
            info["TimeLimit.truncated"] = bool(truncations[i] and not terminations[i])
            if dones[i]:
                info["terminal_observation"] = infos["final_obs"][i]
            out.append(info)
        return obs, rewards.astype(np.float32), dones, out

    def close(self) -> None:
        self.venv.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The shared env face's attribute (the lanes share config, spaces, dataset and user model)."""
        return [getattr(self.venv.face, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        setattr(self.venv.face, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **kwargs: Any) -> list:
        return [getattr(self.venv.face, method_name)(*method_args, **kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]
