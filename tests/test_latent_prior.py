"""The ``latent`` row (MF read off the observed history) and the item-scoring policy's latent prior that starts a
learner from it; the real side's item features built on the history, not on the held-out futures."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recagent_gym.data.schema import Dataset
from recagent_gym.policies.candidate_baselines import HistoryLatentCandidates, history_latent_scores, latent_block
from recagent_gym.policies.item_scoring import ItemScoringPolicy
from recagent_gym.runs.comparisons.history_features import aligned_history_latents, history_item_features
from recagent_gym.runs.make_env import candidates_env

from ._env_fixtures import make_dataset


@pytest.fixture(scope="module")
def env():
    return candidates_env(make_dataset(), "recsim", social=False, n_candidates=20,
                          config={"user": {"recsim_item_latents": "collaborative"}})  # fmt: skip


def _played(env, pages: int = 3):
    """An observation a few pages into a session (a history and some items shown)."""
    obs, _ = env.reset(seed=0)
    for _ in range(pages):
        obs, *_ = env.step(np.linspace(1.0, -1.0, env.unwrapped.n_candidates, dtype=np.float32))
    return obs


def test_latent_row_ranks_unshown_candidates_by_their_dot_with_the_history_mean(env):
    obs = _played(env)
    block = latent_block(obs)
    history = obs["history"][obs["history"][:, -1] > 0]
    assert len(history) and block.stop - block.start > 0
    expected = obs["candidates"][:, block] @ history[:, block].mean(axis=0)
    assert np.allclose(history_latent_scores(obs), expected, atol=1e-5)
    action, _ = HistoryLatentCandidates().predict(obs)
    live = (obs["candidate_mask"] > 0) & (obs["candidates"][:, -2] == 0)
    order = np.argsort(-action)
    ranked = [k for k in order if live[k]]
    assert ranked[:5] == list(np.argsort(-np.where(live, expected, -np.inf))[:5])
    assert all(not live[k] for k in order[len(ranked) :])  # shown and padded candidates go last


def test_latent_row_reads_the_encoding_a_swapped_history_moves_its_page(env):
    obs = _played(env)
    page = np.argsort(-HistoryLatentCandidates().predict(obs)[0])[:5]
    other = dict(obs)
    other["history"] = obs["history"].copy()
    other["history"][:, latent_block(obs)] *= -1.0  # the opposite taste
    moved = np.argsort(-HistoryLatentCandidates().predict(other)[0])[:5]
    assert set(page) != set(moved)


def _batch(obs):
    return {k: torch.as_tensor(v[None], dtype=torch.float32) for k, v in obs.items()}


def test_policy_with_a_latent_prior_starts_from_the_latent_ranking_and_trains_its_weight(env, tmp_path):
    from stable_baselines3 import PPO

    obs = _played(env)
    model = PPO(ItemScoringPolicy, env, n_steps=32, batch_size=32, seed=0, device="cpu",
                policy_kwargs={"page_size": 5, "prior": 20.0})  # fmt: skip
    scorer = model.policy.features_extractor.scorer
    assert scorer.prior_weight is not None and any(p is scorer.prior_weight for p in model.policy.parameters())
    scores, _ = scorer(_batch(obs))
    live = obs["candidate_mask"] > 0
    expected = np.where(live, history_latent_scores(obs), -np.inf)
    top = set(np.argsort(-expected)[:5])
    assert set(np.argsort(-scores[0].detach().numpy())[:5]) == top  # the prior dominates at weight 20
    plain = PPO(ItemScoringPolicy, env, n_steps=32, batch_size=32, seed=0, device="cpu", policy_kwargs={"page_size": 5})
    assert plain.policy.features_extractor.scorer.prior_weight is None
    before = float(scorer.prior_weight.detach())
    model.learn(64)
    assert float(scorer.prior_weight.detach()) != before
    model.save(tmp_path / "p.zip")
    again = PPO.load(tmp_path / "p.zip", device="cpu")
    assert again.policy.prior == 20.0
    assert float(again.policy.features_extractor.scorer.prior_weight.detach()) == pytest.approx(
        float(scorer.prior_weight.detach())
    )


def test_real_side_features_count_the_history_only(env):
    """An item watched only in the held-out futures is not popular on the real side, whatever the full data say."""
    full = env.unwrapped.dataset
    inter = full.interactions
    counts = inter["item_id"].value_counts()
    hot = int(counts.index[0])
    history = Dataset(name=full.name, users=full.users, items=full.items,
                      interactions=inter[inter["item_id"] != hot].reset_index(drop=True))  # fmt: skip
    table, source = history_item_features(env.unwrapped)(history)
    n_genres = int(env.unwrapped.tables.n_genres)
    popularity = n_genres + 1
    assert source == env.unwrapped.latent_source == "recsim_latents"
    assert env.unwrapped.item_features[hot, popularity] == pytest.approx(1.0)
    assert table[hot, popularity] < 0.5
    assert table.shape == env.unwrapped.item_features.shape


def test_history_latents_are_turned_onto_the_simulators(env):
    """An SVD's basis is arbitrary: re-fitted on (almost) the same data and rotated back, the latents match."""
    model = env.unwrapped.user_model
    full = env.unwrapped.dataset
    latents = np.asarray(model.item_latents)
    inter = full.interactions.iloc[: int(0.97 * len(full.interactions))]
    history = Dataset(name=full.name, users=full.users, items=full.items, interactions=inter.reset_index(drop=True))
    aligned = aligned_history_latents(history, latents, model.config.recsim_seed)
    seen = np.abs(latents).sum(axis=1) > 0
    cosine = (aligned[seen] * latents[seen]).sum(axis=1) / np.maximum(
        np.linalg.norm(aligned[seen], axis=1) * np.linalg.norm(latents[seen], axis=1), 1e-12
    )
    assert np.median(cosine) > 0.8


def test_real_side_keeps_latents_that_carry_no_interactions(env):
    """Item vectors that are not the users' collaborative latents (genres, text embeddings) are kept; the quantiles
    are still the history's."""
    from types import SimpleNamespace

    real = env.unwrapped
    other = SimpleNamespace(user_model=SimpleNamespace(), latent_source="text_embeddings", tables=real.tables,
                            item_features=real.item_features, config=real.config)  # fmt: skip
    full = real.dataset
    inter = full.interactions
    history = Dataset(name=full.name, users=full.users, items=full.items,
                      interactions=inter.iloc[: len(inter) // 2].reset_index(drop=True))  # fmt: skip
    table, source = history_item_features(other)(history)
    block = slice(int(real.tables.n_genres) + 3, None)
    assert source == "text_embeddings"
    assert np.array_equal(table[:, block], real.item_features[:, block])
    popularity = int(real.tables.n_genres) + 1
    assert not np.allclose(table[:, popularity], real.item_features[:, popularity])


def test_rl_fitted_keeps_the_fits_choice_model_and_starts_every_learner_from_the_prior():
    from recagent_gym.runs.comparisons.rl_comparison import check_compare
    from recagent_gym.runs.config import load_config

    config = load_config("rl_fitted")
    check_compare(config, env_seeds=True)
    user = config.user
    assert user.model == "recsim" and user.recsim_fitted == "auto"
    # nothing hand-set in how the users choose: the fit's allure, quality weight and no-click mass are not overridden
    assert {"recsim_allure", "recsim_quality_weight", "recsim_no_click_mass"}.isdisjoint(user.model_fields_set)
    assert config.train.latent_prior > 0 and config.train.n_candidates == 200
    assert {"latent", "mf", "itemknn", "bc", "bc_ppo"} <= set(config.train.compare)
