"""The run layer builds the env faces from a configuration (``recagent_gym.runs.make_env``, what ``gymnasium.make``
calls); the env classes take settings already resolved and say how to build them when given none."""

from __future__ import annotations

import gymnasium as gym
import pytest

from recagent_gym.envs import CANDIDATES_ENV_ID
from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.runs.config import Config
from recagent_gym.runs.make_env import candidates_env, catalogue_env, catalogue_vector_env

from ._env_fixtures import make_dataset


@pytest.fixture(scope="module")
def dataset():
    return make_dataset()


def test_config_by_keyword_as_a_mapping(dataset) -> None:
    env = catalogue_env(dataset, "recsim", config={"env": {"page_size": 4, "max_pages": 3}})
    assert isinstance(env, RecAgentEnv) and isinstance(env.config, Config)
    assert (env.page_size, env.max_pages) == (4, 3)


def test_config_in_the_classes_position(dataset) -> None:
    env = candidates_env(dataset, "recsim", None, None, False, {"env": {"page_size": 3}}, n_candidates=6)
    assert env.page_size == 3 and env.config.env.page_size == 3


def test_vector_env_takes_num_envs_first(dataset) -> None:
    venv = catalogue_vector_env(2, dataset, "recsim", config={"env": {"page_size": 2}})
    assert venv.num_envs == 2 and venv.config.env.page_size == 2
    venv.close()


def test_gymnasium_make_resolves_a_named_configuration(dataset) -> None:
    env = gym.make(CANDIDATES_ENV_ID, dataset=dataset, user_model="recsim", config="rl_recsim", social=False)
    user = env.unwrapped.config.user
    assert (user.recsim_allure, user.recsim_time_budget) == (0.5, 30.0)  # rl_recsim.yaml's, not the defaults
    assert (Config().user.recsim_allure, Config().user.recsim_time_budget) != (0.5, 30.0)
    env.close()


def test_an_env_class_without_settings_says_how_to_build_it(dataset) -> None:
    with pytest.raises(TypeError, match="make_env"):
        RecAgentEnv(dataset, "recsim")
    with pytest.raises(TypeError, match="make_env"):
        RecAgentEnv(dataset, "recsim", config="quickstart")
