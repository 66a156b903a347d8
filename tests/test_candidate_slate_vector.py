"""RecAgent-v1's batched vector env: ``make_vec`` builds it, it equals sequential envs at the same seeds, and its
sub-envs' users answer in one ``respond_batch`` per step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import recagent_gym  # noqa: F401  (registers the envs)
from recagent_gym.envs import CANDIDATES_ENV_ID
from recagent_gym.envs.candidate_slate_vector import RecAgentCandidateVectorEnv
from recagent_gym.envs.config import EnvConfig
from recagent_gym.runs.config import Config
from recagent_gym.runs.make_env import candidates_env, candidates_vector_env
from recagent_gym.users.config import UserConfig
from recagent_gym.users.recsim import RecSimUser

from ._agent_fixtures import make_model, tiny_dataset
from ._env_fixtures import make_dataset

# No interest drift: the users carry no state across sessions, so sub-envs sharing one population behave exactly
# like separate envs (unless a user comes back in another sub-env: checked below).
STATELESS = Config(user=UserConfig(recsim_interest_drift=0.0), env=EnvConfig(activation="uniform"))
K = 12


@pytest.fixture(scope="module")
def dataset():
    return make_dataset(n_users=400, n_items=120)


@pytest.mark.slow
def test_make_vec_builds_the_batched_vector_env(dataset):
    venv = gym.make_vec(
        CANDIDATES_ENV_ID,
        num_envs=4,
        vectorization_mode="vector_entry_point",
        dataset=dataset,
        user_model="recsim",
        social=False,
        n_candidates=K,
    )
    assert isinstance(venv, RecAgentCandidateVectorEnv)
    assert venv.face.max_pages <= 10  # the registration's TimeLimit, as a page limit
    obs, infos = venv.reset(seed=0)
    assert venv.observation_space.contains(obs) and obs["candidates"].shape[:2] == (4, K)
    assert len({info["user_id"] for info in infos["env_infos"]}) == 4  # never one user in two sub-envs
    for _ in range(10):
        obs, rewards, terminated, truncated, infos = venv.step(venv.action_space.sample())
        assert venv.observation_space.contains(obs) and rewards.shape == (4,)
        for i in np.flatnonzero(terminated | truncated):
            assert venv.single_observation_space.contains(infos["final_obs"][i])
            assert infos["env_infos"][i]["reset"]["candidates"].shape == (K,)
    venv.close()


def _trace(obs, reward, terminated, truncated, info):
    """One step's record; without the candidates' "shown in an earlier session" flag, which is the population's in
    the vector env (a user back in another sub-env sees what it was shown there flagged: tested below)."""
    arrays = {**obs, "candidates": obs["candidates"][..., :-1]}
    head = (info["user_id"], info["page"], info["response"], info["item"], reward, terminated, truncated)
    return (*head, *(arrays[k].tobytes() for k in sorted(arrays)))


def single_traces(dataset, seeds, actions, **shared):
    traces = []
    for i, seed in enumerate(seeds):
        env = candidates_env(dataset, "recsim", config=STATELESS, social=False, n_candidates=K, **shared)
        env.reset(seed=seed)
        trace = []
        for step_actions in actions:
            obs, reward, terminated, truncated, info = env.step(step_actions[i])
            if terminated or truncated:
                final = _trace(obs, reward, terminated, truncated, info)
                obs, _ = env.reset()
                trace.append((final, _trace(obs, 0.0, False, False, info)))
            else:
                trace.append(_trace(obs, reward, terminated, truncated, info))
        traces.append(trace)
    return traces


def test_vector_equals_four_sequential_envs(dataset):
    num_envs = 4
    actions = np.random.default_rng(0).uniform(-1, 1, size=(25, num_envs, K)).astype(np.float32)
    venv = candidates_vector_env(num_envs, dataset, "recsim", config=STATELESS, social=False, n_candidates=K)
    venv.reset(seed=11)
    traces: list[list] = [[] for _ in range(num_envs)]
    for step_actions in actions:
        obs, rewards, terminated, truncated, infos = venv.step(step_actions)
        for i, info in enumerate(infos["env_infos"]):
            row = {k: v[i] for k, v in obs.items()}
            if terminated[i] or truncated[i]:
                final = _trace(infos["final_obs"][i], rewards[i], terminated[i], truncated[i], info)
                traces[i].append((final, _trace(row, 0.0, False, False, info)))
                assert info["reset"]["activation_redraws"] == 0  # with a redraw the single envs would differ
            else:
                traces[i].append(_trace(row, rewards[i], terminated[i], truncated[i], info))
    assert sum(isinstance(t[0], tuple) for trace in traces for t in trace) >= num_envs  # sessions ended and began
    seeds = [11 + i for i in range(num_envs)]
    assert traces == single_traces(dataset, seeds, actions, retriever=venv.face.retriever)


def test_what_a_user_was_shown_is_the_populations(dataset):
    venv = candidates_vector_env(
        4, dataset, "recsim", max_pages=1, social=False, n_candidates=K, users=[0, 1, 2, 3, 4]
    )  # every session lasts one page; five users for four sub-envs
    obs, infos = venv.reset(seed=0)
    lane_of = {info["user_id"]: i for i, info in enumerate(infos["env_infos"])}
    shown: dict[int, set[int]] = {}
    moved = 0
    for _ in range(12):
        obs, _, _, _, infos = venv.step(venv.action_space.sample())
        for info in infos["env_infos"]:
            shown.setdefault(info["user_id"], set()).update(info["page"])
        for i, info in enumerate(infos["env_infos"]):
            user = info["reset"]["user_id"]
            moved += lane_of.get(user, i) != i
            lane_of[user] = i
            flags = obs["candidates"][i, :, -1]
            assert flags.tolist() == [float(c in shown.get(user, ())) for c in info["reset"]["candidates"]]
    assert moved > 0


def test_one_respond_batch_per_step_for_all_sub_envs(dataset):
    class CountingUser(RecSimUser):
        batches: list[int] = []  # noqa: RUF012

        def respond_batch(self, requests, rngs):
            self.batches.append(len(requests))
            return super().respond_batch(requests, rngs)

    venv = candidates_vector_env(4, dataset, CountingUser(dataset), social=False, n_candidates=K)
    venv.reset(seed=0)
    for _ in range(6):
        venv.step(venv.action_space.sample())
    assert CountingUser.batches == [4] * 6


def test_llm_users_answer_all_sub_envs_in_one_batch():
    """The LLM agents: one ``respond_batch`` for the four pages (a second only for search results pages), and the
    LLM sees the four sub-envs' prompts together."""
    model = make_model()
    calls: list[int] = []
    respond_batch = model.respond_batch

    def counted(requests, rngs):
        calls.append(len(requests))
        return respond_batch(requests, rngs)

    model.respond_batch = counted
    venv = candidates_vector_env(4, tiny_dataset(), model, page_size=3, max_pages=3, social=False, n_candidates=6)
    venv.reset(seed=0)
    for _ in range(5):
        before = len(calls)
        _, _, _, _, infos = venv.step(venv.action_space.sample())
        searched = sum(info["action"] == "search" for info in infos["env_infos"])
        assert calls[before] == 4 and calls[before + 1 :] == ([searched] if searched else [])


def test_reset_seeds_reproduce_and_users_are_never_shared():
    dataset = tiny_dataset()  # 6 users for 4 sub-envs: draws land on busy users
    venv = candidates_vector_env(4, dataset, "recsim", page_size=3, max_pages=2, social=False, n_candidates=6)
    runs = []
    for _ in range(2):
        venv.reset(seed=3)
        actions = np.random.default_rng(1).uniform(-1, 1, size=(30, 4, 6))
        run, redraws = [], 0
        for step_actions in actions:
            _, rewards, _, _, infos = venv.step(step_actions)
            run.append((rewards.tolist(), [info["user_id"] for info in infos["env_infos"]]))
            busy = [info.get("reset", info)["user_id"] for info in infos["env_infos"]]
            assert len(set(busy)) == 4
            redraws += sum(info.get("reset", {}).get("activation_redraws", 0) for info in infos["env_infos"])
        runs.append(run)
    assert runs[0] == runs[1] and redraws > 0
    with pytest.raises(ValueError, match="one user per sub-env"):
        candidates_vector_env(7, dataset, "recsim", page_size=3, social=False, n_candidates=6)
