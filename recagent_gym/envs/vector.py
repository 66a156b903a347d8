"""Many users' sessions stepped together; the user model answers all pages in one ``respond_batch`` call.

:class:`RecAgentVectorEnv` is a Gymnasium ``VectorEnv`` (same-step autoreset: a finished session's last observation
and info are in ``info['final_obs']`` / ``info['final_info']`` and the returned observation is the next session's
first). Its sub-envs are :class:`RecAgentEnv` cores sharing one dataset, one search index and one user model, so an
LLM user model sends the whole batch to its backend at once. Two sub-envs never run the same user at the same time
(the activation redraws a busy user; ``info['env_infos'][i]['activation_redraws']`` counts it). The sub-envs that
start a new session at the same step share ONE social round (one batched take-action, chat and post call for the
world, not one round per sub-env).
:class:`SB3VecEnv` adapts it to stable-baselines3's ``VecEnv``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

from recagent_gym.config import Config
from recagent_gym.data.schema import Dataset
from recagent_gym.envs.adapters import TRAINING_KEYS, ObsFlattener, PageAdapter
from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.envs.resolve import resolve_config, resolve_dataset
from recagent_gym.envs.reward import RewardFn
from recagent_gym.envs.tables import EnvTables
from recagent_gym.envs.wrappers import page_adapter
from recagent_gym.recommenders.search import CatalogueSearch
from recagent_gym.users.protocol import UserModel


class RecAgentVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` concurrent sessions over one user population.

    ``action``: ``"page"`` (raw ``MultiDiscrete`` pages), ``"score"`` or ``"genre"`` (see
    :mod:`recagent_gym.envs.adapters`), or a :class:`PageAdapter`. ``flatten``: False keeps ``Dict`` observations,
    True flattens :data:`TRAINING_KEYS`, a sequence flattens those keys. Other arguments as :class:`RecAgentEnv`.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(
        self,
        num_envs: int,
        dataset: Dataset | str | None = None,
        user_model: str | UserModel | None = None,
        page_size: int | None = None,
        max_pages: int | None = None,
        social: bool | None = None,
        config: Config | str | Path | Mapping[str, Any] | None = None,
        *,
        action: str | PageAdapter = "page",
        flatten: bool | Sequence[str] = False,
        reward_fn: RewardFn | None = None,
        llm: Any = None,
        embedder: Any = None,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.config = resolve_config(config)
        self.dataset = resolve_dataset(dataset, self.config)
        tables = EnvTables.build(self.dataset)
        search = CatalogueSearch(self.dataset)
        first = RecAgentEnv(
            self.dataset,
            user_model,
            page_size,
            max_pages,
            social,
            self.config,
            reward_fn=reward_fn,
            llm=llm,
            embedder=embedder,
            tables=tables,
            search=search,
            restore_users_on_seed=False,
        )
        self.user_model = first.user_model
        self.envs: list[RecAgentEnv] = [first] + [
            RecAgentEnv(
                self.dataset,
                self.user_model,
                page_size,
                max_pages,
                social,
                self.config,
                reward_fn=reward_fn,
                tables=tables,
                search=search,
                restore_users_on_seed=False,
            )
            for _ in range(num_envs - 1)
        ]
        restore = self.config.env.user_model_reset_on_seed
        self._initial_user_state = self.user_model.get_state() if restore else None
        self.adapter = page_adapter(action, first) if isinstance(action, str) else action
        self.flattener: ObsFlattener | None = None
        if flatten:
            keys = TRAINING_KEYS if flatten is True else tuple(flatten)
            self.flattener = ObsFlattener(first.observation_space, keys)
        self.num_envs = num_envs
        self.single_action_space = first.action_space if self.adapter is None else self.adapter.space
        self.single_observation_space = first.observation_space if self.flattener is None else self.flattener.space
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._started = False

    # ----------------------------------------------------------------------------------------------- Gymnasium API
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Seed every sub-env (``seed + i`` from an int) and start a session in each.

        ``options={"user_ids": [...]}`` picks the users (one per sub-env).
        """
        seeds = self._seeds(seed)
        if seed is not None and self._initial_user_state is not None:
            for env in self.envs:
                env.close()
            self.user_model.set_state(self._initial_user_state)
        user_ids = (options or {}).get("user_ids") or [None] * self.num_envs
        if len(user_ids) != self.num_envs:
            raise ValueError(f"options['user_ids'] needs {self.num_envs} entries, got {len(user_ids)}")
        observations, infos = [], []
        for i, env in enumerate(self.envs):
            gym.Env.reset(env, seed=seeds[i])
            if seeds[i] is not None or not self._started:
                env.start_world(restore_users=False)
            busy = frozenset(e.current_user for j, e in enumerate(self.envs[:i]) if e.current_user is not None)
            obs, info = env.begin_session(None if user_ids[i] is None else int(user_ids[i]), busy)
            observations.append(obs)
            infos.append(info)
        self._started = True
        return self._batch_obs(observations), {"env_infos": infos}

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if not self._started:
            raise RuntimeError("RecAgentVectorEnv: call reset() before step()")
        envs = self.envs
        pages = [self._page(env, actions[i]) for i, env in enumerate(envs)]
        requests = [env.begin_step(page) for env, page in zip(envs, pages, strict=True)]
        responses = self.user_model.respond_batch(requests, [env.session_rng for env in envs])
        search_requests = {i: r for i, env in enumerate(envs) if (r := env.search_request(responses[i])) is not None}
        search_responses: dict[int, Any] = {}
        if search_requests:
            order = sorted(search_requests)
            answers = self.user_model.respond_batch(
                [search_requests[i] for i in order], [envs[i].session_rng for i in order]
            )
            search_responses = dict(zip(order, answers, strict=True))
        observations, env_infos = [], []
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=bool)
        truncations = np.zeros(self.num_envs, dtype=bool)
        final_obs = np.full(self.num_envs, None, dtype=object)
        final_info = np.full(self.num_envs, None, dtype=object)
        finished: list[int] = []
        for i, env in enumerate(envs):
            obs, rewards[i], terminations[i], truncations[i], info = env.end_step(responses[i], search_responses.get(i))
            if terminations[i] or truncations[i]:
                final_obs[i], final_info[i] = self._one_obs(obs), info
                finished.append(i)
            observations.append(obs)
            env_infos.append(info)
        for i, (obs, reset_info) in self._restart(finished).items():
            observations[i] = obs
            env_infos[i] = {**env_infos[i], "reset": reset_info}
        done = terminations | truncations
        infos = {
            "env_infos": env_infos,
            "final_obs": final_obs,
            "_final_obs": done,
            "final_info": final_info,
            "_final_info": done,
        }
        return self._batch_obs(observations), rewards, terminations, truncations, infos

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()

    # ---------------------------------------------------------------------------------------------------- helpers
    def _restart(self, finished: list[int]) -> dict[int, tuple[Any, dict[str, Any]]]:
        """Start the next session in each finished sub-env, with ONE social round for all of them.

        Users are drawn in sub-env order (never one already in a session or just drawn); the round runs at the
        latest of their clocks with the first due sub-env's seed, the incoming users sitting it out; its events
        are reported in that sub-env's reset info (``social_events``; the others get ``social_round_env``).
        """
        if not finished:
            return {}
        envs = self.envs
        taken = {e.current_user for j, e in enumerate(envs) if j not in finished and e.current_user is not None}
        upcoming = {}
        for i in finished:
            upcoming[i] = envs[i].draw_session(None, frozenset(taken))
            taken.add(upcoming[i].user_id)
        due = [i for i in finished if upcoming[i].social_due]
        events: list[dict[str, Any]] = []
        if due:
            first = due[0]
            clock = max(upcoming[i].time_h for i in due)
            incoming = [u.user_id for u in upcoming.values()]
            events = envs[first].social_round(incoming, upcoming[first].social_seed, clock)
        out = {}
        for i in finished:
            obs, info = envs[i].open_session(upcoming[i], events if due and i == due[0] else ())
            if due and i != due[0]:
                info["social_round_env"] = due[0]
            out[i] = (obs, info)
        return out

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"reset needs {self.num_envs} seeds, got {len(seeds)}")
        return seeds

    def _page(self, env: RecAgentEnv, action: Any) -> np.ndarray:
        return np.asarray(action) if self.adapter is None else self.adapter.to_page(action, env.seen_mask)

    def _one_obs(self, obs: dict[str, np.ndarray]) -> Any:
        return obs if self.flattener is None else self.flattener.flatten(obs)

    def _batch_obs(self, observations: list[dict[str, np.ndarray]]) -> Any:
        if self.flattener is not None:
            return np.stack([self.flattener.flatten(o) for o in observations])
        return {key: np.stack([o[key] for o in observations]) for key in observations[0]}

    def get_state(self) -> dict[str, Any]:
        """Plain-data state of every sub-env and the shared user model."""
        states = [env.get_state() for env in self.envs]
        for state in states:
            state.pop("user_model")
        return {"envs": states, "user_model": self.user_model.get_state(), "started": self._started}

    def set_state(self, state: dict[str, Any]) -> None:
        user_state = state["user_model"]
        for env, env_state in zip(self.envs, state["envs"], strict=True):
            env.set_state({**env_state, "user_model": user_state})
        self._started = bool(state["started"])


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
        return [getattr(self.venv.envs[i], attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for i in self._get_indices(indices):
            setattr(self.venv.envs[i], attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **kwargs: Any) -> list:
        return [getattr(self.venv.envs[i], method_name)(*method_args, **kwargs) for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]
