"""``recagent_gym/RecAgentCandidates-v0`` (formerly ``RecAgent-v1``): candidate retrieval, item-feature observation,
candidate-index actions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import recagent_gym  # noqa: F401  (registers the envs)
from recagent_gym.envs import CANDIDATES_ENV_ID
from recagent_gym.envs.candidates import DEFAULT_MIX, CandidateRetriever
from recagent_gym.runs.make_env import candidates_env
from recagent_gym.session.tables import SessionTables

from ._agent_fixtures import make_model, tiny_dataset
from ._env_fixtures import make_dataset


@pytest.fixture(scope="module")
def dataset():
    return make_dataset()


def _env(dataset, user_model="recsim", **kwargs):
    kwargs.setdefault("n_candidates", 20)
    return candidates_env(dataset, user_model, social=False, **kwargs)


@pytest.mark.parametrize("user_model", ["recsim", "embedding"])
@pytest.mark.parametrize("action_mode", ["scores", "slate"])
@pytest.mark.slow
def test_check_env_and_observations_stay_in_space(dataset, user_model, action_mode):
    env = _env(dataset, user_model, action_mode=action_mode)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=1)
    for _ in range(1500):
        obs, _, terminated, truncated, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        assert len(set(info["page"])) == env.page_size  # never a repeat on a page
        if terminated or truncated:
            obs, _ = env.reset()
            assert env.observation_space.contains(obs)


def test_llm_users_in_v1():
    dataset = tiny_dataset()
    env = candidates_env(dataset, make_model(), social=False, n_candidates=6, page_size=3, max_pages=3)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        if terminated or truncated:
            env.reset()


def test_candidates_never_hold_watched_items_and_follow_the_mix(dataset):
    env = _env(dataset, n_candidates=20)
    env.reset(seed=0)
    for _ in range(30):
        watched = np.flatnonzero(env.seen_mask)
        assert not set(env.candidate_ids.tolist()) & set(watched.tolist())
        assert len(set(env.candidate_ids.tolist())) == len(env.candidate_ids) == 20
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    retriever = CandidateRetriever(dataset, SessionTables.build(dataset), k=50)
    assert sum(retriever.quota.values()) == 50 and set(retriever.quota) == set(DEFAULT_MIX)
    with pytest.raises(ValueError, match="unknown candidate sources"):
        CandidateRetriever(dataset, SessionTables.build(dataset), mix={"trending": 1.0})


def test_slate_repairs_repeats_and_scores_pick_the_top(dataset):
    env = _env(dataset, action_mode="slate")
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.zeros(env.page_size, dtype=np.int64))
    assert info["slate_repairs"] == env.page_size - 1 and len(set(info["slate"].tolist())) == env.page_size
    scored = _env(dataset)
    scored.reset(seed=0)
    scores = np.linspace(-1, 1, scored.n_candidates, dtype=np.float32)
    ids = scored.candidate_ids.copy()
    _, _, _, _, info = scored.step(scores)
    assert list(info["page"]) == ids[::-1][: scored.page_size].tolist()


def test_shown_flag_marks_items_shown_this_session(dataset):
    env = _env(dataset, n_candidates=20)
    env.reset(seed=3)
    _, _, terminated, truncated, info = env.step(np.linspace(1, -1, 20, dtype=np.float32))
    if not (terminated or truncated):
        obs = env._observation()
        flags = dict(zip(env.candidate_ids.tolist(), obs["candidates"][:, -2].tolist(), strict=True))
        for item in info["page"]:
            if item in flags and item != info["item"]:
                assert flags[item] == 1.0


def test_reset_draws_from_the_user_pool_and_is_deterministic(dataset):
    env = _env(dataset, users=[2, 5])
    assert {env.reset(seed=s)[1]["user_id"] for s in range(20)} <= {2, 5}
    a, b = _env(dataset), _env(dataset)
    for env in (a, b):
        env.reset(seed=7)
    for _ in range(20):
        action = np.linspace(-1, 1, 20, dtype=np.float32)
        oa, ra, ta, tra, _ = a.step(action)
        ob, rb, tb, trb, _ = b.step(action)
        assert ra == rb and all(np.array_equal(oa[k], ob[k]) for k in oa)
        if ta or tra:
            assert tb or trb
            a.reset()
            b.reset()


def test_registered_make_and_make_vec(dataset):
    env = gym.make(CANDIDATES_ENV_ID, dataset=dataset, user_model="recsim", social=False, n_candidates=10)
    obs, _ = env.reset(seed=0)
    assert obs["candidates"].shape[0] == 10 and env.spec.max_episode_steps == 10
    venv = gym.make_vec(
        CANDIDATES_ENV_ID, num_envs=2, dataset=dataset, user_model="recsim", social=False, n_candidates=10
    )
    obs, _ = venv.reset(seed=0)
    assert obs["candidates"].shape == (2, 10, env.unwrapped.item_features.shape[1] + 2)
    venv.step(venv.action_space.sample())
    venv.close()


def test_latent_block_uses_the_user_models_item_vectors(dataset):
    assert _env(dataset, "recsim").latent_source == "recsim_latents"
    assert _env(dataset, "embedding").latent_source == "text_embeddings"


def test_item_features_of_another_env_replace_the_user_models(dataset):
    trained = _env(dataset, "recsim")
    other = _env(dataset, "embedding", item_features=(trained.item_features, trained.latent_source),
                 retriever=trained.retriever)  # fmt: skip
    assert other.latent_source == "recsim_latents"
    assert np.array_equal(other.item_features, trained.item_features)
    obs, _ = other.reset(seed=0)
    assert other.observation_space.contains(obs)
    with pytest.raises(ValueError, match="item_features has 3 rows"):
        _env(dataset, "embedding", item_features=(trained.item_features[:3], "x"))
