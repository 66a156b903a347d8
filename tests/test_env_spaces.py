"""The env keeps its promises to Gymnasium's tooling: observations inside the declared space for every user model,
``gymnasium.make_vec`` reaching the batched vector env, and SB3's ``make_vec_env`` building it without a warning."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

from recagent_gym.data.load import load_dataset
from recagent_gym.envs import ENV_ID
from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.envs.vector import RecAgentVectorEnv
from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.runs.make_env import catalogue_env

from ._agent_fixtures import make_model, tiny_dataset


def steps_outside_the_space(env: RecAgentEnv, steps: int, seed: int = 0) -> int:
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    outside = int(not env.observation_space.contains(obs))
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        outside += int(not env.observation_space.contains(obs))
        if terminated or truncated:
            obs, _ = env.reset()
            outside += int(not env.observation_space.contains(obs))
    return outside


@pytest.fixture(scope="module")
def bundled():
    return load_dataset("bundled")


@pytest.mark.parametrize("user_model", ["recsim", "embedding"])
@pytest.mark.slow
def test_observations_stay_in_the_space_with_classical_users(bundled, user_model):
    embedder = HashingEmbedder(32) if user_model == "embedding" else None
    env = catalogue_env(bundled, user_model, embedder=embedder)
    assert steps_outside_the_space(env, 3000) == 0


def test_observations_stay_in_the_space_with_llm_users():
    model = make_model(overrides={"social": {"max_active_agents": 2}})
    env = catalogue_env(tiny_dataset(), model, page_size=3, max_pages=20)
    assert steps_outside_the_space(env, 2000) == 0


def test_make_vec_reaches_the_batched_vector_env():
    venv = gym.make_vec(ENV_ID, num_envs=3, dataset=tiny_dataset(), user_model="recsim")
    assert isinstance(venv, RecAgentVectorEnv) and venv.num_envs == 3
    assert venv.kernel.rules.max_pages == gym.spec(ENV_ID).max_episode_steps
    obs, infos = venv.reset(seed=0)
    assert obs["user_id"].shape == (3, 1) and len(infos["env_infos"]) == 3
    venv.step(venv.action_space.sample())


def test_sb3_make_vec_env_builds_the_env_without_render_mode_warnings():
    from stable_baselines3.common.env_util import make_vec_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ENV_ID is not a version of the candidate env's id: no "out of date" note
        venv = make_vec_env(ENV_ID, n_envs=2, env_kwargs={"dataset": tiny_dataset(), "user_model": "recsim"})
        venv.reset()
        frame = venv.env_method("render", indices=[0])[0]
    assert frame.dtype == np.uint8 and frame.ndim == 3
