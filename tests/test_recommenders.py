"""Baselines answer SB3's predict on single and batched observations; MF trains, retrains online, round-trips."""

from __future__ import annotations

import numpy as np
import pytest

from recagent_gym.recommenders.config import RecommenderConfig
from recagent_gym.recommenders.factory import BASELINES, build_recommender
from recagent_gym.recommenders.mf import MFRecommender
from recagent_gym.recommenders.search import CatalogueSearch
from recagent_gym.runs.make_env import catalogue_env, catalogue_vector_env

from ._env_fixtures import make_dataset


@pytest.fixture(scope="module")
def dataset():
    return make_dataset()


@pytest.mark.parametrize("name", BASELINES)
def test_every_baseline_runs_single_and_batched(dataset, name):
    recommender = build_recommender(name, dataset, RecommenderConfig(), page_size=5, seed=0)
    env = catalogue_env(dataset, "recsim")
    obs, _ = env.reset(seed=0)
    for _ in range(12):
        page, state = recommender.predict(obs, deterministic=True)
        assert page.shape == (5,) and len(set(page.tolist())) == 5 and state is None
        if name != "random":  # the others never re-recommend what the user just watched
            assert not np.isin(page, obs["history"][obs["history"] >= 0]).any()
        obs, _, terminated, truncated, _ = env.step(page)
        if terminated or truncated:
            obs, _ = env.reset()
    venv = catalogue_vector_env(3, dataset, "recsim")
    batch, _ = venv.reset(seed=0)
    pages, _ = recommender.predict(batch)
    assert pages.shape == (3, 5)
    venv.step(pages)


def test_mf_learns_the_training_preferences(dataset):
    config = RecommenderConfig(mf_epochs=30, mf_dim=8, mf_lr=0.05)
    mf = MFRecommender(dataset, 5, config, seed=0)
    assert mf.losses[-1] < mf.losses[0]
    inter = dataset.interactions
    user = 0
    positives = inter.loc[inter["user_id"] == user, "item_id"].to_numpy()
    negatives = np.setdiff1d(np.arange(dataset.n_items), positives)
    scores = mf.scores(user)
    assert scores[positives].mean() > scores[negatives].mean()


def test_mf_retrains_online_and_round_trips(dataset):
    config = RecommenderConfig(mf_epochs=1, retrain_every=2)
    mf = MFRecommender(dataset, 5, config, seed=0)
    state = mf.get_state()
    mf.observe({"user_id": 1, "item": 3, "rating": 5.0}, done=True)
    assert mf.retrains == 0
    mf.observe({"user_id": 1, "item": None}, done=True)
    assert mf.retrains == 1 and mf.sessions == 2
    obs = {"user_id": np.array([1]), "history": np.full(10, -1)}
    assert 3 not in mf.predict(obs)[0]
    retrained = mf.get_state()
    mf.set_state(state)
    assert mf.sessions == 0 and not mf.get_state()["simulated"]
    mf.set_state(retrained)
    assert mf.get_state()["weights"] == retrained["weights"]


def test_search_ranks_matching_items_first(dataset):
    search = CatalogueSearch(dataset)
    results = search.search("sci-fi robots", k=5)
    assert results and all("Sci-Fi" in dataset.items["genres"][i] for i in results)
    exclude = np.zeros(dataset.n_items, dtype=bool)
    exclude[results[0]] = True
    assert results[0] not in search.search("sci-fi robots", k=5, exclude=exclude)
    assert search.search("zzzz", k=5) == []
