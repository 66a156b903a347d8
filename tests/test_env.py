"""RecAgentEnv: registration, checkers, determinism, duplicate rule, search, wrappers, state."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import recagent_gym
from recagent_gym.envs import DEFAULT_MAX_EPISODE_STEPS, ENV_ID
from recagent_gym.envs.config import EnvConfig
from recagent_gym.envs.reward import StepOutcome, step_reward
from recagent_gym.envs.wrappers import FlatObservation, GenreActionWrapper, ScoreActionWrapper, wrap_for_training
from recagent_gym.runs.config import Config
from recagent_gym.runs.make_env import catalogue_env
from recagent_gym.users.config import UserConfig
from recagent_gym.users.protocol import Action, Response

from ._env_fixtures import make_dataset


@pytest.fixture(scope="module")
def dataset():
    return make_dataset()


def rollout(env: gym.Env, seed: int, steps: int) -> list[tuple]:
    env.action_space.seed(seed)
    _, info = env.reset(seed=seed)
    trace = [(info["user_id"],)]
    for _ in range(steps):
        _, reward, terminated, truncated, info = env.step(env.action_space.sample())
        trace.append((info["user_id"], info["page"], info["response"], info["item"], reward, terminated, truncated))
        if terminated or truncated:
            _, info = env.reset()
            trace.append((info["user_id"],))
    return trace


def test_registered_with_time_limit():
    assert recagent_gym.envs.ENV_ID in gym.registry
    assert gym.spec(ENV_ID).max_episode_steps == DEFAULT_MAX_EPISODE_STEPS == EnvConfig().max_pages


@pytest.mark.parametrize("user_model", ["recsim", "embedding"])
def test_checkers_pass_on_the_registered_env(dataset, user_model):
    env = gym.make(ENV_ID, dataset=dataset, user_model=user_model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=UserWarning)  # the checkers report problems as warnings
        check_env(env.unwrapped)
    sb3_check_env(env.unwrapped, warn=False)
    sb3_check_env(wrap_for_training(catalogue_env(dataset, user_model)), warn=False)
    sb3_check_env(GenreActionWrapper(catalogue_env(dataset, user_model)), warn=False)


def test_two_runs_with_one_seed_are_identical(dataset):
    first = rollout(gym.make(ENV_ID, dataset=dataset, user_model="recsim"), seed=7, steps=120)
    second = rollout(gym.make(ENV_ID, dataset=dataset, user_model="recsim"), seed=7, steps=120)
    other = rollout(gym.make(ENV_ID, dataset=dataset, user_model="recsim"), seed=8, steps=120)
    assert first == second
    assert first != other
    # Re-seeding the same env restores the users' state, so it replays too.
    env = gym.make(ENV_ID, dataset=dataset, user_model="recsim")
    assert rollout(env, 7, 120) == rollout(env, 7, 120) == first


def test_reset_option_picks_the_user_and_rejects_unknown(dataset):
    env = catalogue_env(dataset, "recsim")
    obs, info = env.reset(seed=0, options={"user_id": 5})
    assert info["user_id"] == 5 and obs["user_id"][0] == 5
    with pytest.raises(ValueError, match="user_id"):
        env.reset(options={"user_id": dataset.n_users})


def test_duplicates_and_watched_items_are_replaced_and_reported(dataset):
    env = catalogue_env(dataset, "recsim", page_size=4)
    env.reset(seed=0, options={"user_id": 0})
    watched = int(env.tables.histories[0][0])
    fresh = int(np.flatnonzero(~env.seen_mask)[0])
    _, _, _, _, info = env.step(np.array([fresh, fresh, watched, fresh]))
    assert info["duplicates_replaced"] == 2 and info["watched_replaced"] == 1
    assert len(set(info["page"])) == 4 and not env.tables.histories[0].tolist().count(info["page"][2])
    env.reset(options={"user_id": 0})
    with pytest.raises(ValueError, match="outside"):
        env.step(np.array([0, 1, 2, dataset.n_items]))


def test_allow_rule_shows_the_page_as_given(dataset):
    config = Config(env=EnvConfig(duplicate_rule="allow"))
    env = catalogue_env(dataset, "recsim", page_size=3, config=config)
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([4, 4, 4]))
    assert info["page"] == (4, 4, 4) and info["duplicates_replaced"] == 2


def test_search_is_served_within_the_step(dataset):
    config = Config(user=UserConfig(recsim_search_prob=1.0, recsim_no_click_mass=1e6, patience=1e6))
    env = catalogue_env(dataset, "recsim", config=config)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(env.action_space.sample())
    assert info["action"] == "search" and info["query"] in dataset.genres
    assert info["search_page"] and all(info["query"] in dataset.items["genres"][i] for i in info["search_page"])
    assert info["response"] in ("search_next", "search_watch") and info["from_search"] == (info["item"] is not None)
    assert reward == 0.0  # default: a watch found by the user's own search is not the policy's credit


def test_reward_is_configurable_and_pure():
    watch = Response(Action.WATCH, item=1, rating=5.0)
    assert step_reward(StepOutcome(watch)) == pytest.approx(1.5)
    assert step_reward(StepOutcome(watch), watch=2.0, rating_bonus=0.0) == 2.0
    search = Response(Action.SEARCH, query="x")
    assert step_reward(StepOutcome(search, watch), search_watch=0.3) == 0.3
    assert step_reward(StepOutcome(Response(Action.LEAVE)), leave=-1.0) == -1.0


def test_session_ends_at_max_pages(dataset):
    config = Config(user=UserConfig(patience=1e9, recsim_time_budget=1e9))
    env = catalogue_env(dataset, "recsim", max_pages=3, config=config)
    env.reset(seed=0)
    flags = [env.step(env.action_space.sample())[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(env.action_space.sample())


def test_wrappers_map_actions_to_unseen_pages(dataset):
    env = ScoreActionWrapper(catalogue_env(dataset, "recsim"))
    env.reset(seed=0)
    core = env.unwrapped
    seen_before = core.seen_mask.copy()
    _, _, _, _, info = env.step(env.action_space.sample())
    assert not seen_before[list(info["page"])].any() and info["watched_replaced"] == 0
    flat = FlatObservation(catalogue_env(dataset, "recsim"), keys=None)
    obs, _ = flat.reset(seed=0)
    assert flat.observation_space.contains(obs)


def test_state_round_trip_replays_the_future(dataset):
    env = catalogue_env(dataset, "recsim")
    env.reset(seed=3)
    for _ in range(4):
        if any(env.step(env.action_space.sample())[2:4]):
            env.reset()
    state = env.get_state()
    actions = [env.action_space.sample() for _ in range(20)]

    def play() -> list:
        out = []
        for action in actions:
            _, reward, terminated, truncated, info = env.step(action)
            out.append((reward, info["response"], info["page"]))
            if terminated or truncated:
                env.reset()
        return out

    first = play()
    env.set_state(state)
    assert play() == first


def test_render_ansi(dataset):
    env = catalogue_env(dataset, "recsim", render_mode="ansi")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    assert "page 0" in env.render()
