"""Behaviour cloning on logged choices, the KL penalty towards the clone, and the real-log examples."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO

from recagent_gym.policies.behaviour_cloning import (
    PPO_ENT_COEF,
    KLPenalisedPolicy,
    clone,
    cloning_loss,
    first_slot_kl,
    page_logits,
)
from recagent_gym.runs.config import Config
from recagent_gym.runs.make_env import candidates_env

from ._env_fixtures import make_dataset

YEAR = len(("Action", "Comedy", "Drama", "Horror", "Romance", "Sci-Fi"))  # the year column follows the genres


@pytest.fixture(scope="module")
def dataset():
    return make_dataset()


@pytest.fixture(autouse=True)
def one_thread():
    """Small nets: one torch thread (as the comparison's ``train.torch_threads``) is ten times faster here."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(env, **kwargs):
    return PPO(KLPenalisedPolicy, env, n_steps=32, batch_size=32, ent_coef=PPO_ENT_COEF, seed=0, device="cpu",
               policy_kwargs={"page_size": 5, **kwargs})  # fmt: skip


def _logged(env, users, seeds=(0,)) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Observations of the users' first pages (one per seed); the logged choice is the newest candidate (a public
    feature)."""
    obs_list, targets = [], []
    for user, seed in ((u, s) for u in users for s in seeds):
        obs, _ = env.reset(seed=1000 * seed + user, options={"user_id": user})
        target = np.zeros(len(obs["candidate_mask"]), dtype=np.float32)
        target[np.argmax(obs["candidates"][:, YEAR])] = 1.0
        obs_list.append(obs)
        targets.append(target)
    return {k: np.stack([o[k] for o in obs_list]) for k in obs_list[0]}, np.stack(targets)


def _agreement(policy, obs, targets) -> float:
    with torch.no_grad():
        logits = page_logits(policy, {k: torch.as_tensor(v) for k, v in obs.items()})
    return float(np.mean(logits.argmax(-1).numpy() == targets.argmax(-1)))


def test_cloning_learns_to_prefer_the_logged_items(dataset):
    env = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    model = _model(env)
    train_obs, train_targets = _logged(env, range(25), seeds=(0, 1, 2, 3))
    test_obs, test_targets = _logged(env, range(25, 40))
    before = _agreement(model.policy, test_obs, test_targets)
    losses = clone(model.policy, train_obs, train_targets, epochs=40, batch_size=10, learning_rate=1e-2, seed=0).losses
    after = _agreement(model.policy, test_obs, test_targets)
    assert losses[-1] < 0.5 * losses[0]
    assert after >= 0.7 and after > before + 0.4, (before, after)  # on users it never saw: chance is 1 in 20


def test_cloning_keeps_the_epoch_best_on_other_users_logs_the_start_included(dataset):
    """Validation examples from other users: the policy ends at the epoch whose pages hold their choices most often.
    Cloned on logs that disagree with the validation examples (other candidates than those watched), the start is
    kept, as it was."""
    env = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    train_obs, train_targets = _logged(env, range(25), seeds=(0, 1))
    held_obs, held_targets = _logged(env, range(25, 40))
    model = _model(env)
    done = clone(model.policy, train_obs, train_targets, epochs=8, batch_size=10, learning_rate=1e-2, seed=0,
                 validation=(held_obs, held_targets))  # fmt: skip
    assert len(done.validation) == 9 and done.kept > 0 and done.validation[done.kept] == max(done.validation)
    assert done.validation[done.kept] > done.validation[0]
    with torch.no_grad():
        from recagent_gym.policies.behaviour_cloning import _tensors, validation_hits

        assert validation_hits(model.policy, *_tensors(held_obs, held_targets)) == pytest.approx(
            done.validation[done.kept], rel=1e-5
        )
    fresh = _model(env)
    start = {k: v.clone() for k, v in fresh.policy.state_dict().items()}
    wrong = train_targets[:, ::-1].copy() * train_obs["candidate_mask"]  # other candidates than those watched
    wrong[wrong.sum(1) == 0, 0] = 1.0
    done = clone(fresh.policy, train_obs, wrong, epochs=5, batch_size=10, learning_rate=1e-2, seed=0,
                 validation=(train_obs, train_targets))  # fmt: skip
    assert done.kept == 0 and max(done.validation[1:]) < done.validation[0]
    assert all(torch.equal(v, start[k]) for k, v in fresh.policy.state_dict().items())


def test_cloning_loss_is_the_cross_entropy_towards_the_logged_items():
    logits = torch.tensor([[2.0, 0.0, -1.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # the last candidate is padding: never a target, never in the softmax
    targets = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    expected = -torch.log_softmax(logits[:, :3], -1)[0, 0]
    assert torch.isclose(cloning_loss(logits, targets, mask), expected)


def test_kl_penalty_is_zero_at_the_clone_and_grows_as_the_policy_moves(dataset):
    env = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    model = _model(env, kl_beta=0.5)
    obs, _ = _logged(env, range(8))
    batch = {k: torch.as_tensor(v) for k, v in obs.items()}
    actions = torch.as_tensor(np.stack([model.predict(o, deterministic=False)[0] for o in _rows(obs)]))
    policy = model.policy
    _, _, unanchored = policy.evaluate_actions(batch, actions)
    assert torch.allclose(unanchored, torch.zeros_like(unanchored))  # no anchor, entropy_coef 0: nothing added
    policy.anchor()
    with torch.no_grad():
        logits = page_logits(policy, batch)
    assert torch.allclose(policy.kl_to_reference(batch, logits), torch.zeros(8), atol=1e-6)
    _, _, term = policy.evaluate_actions(batch, actions)
    assert torch.allclose(term, torch.zeros_like(term), atol=1e-6)
    with torch.no_grad():
        for parameter in policy.features_extractor.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    _, _, moved = policy.evaluate_actions(batch, actions)
    assert torch.all(moved <= 0) and moved.mean() < -1e-3  # -beta * KL: PPO's loss grows by beta * KL
    assert not any(p.requires_grad for p in policy.reference.parameters())  # the anchor is frozen
    assert all(p is not q for p in policy.parameters() for q in policy.reference.parameters())


def test_first_slot_kl_matches_its_definition():
    p, q = torch.tensor([[1.0, 0.0, -1.0]]), torch.tensor([[0.0, 0.0, 0.0]])
    sp, sq = torch.softmax(p, -1), torch.softmax(q, -1)
    assert torch.isclose(first_slot_kl(p, q), (sp * (sp / sq).log()).sum(-1)).all()
    assert first_slot_kl(p, p).abs().max() < 1e-6


def test_bc_ppo_trains_with_the_penalty(dataset):
    env = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    model = _model(env, kl_beta=1.0)
    obs, targets = _logged(env, range(10))
    clone(model.policy, obs, targets, epochs=5, seed=0)
    model.policy.anchor()
    model.learn(64)
    assert model.num_timesteps == 64


def test_cloning_examples_target_the_training_users_real_future_only(dataset):
    from recagent_gym.runs.comparisons.cloning import cloning_examples
    from recagent_gym.runs.evaluation.agreement.pools import temporal_split

    config = Config()
    config.train.n_candidates = 20
    config.evaluation.agreement_min_history = 5
    env = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    users = np.arange(10)
    obs, targets = cloning_examples(config, dataset, users, (env.item_features, env.latent_source))
    assert len(targets) >= 2 * len(users)  # both samplers, at least the first page of each user
    assert obs["candidates"].shape == (len(targets), 20, env.observation_space["candidates"].shape[1])
    assert np.all(targets.sum(1) >= 1) and np.all(targets <= obs["candidate_mask"])
    split = temporal_split(dataset, 4, 5)
    assert split.held_out  # the users' last items exist to be cloned


def test_cloning_examples_describe_items_as_counted_on_the_history(dataset):
    """Built by a function of the history split (the RL comparison's), the table never counts the futures the clone
    is trained to find: the function is handed the history, and the examples carry what it returned."""
    from recagent_gym.runs.comparisons.cloning import cloning_examples
    from recagent_gym.runs.comparisons.history_features import history_item_features

    config = Config()
    config.train.n_candidates = 20
    config.evaluation.agreement_min_history = 5
    env = candidates_env(dataset, "recsim", social=False, n_candidates=20)
    seen = []

    def build(history):
        seen.append(history)
        return history_item_features(env)(history)

    obs, _ = cloning_examples(config, dataset, np.arange(10), build)
    assert len(seen) == 1 and len(seen[0].interactions) < len(dataset.interactions)
    table, _ = build(seen[0])
    first = obs["candidates"][0, 0, : table.shape[1]]
    assert any(np.allclose(first, row) for row in table)
    popularity = int(env.tables.n_genres) + 1
    assert not np.allclose(table[:, popularity], env.item_features[:, popularity])


def test_teacher_forced_pages_show_one_future_item_and_hold_the_others_back(dataset):
    """Each logged page shows the earliest future item not shown yet (the replayed user watches it) among other
    candidates: no future item is ever shown and skipped, so the session's skipped items never describe the
    targets."""
    from recagent_gym.runs.comparisons.cloning import _walk
    from recagent_gym.runs.evaluation.agreement.pools import PoolRetriever, build_pools, temporal_split
    from recagent_gym.users.replay import ReplayUser

    split = temporal_split(dataset, 4, 5)
    users = sorted(split.held_out)[:6]
    future = {int(u): tuple(dict.fromkeys(split.held_out[int(u)])) for u in users}
    pools = build_pools(dataset, split, users, sampler="uniform", size=20, seed=0)
    env = candidates_env(split.train, ReplayUser(future), 5, 10, False, Config(), n_candidates=20,
                         users=np.asarray(users), retriever=PoolRetriever(pools, 20, split.train.n_users))  # fmt: skip
    pages: list[np.ndarray] = []
    step = env.step

    def spy(action):
        slate, _ = env.unwrapped.slate(action)
        pages.append(np.asarray(env.unwrapped.candidate_ids)[slate])
        return step(action)

    env.step = spy
    for n, user in enumerate(users):
        pages.clear()
        observations, targets = [], []
        _walk(env, int(user), future[int(user)], n, observations, targets)
        assert len(pages) >= 2 and len(targets) == len(observations)
        shown: list[int] = []
        for page in pages:
            ahead = [i for i in future[int(user)] if i not in shown]
            assert [i for i in page if i in future[int(user)]] == ahead[:1]  # the earliest not shown, alone
            shown += [int(i) for i in page]


def _rows(obs: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    return [{k: v[i] for k, v in obs.items()} for i in range(len(next(iter(obs.values()))))]


def test_comparison_runs_bc_and_bc_ppo_and_reports_headroom_and_real_hits(tmp_path):
    from recagent_gym.policies.config import TrainConfig
    from recagent_gym.runs.comparisons.rl_comparison import run_comparison

    config = Config(
        train=TrainConfig(
            total_timesteps=64,
            n_envs=2,
            n_steps=32,
            batch_size=32,
            seeds=[0],
            n_candidates=20,
            test_fraction=0.25,
            eval_every=64,
            eval_curve_users=4,
            n_bootstrap=100,
            bc_epochs=2,
            compare=["random", "popularity", "mf", "bc", "bc_ppo", "oracle"],
        )
    )
    config.user.model = "recsim"
    config.env.social = False
    results = run_comparison(config, output_dir=tmp_path, dataset=make_dataset(per_user=24))
    by_name = {r.recommender: r for r in results}
    assert {"bc", "bc_ppo"} <= set(by_name) and 0.0 <= by_name["bc"].real_hit <= 1.0
    text = (tmp_path / "policies.md").read_text()
    assert "Headroom: oracle minus the best non-learning baseline" in text
    assert "Real hits, popularity-matched negatives" in text and "Real hits, uniform negatives" in text
    curves = (tmp_path / "learning_curves.csv").read_text()
    assert "bc_ppo,0," in curves and "bc_ppo,64," in curves


def test_headroom_fraction_is_the_share_of_the_oracle_margin():
    from recagent_gym.runs.comparisons.headroom import headroom_fraction

    best, oracle = np.full(50, 1.0), np.full(50, 3.0)
    learner = np.random.default_rng(0).normal(2.0, 0.1, 50)
    fraction, low, high = headroom_fraction(learner, best, oracle, n_boot=200)
    assert abs(fraction - (learner.mean() - 1.0) / 2.0) < 1e-9 and low < fraction < high


def test_headroom_line_reads_each_learners_fraction_only_when_the_oracle_is_above_the_best_baseline():
    from recagent_gym.runs.comparisons.headroom import headroom_line

    rng = np.random.default_rng(0)
    per_user = {
        "mf": rng.normal(8.0, 0.1, 60),
        "ppo": rng.normal(8.5, 0.1, 60),
        "oracle_rollout": rng.normal(9.0, 0.1, 60),
    }
    line = headroom_line(per_user, ["ppo"], ["mf"], "oracle_rollout", 200)
    assert "best non-learning baseline (mf) is +0.9" in line and "ppo +5" in line
    per_user["oracle_rollout"] = per_user["mf"] - 0.1
    assert "not above zero" in headroom_line(per_user, ["ppo"], ["mf"], "oracle_rollout", 200)
