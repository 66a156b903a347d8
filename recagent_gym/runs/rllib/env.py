"""The env as RLlib's env runners build it: registered under :data:`ENV_NAME` with Ray's env registry.

Each env runner (a Ray actor, possibly on another node) calls :func:`make_env` with the ``env_config`` the driver
sent: the run's configuration as plain data (secrets redacted; an API key comes from the worker's environment, as
``llm.api_key_env`` says) and which users it plays (``train``: the training users of the fixed split, the users
SB3 trains on too). The env is the package's catalogue env (``recagent_gym/RecAgentCatalogue-v0``, built by the same
factory as ``gymnasium.make``) behind the action wrapper of ``train.action``, exactly what the SB3 path steps; its
``Dict`` observation is left as it is for RLlib's ``FlattenObservations`` connector
(:func:`observation_keys_to_remove`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from recagent_gym.envs.adapters import TRAINING_KEYS
from recagent_gym.envs.wrappers import PageActionWrapper, page_adapter
from recagent_gym.errors import RecAgentError

ENV_NAME = "recagent_gym/RecAgentCatalogue-v0"
"""The name RLlib's config refers to (Ray's registry; the same id as Gymnasium's)."""


class RayMissing(RecAgentError):
    """Ray (the ``[ray]`` extra) is not installed."""

    label = "missing extra"


def require_ray() -> Any:
    """The ``ray`` module, or one clear error naming the extra to install."""
    try:
        import ray
        from ray.rllib.algorithms.ppo import PPOConfig  # noqa: F401  (RLlib itself, not only Ray core)
    except ImportError as exc:
        raise RayMissing(
            f"--engine rllib needs Ray RLlib: pip install 'recagent-gym[ray]' ({type(exc).__name__}: {exc})"
        ) from None
    return ray


def env_config(config: Any, users: str = "train") -> dict[str, Any]:
    """What the driver sends each env runner: the configuration as plain data without its API keys (Ray keeps
    ``env_config`` in checkpoints; a worker reads its keys from ``llm.api_key_env`` in its own environment)."""
    keyless = config.model_copy(deep=True)
    keyless.llm = keyless.llm.model_copy(update={"api_keys": []})
    if keyless.evaluation.judge_llm is not None:
        keyless.evaluation.judge_llm = keyless.evaluation.judge_llm.model_copy(update={"api_keys": []})
    return {"config": keyless.model_dump(mode="python"), "users": users}


@dataclass(frozen=True)
class StepInfo:
    """One env's ``info`` kept whole (not a dict, so Gymnasium does not split it by key; picklable for Ray)."""

    info: dict[str, Any]


class WholeInfo(gym.Wrapper):
    """The step's ``info`` under one key, as a :class:`StepInfo`: Gymnasium's ``SyncVectorEnv`` (RLlib's env runners
    use it) stacks each info key into one array per key, typed after the first env's value, which fails when a key
    is an int in one env and None in another (``item`` of a page where nothing was watched). Kept whole, the info
    reaches RLlib's episodes unchanged."""

    KEY = "recagent"

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        return observation, {self.KEY: StepInfo(info)}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated, truncated, {self.KEY: StepInfo(info)}


def build_env(config: Any, dataset: Any) -> gym.Env:
    """The catalogue env over ``dataset`` with ``train.action``'s wrapper: what PPO steps (``Dict`` observation)."""
    from recagent_gym.runs.make_env import catalogue_env

    env = catalogue_env(dataset, config.user.model, config=config)
    adapter = page_adapter(config.train.action, env)
    return WholeInfo(env if adapter is None else PageActionWrapper(env, adapter))


def make_env(context: Mapping[str, Any]) -> gym.Env:
    """Ray's env creator: the env of ``context`` (see :func:`env_config`)."""
    from recagent_gym.envs.resolve import resolve_dataset
    from recagent_gym.runs.config import config_from_dict
    from recagent_gym.runs.policies.protocol import split_users, training_dataset

    config = config_from_dict(dict(context["config"]), source="rllib env_config")
    dataset = resolve_dataset(None, config)
    if context.get("users", "train") == "train":
        split = split_users(dataset.n_users, test_fraction=config.train.test_fraction, seed=config.train.split_seed)
        dataset = training_dataset(dataset, split.train)
    return build_env(config, dataset)


def register() -> None:
    """Register :func:`make_env` under :data:`ENV_NAME` with Ray's registry (idempotent)."""
    require_ray()
    from ray.tune.registry import register_env

    register_env(ENV_NAME, make_env)


def observation_keys_to_remove(space: gym.spaces.Dict) -> list[str]:
    """The observation's keys the policy does not read (raw ids): all but ``TRAINING_KEYS``, as in the SB3 path."""
    return [key for key in space.spaces if key not in TRAINING_KEYS]
