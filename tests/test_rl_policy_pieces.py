"""The item-scoring policy's pieces that make PPO use the user: Plackett-Luce pages, user x item interaction
features, and quantile item columns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recagent_gym.envs.encoding import quantile01
from recagent_gym.policies.item_scoring import CandidateScorer, ItemScoringPolicy, interaction_features
from recagent_gym.policies.slate_distribution import PlackettLuceDistribution, decode_page, encode_page
from recagent_gym.runs.make_env import candidates_env

from ._env_fixtures import make_dataset


@pytest.fixture(scope="module")
def dataset():
    return make_dataset()


def _batch(obs):
    return {k: torch.as_tensor(v[None], dtype=torch.float32) for k, v in obs.items()}


def test_encoded_page_is_what_the_env_shows_and_decodes_back(dataset):
    env = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    env.reset(seed=0)
    page = torch.tensor([[7, 2, 19, 0, 11]])
    action = encode_page(page, 20)
    assert torch.equal(decode_page(action, 5), page)
    slate, _ = env.slate(action[0].numpy())
    assert slate.tolist() == [7, 2, 19, 0, 11]


def test_plackett_luce_samples_distinct_pages_and_its_log_prob_sums_to_one():
    torch.manual_seed(0)
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    dist = PlackettLuceDistribution(2).proba_distribution(logits)
    pages = [tuple(decode_page(dist.sample(), 2)[0].tolist()) for _ in range(2000)]
    assert all(a != b for a, b in pages) and len(set(pages)) > 6  # random, never a repeat
    every = [(a, b) for a in range(4) for b in range(4) if a != b]
    probs = torch.stack([dist.log_prob(encode_page(torch.tensor([p]), 4)) for p in every]).exp()
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-5)
    # the empirical frequency of the most likely page matches its probability
    top = probs.argmax().item()
    assert pages.count(every[top]) / len(pages) == pytest.approx(float(probs[top]), abs=0.04)
    assert decode_page(dist.mode(), 2)[0].tolist() == [0, 1]


def test_ppo_with_plackett_luce_pages_learns_and_predicts_a_page(dataset):
    from stable_baselines3 import PPO

    env = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    model = PPO(ItemScoringPolicy, env, n_steps=32, batch_size=32, seed=0, device="cpu", policy_kwargs={"page_size": 5})
    assert isinstance(model.policy.action_dist, PlackettLuceDistribution)
    assert not hasattr(model.policy, "log_std")
    model.learn(64)
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, deterministic=False)
    assert (action > -1).sum() == 5 and np.all(np.abs(action) <= 1)


def test_scorer_sees_user_x_item_products(dataset):
    env = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    obs, _ = env.reset(seed=0)
    batch = _batch(obs)
    n_genres = obs["user"].shape[0] - 3
    history = batch["history"]
    valid = history[..., -1:]
    history_mean = (history[..., :-1] * valid).sum(1) / valid.sum(1).clamp(min=1.0)
    products = interaction_features(batch, history_mean)
    f = obs["history"].shape[1] - 1
    assert products.shape == (1, 20, n_genres + 3 * f)
    top = int(np.argmax(obs["user"][:n_genres]))
    member = obs["candidates"][:, top] > 0
    assert torch.allclose(products[0, member, top], torch.ones(int(member.sum())))  # top genre, member item -> 1
    # the item tower reads them: another user's genre shares change the candidates' scores
    scorer = CandidateScorer(env.observation_space)
    torch.manual_seed(0)
    swapped = dict(batch)
    swapped["user"] = torch.roll(batch["user"], 3, dims=-1)
    scores, _ = scorer(batch)
    with torch.no_grad():
        scorer.context[-1].weight.zero_()
        scorer.context[-1].bias.zero_()
        own, _ = scorer(batch)
        other, _ = scorer(swapped)
    assert scores.shape == (1, 20)
    assert not torch.allclose(own, other)  # even with the context vector silenced


def test_item_columns_are_catalogue_quantiles(dataset):
    assert quantile01(np.array([3.0, 1.0, 2.0, 2.0])).tolist() == [1.0, 0.0, 0.5, 0.5]
    env = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    g = env.tables.n_genres
    rating = env.item_features[:, g + 2]
    assert rating.min() == 0.0 and rating.max() == 1.0
    assert abs(float(np.median(rating)) - 0.5) < 0.1  # spread over the whole range, not a narrow band


def test_envs_share_a_retriever_and_reject_a_mismatched_one(dataset):
    first = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    second = candidates_env(dataset, "recsim", social=False, n_candidates=20, retriever=first.retriever)
    assert second.retriever is first.retriever
    a, _ = first.reset(seed=3, options={"user_id": 2})
    b, _ = second.reset(seed=3, options={"user_id": 2})
    assert np.array_equal(a["candidates"], b["candidates"])
    with pytest.raises(ValueError, match="retriever: built for K=20"):
        candidates_env(dataset, "recsim", social=False, n_candidates=30, retriever=first.retriever)


def test_linucb_width_is_the_quadratic_form(dataset):
    from recagent_gym.policies.bandit import LinUCB, bandit_features

    env = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    obs, _ = env.reset(seed=0)
    phi = bandit_features(obs, env.tables.n_genres)
    bandit = LinUCB(phi.shape[1], env.tables.n_genres, alpha=1.0)
    bandit.update(obs, np.arange(5), 2, 1.0)
    expected = phi @ bandit.theta + np.sqrt([row @ bandit.a_inv @ row for row in phi])
    assert np.allclose(bandit.scores(obs, explore=True), expected)


def test_oracle_reads_the_distilled_users_noise_free_score(dataset):
    from recagent_gym.policies.candidate_baselines import OracleCandidates

    env = candidates_env(dataset, "embedding", social=False, n_candidates=20)
    obs, _ = env.reset(seed=0)

    class Distilled:  # the DistilledUser's scoring surface: mean_scores, no oracle_utilities
        def mean_scores(self, user_id, items):
            return -np.asarray(items, dtype=np.float64)

    oracle = OracleCandidates(env)
    oracle.env.user_model = Distilled()
    ids = np.asarray(env.candidate_ids)
    assert np.array_equal(oracle.scores(obs), -ids.astype(np.float64))


def test_the_recsim_comparison_is_repeated_on_embedding_and_distilled_users():
    from recagent_gym.runs.config import load_config

    base = load_config("rl_recsim")
    for name, model in (("rl_embedding", "embedding"), ("rl_distilled", "distilled")):
        config = load_config(name)
        assert config.user.model == model
        assert config.train.output_dir == f"runs/{name}"
        # the same protocol, learners, seeds and steps: only the users differ (and the distilled users' candidates,
        # drawn uniformly: among the default mix's, random got 0.92 of the oracle), and bc_ppo's budget, which
        # rl_recsim chose on its own development seeds (1M steps; the others keep 150,000 until theirs choose)
        mix = {"random": 1.0} if model == "distilled" else None
        assert config.train.candidate_mix == mix
        assert config.train.learner_timesteps == {"ppo": 150000, "bc_ppo": 150000}
        assert base.train.learner_timesteps == {"ppo": 150000, "bc_ppo": 1000000}
        same = {"output_dir": base.train.output_dir, "candidate_mix": base.train.candidate_mix,
                "learner_timesteps": base.train.learner_timesteps}  # fmt: skip
        assert config.train.model_copy(update=same) == base.train
        # the RecSim-style users' quality is hidden (RecSim hides document quality); the others' stays public
        assert base.env.hide_quality and not config.env.hide_quality
        assert config.env.model_copy(update={"hide_quality": True}) == base.env


def test_the_comparison_runs_numpy_blas_on_the_threads_it_gives_torch(monkeypatch, tmp_path):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from recagent_gym.policies.threads import blas_threads
    from recagent_gym.runs.comparisons import rl_comparison as comparison

    seen = []

    def inner(config, *, output_dir, dataset, **kwargs):
        seen.extend(p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas")
        return []

    monkeypatch.setattr(comparison, "_run_comparison", inner)
    from recagent_gym.runs.config import Config

    comparison.run_comparison(Config(), output_dir=tmp_path)
    assert seen and set(seen) == {1}
    with blas_threads(1):
        pass  # restored after: the block leaves the process as it found it
