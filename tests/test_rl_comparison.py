"""The RL comparison on RecAgent-v1: learners, baselines, oracle, curves and the CSV, at a tiny size."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch

from recagent_gym.policies.bandit import LinUCB, bandit_features, train_bandit
from recagent_gym.policies.candidate_baselines import OracleCandidates, PopularCandidates, rank_action
from recagent_gym.policies.config import TrainConfig
from recagent_gym.policies.item_scoring import CandidateScorer, ItemScoringPolicy
from recagent_gym.runs.comparisons.rl_comparison import learner_steps, run_comparison
from recagent_gym.runs.config import Config, load_config
from recagent_gym.runs.make_env import candidates_env
from recagent_gym.settings_section import ConfigError

from ._env_fixtures import make_dataset


@pytest.fixture(scope="module")
def dataset():
    return make_dataset()


def _env(dataset, **kwargs):
    return candidates_env(dataset, "recsim", social=False, n_candidates=20, **kwargs)


def test_scorer_shares_weights_across_candidates(dataset):
    env = _env(dataset)
    obs, _ = env.reset(seed=0)
    scorer = CandidateScorer(env.observation_space)
    batch = {k: torch.as_tensor(v[None], dtype=torch.float32) for k, v in obs.items()}
    scores, _ = scorer(batch)
    permuted = dict(batch)
    order = torch.randperm(20)
    permuted["candidates"] = batch["candidates"][:, order]
    again, _ = scorer(permuted)
    assert torch.allclose(scores[:, order], again, atol=1e-6)  # the same item gets the same score wherever it is


def test_item_scoring_policy_acts_with_a_score_per_candidate(dataset):
    from stable_baselines3 import PPO

    env = _env(dataset)
    model = PPO(ItemScoringPolicy, env, n_steps=32, batch_size=32, seed=0, device="cpu")
    model.learn(64)
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (20,) and np.all(np.abs(action) <= 1)


def test_baselines_put_items_shown_this_session_last(dataset):
    env = _env(dataset)
    obs, _ = env.reset(seed=0)
    obs["candidates"][:3, -2] = 1.0
    action, _ = PopularCandidates(env).predict(obs)
    assert set(np.argsort(-action)[-3:].tolist()) == {0, 1, 2}
    assert np.array_equal(np.argsort(-rank_action(np.array([0.1, 0.9, 0.5]))), [1, 2, 0])


def test_oracle_ranks_by_the_true_utility(dataset):
    env = _env(dataset)
    obs, _ = env.reset(seed=0)
    action, _ = OracleCandidates(env).predict(obs)
    utilities = env.user_model.oracle_utilities(env.current_user, np.asarray(env.candidate_ids))
    assert np.argmax(action) == np.argmax(utilities)


def test_itemknn_ranks_by_co_watches_with_the_observed_users_history(dataset):
    from recagent_gym.policies.candidate_baselines import ItemKNNCandidates
    from recagent_gym.recommenders.history_scorers import ItemKNN

    env = _env(dataset)
    obs, _ = env.reset(seed=0)
    action, _ = ItemKNNCandidates(env).predict(obs)
    knn = ItemKNN(env.unwrapped.dataset).scores(env.current_user, np.asarray(env.candidate_ids))
    assert np.argmax(action) == np.argmax(knn) and knn.max() > knn.min()
    other = next(u for u in range(dataset.n_users) if u != env.current_user)
    swapped = dict(obs, user=env.unwrapped.tables.user_features[other])  # another user's encoding: its history
    action, _ = ItemKNNCandidates(env).predict(swapped)
    assert np.argmax(action) == np.argmax(ItemKNN(env.unwrapped.dataset).scores(other, np.asarray(env.candidate_ids)))


def test_linucb_learns_a_preferred_feature(dataset):
    env = _env(dataset)
    obs, _ = env.reset(seed=0)
    d = bandit_features(obs, env.tables.n_genres).shape[1]
    bandit = LinUCB(d, env.tables.n_genres, alpha=0.0)
    slate = np.arange(5)
    for _ in range(50):
        bandit.update(obs, slate, 2, 1.0)
    assert np.argmax(bandit.scores(obs, explore=False)[:5]) == 2
    assert train_bandit(_env(dataset), steps=50, seed=0).pulls == 250


@pytest.mark.slow
def test_comparison_runs_every_recommender_on_held_out_users(tmp_path, dataset):
    config = Config(
        train=TrainConfig(
            total_timesteps=128,
            n_envs=2,
            n_steps=32,
            batch_size=32,
            seeds=[0, 1],
            n_candidates=20,
            test_fraction=0.25,
            eval_every=64,
            eval_curve_users=4,
            n_bootstrap=200,
        )
    )
    config.user.model = "recsim"
    config.env.social = False
    dataset = make_dataset(per_user=24)  # users keep 10 items of history before their 4 real future items
    results = run_comparison(config, output_dir=tmp_path, dataset=dataset)
    by_name = {r.recommender: r for r in results}
    assert set(by_name) == {
        "random",
        "popularity",
        "quality",
        "mf",
        "itemknn",
        "bandit",
        "slateq",
        "ppo",
        "oracle",
        "oracle_rollout",
    }
    assert all(r.n_users == 10 for r in results)
    # sim2real: every row but the oracles (they read the simulated users' hidden state) has its real offline metric
    assert all(
        0.0 <= r.real_ci_low <= r.real_hit <= r.real_ci_high <= 1.0 for r in results if "oracle" not in r.recommender
    )
    assert np.isnan(by_name["oracle"].real_hit) and np.isnan(by_name["oracle_rollout"].real_hit)
    # the rows that read who the user is also have the real hit rate lost on another user's encoding; the others none
    readers = {"mf", "itemknn", "bandit", "slateq", "ppo"}
    for name, row in by_name.items():
        measured = not np.isnan(row.real_swapped_drop)
        assert measured == (name in readers), name
        assert not measured or row.real_swapped_ci_low <= row.real_swapped_drop <= row.real_swapped_ci_high
    assert by_name["mf"].real_swapped_drop != 0.0 or by_name["itemknn"].real_swapped_drop != 0.0
    text = (tmp_path / "policies.md").read_text()
    assert "real hit rate" in text and "real swapped drop" in text and "uniform" in text
    # the ratio is to the rollout oracle, and the table and the summary say so
    assert "/ oracle (oracle_rollout) [95% CI]" in text and "ratio is to the rollout oracle" in text
    assert "rollout minus heuristic oracle, paired over users: " in text
    assert by_name["ppo"].seeds == 2 and by_name["oracle_rollout"].oracle_ratio == pytest.approx(1.0)
    rows = list(csv.DictReader((tmp_path / "policies.csv").open()))
    assert all(row["oracle_ratio"] != "" for row in rows)
    curves = list(csv.DictReader((tmp_path / "learning_curves.csv").open()))
    assert {row["recommender"] for row in curves} == {"ppo", "slateq"}
    assert all(row["seeds"] == "2" for row in curves)
    assert (tmp_path / "learning_curves.png").stat().st_size > 0 and (tmp_path / "policies.png").stat().st_size > 0
    # each held-out user's real hits per sampler and row, the table's column their mean
    hits = list(csv.DictReader((tmp_path / "real_hits.csv").open()))
    assert {row["sampler"] for row in hits} == {"popularity-matched", "uniform"}
    table = config.evaluation.sim2real_negatives
    mf = [float(row["hit"]) for row in hits if row["sampler"] == table and row["recommender"] == "mf"]
    assert len(mf) == 10 and np.mean(mf) == pytest.approx(by_name["mf"].real_hit)
    assert len({row["user"] for row in hits}) == 10 and "oracle" not in {row["recommender"] for row in hits}


def test_users_without_a_state_copy_fall_back_to_the_heuristic_oracle_and_say_why(tmp_path, dataset):
    config = Config(
        train=TrainConfig(compare=["random", "oracle_rollout"], test_fraction=0.25, n_bootstrap=100,
                          real_metric=False, eval_swapped=False, n_candidates=20)
    )  # fmt: skip
    config.user.model = "embedding"
    config.env.social = False
    results = run_comparison(config, output_dir=tmp_path, dataset=dataset)
    assert [r.recommender for r in results] == ["random", "oracle"]
    assert results[1].oracle_ratio == pytest.approx(1.0)
    text = (tmp_path / "policies.md").read_text()
    assert "No rollout oracle for these users (EmbeddingUser has no state copy" in text
    assert "/ oracle [95% CI]" in text and "heuristic oracle (`oracle`: the users' noise-free score" in text


def test_learner_timesteps_name_learners_and_default_to_total(tmp_path, dataset):
    config = Config(train=TrainConfig(total_timesteps=100, learner_timesteps={"ppo": 300}))
    assert learner_steps(config, "ppo") == 300 and learner_steps(config, "slateq") == 100
    config = Config(train=TrainConfig(learner_timesteps={"pop": 10}))
    with pytest.raises(ValueError, match=r"unknown learners \['pop'\]"):
        run_comparison(config, output_dir=tmp_path, dataset=dataset)


@pytest.mark.slow
def test_env_seeds_run_one_comparison_per_seed_and_report_paired_differences(tmp_path, monkeypatch):
    import recagent_gym.runs.comparisons.env_seeds as env_seeds
    from recagent_gym.runs.comparisons.env_seeds import holds_comparison, run_env_seeds

    config = Config(
        train=TrainConfig(total_timesteps=64, n_envs=2, n_steps=32, batch_size=32, seeds=[0], n_candidates=20,
                          test_fraction=0.25, eval_every=0, eval_curve_users=2, n_bootstrap=100,
                          compare=["random", "popularity", "bandit", "oracle"], real_metric=False)
    )  # fmt: skip
    config.user.model = "recsim"
    config.env.social = False
    rows = run_env_seeds(config, [0, 3], output_dir=tmp_path, dataset=make_dataset(per_user=24))
    assert [r["env_seed"] for r in rows] == [0, 3]
    assert all(r["learner"] == "bandit" and r["baseline"] in ("random", "popularity") for r in rows)
    assert all(r["diff_ci_low"] <= r["difference"] <= r["diff_ci_high"] for r in rows)
    for seed in (0, 3):  # each env seed is a whole comparison with its own split and user population
        saved = (tmp_path / f"env_seed_{seed}" / "config.yaml").read_text()
        assert f"split_seed: {seed}" in saved and f"recsim_seed: {seed}" in saved
    text = (tmp_path / "env_seeds.md").read_text()
    assert "learner - baseline" in text and "of 2 env seeds" in text
    first = text.split("\n| 0 |")[1].split("\n")[0].split("|")
    assert all("[" in cell for cell in first[2:5])  # the difference, swapped and frozen drops with their intervals
    assert len(list(csv.DictReader((tmp_path / "env_seeds.csv").open()))) == 2
    assert "](env_seed_3/learning_curves.png)" in text  # each seed's curves plotted under its section
    # --jobs 2: the seeds in two worker processes at once give the same rows (each seed's randomness is its own)
    again = run_env_seeds(config, [0, 3], output_dir=tmp_path / "jobs", dataset=make_dataset(per_user=24), jobs=2)
    assert again == rows
    assert (tmp_path / "jobs" / "env_seed_3" / "policies.csv").read_text() == (
        tmp_path / "env_seed_3" / "policies.csv"
    ).read_text()
    # an interrupted run resumes: a finished seed is read (its files untouched), a seed without its row runs again
    stamps = {seed: (tmp_path / f"env_seed_{seed}" / "policies.csv").stat().st_mtime_ns for seed in (0, 3)}
    (tmp_path / "env_seed_0" / "env_seed_row.json").unlink()
    assert run_env_seeds(config, [0, 3], output_dir=tmp_path, dataset=make_dataset(per_user=24)) == rows
    assert (tmp_path / "env_seed_3" / "policies.csv").stat().st_mtime_ns == stamps[3]
    assert (tmp_path / "env_seed_0" / "policies.csv").stat().st_mtime_ns != stamps[0]
    # another configuration in the folder is not this comparison: it is run again, not read
    config.train.n_candidates = 16
    other = run_env_seeds(config, [3], output_dir=tmp_path, dataset=make_dataset(per_user=24))
    assert (tmp_path / "env_seed_3" / "policies.csv").stat().st_mtime_ns != stamps[3]
    assert "n_candidates: 16" in (tmp_path / "env_seed_3" / "config.yaml").read_text() and len(other) == 1
    # a seed re-run that stops part-way leaves nothing that looks finished (to a resume or to sim2real)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(env_seeds, "run_comparison", stopped)
    config.train.n_candidates = 20
    with pytest.raises(KeyboardInterrupt):
        run_env_seeds(config, [3], output_dir=tmp_path, dataset=make_dataset(per_user=24))
    assert not (tmp_path / "env_seed_3" / "policies.csv").exists()
    assert not (tmp_path / "env_seed_3" / "env_seed_row.json").exists()
    assert not holds_comparison(config, 3, tmp_path, strict=False)


@pytest.mark.parametrize("value", ["a,b", "1,1", ","])
def test_bad_env_seeds_are_one_line(tmp_path, value, capsys):
    from recagent_gym.runs.cli import main

    assert main(["evaluate", "rl-comparison", "--env-seeds", value, "--output-dir", str(tmp_path / "out")]) == 2
    assert "--env-seeds" in capsys.readouterr().err


@pytest.mark.parametrize(("extra", "needle"), [(["--jobs", "0"], "--jobs"), (["--jobs", "two"], "--jobs"),
                                               (["--jobs", "2"], "give --env-seeds")])  # fmt: skip
def test_bad_jobs_are_one_line(tmp_path, extra, needle, capsys):
    from recagent_gym.runs.cli import main

    try:
        code = main(["evaluate", "rl-comparison", *extra, "--output-dir", str(tmp_path / "out")])
    except SystemExit as exc:  # argparse refuses a value that is not a number of processes
        code = exc.code
    assert code == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_hide_quality_makes_the_quality_column_constant(dataset):
    from recagent_gym.policies.candidate_baselines import quality_column

    config = Config()
    config.env.social = False
    shown = _env(dataset, config=config)
    config.env.hide_quality = True
    hidden = _env(dataset, config=config)
    column = quality_column(shown)
    assert shown.item_features[:, column].std() > 0.1
    assert np.all(hidden.item_features[:, column] == 0.5)
    others = [c for c in range(shown.item_features.shape[1]) if c != column]
    assert np.array_equal(shown.item_features[:, others], hidden.item_features[:, others])


@pytest.mark.slow
def test_validation_users_choose_the_learners_checkpoint_and_are_never_trained_on(tmp_path, monkeypatch):
    import recagent_gym.runs.comparisons.rl_comparison as comparison

    trained_on: list[set[int]] = []
    real_make = comparison.make_candidate_env

    def spy(config, dataset, users, *args, **kwargs):
        trained_on.append(set(np.asarray(users).tolist()))
        return real_make(config, dataset, users, *args, **kwargs)

    monkeypatch.setattr(comparison, "make_candidate_env", spy)
    config = Config(
        train=TrainConfig(total_timesteps=96, n_envs=2, n_steps=16, batch_size=32, seeds=[0], n_candidates=20,
                          test_fraction=0.25, eval_every=32, eval_curve_users=2, n_bootstrap=100, validation_users=5,
                          compare=["random", "slateq", "ppo"], real_metric=False, eval_swapped=False)
    )  # fmt: skip
    config.user.model = "recsim"
    config.env.social = False
    dataset = make_dataset(per_user=24)
    run_comparison(config, output_dir=tmp_path, dataset=dataset)
    for name in ("slateq", "ppo"):
        rows = list(csv.DictReader((tmp_path / f"{name}_0" / "validation.csv").open()))
        steps = [int(r["step"]) for r in rows]
        assert steps[0] == 0 and steps[-1] >= 96 and len(steps) >= 4  # every curve point, from the start to the end
        kept = [r for r in rows if r["kept"] == "1"]
        best = max(float(r["validation_return"]) for r in rows)
        assert len(kept) == 1 and float(kept[0]["validation_return"]) == best
        assert all(r["n_users"] == "5" for r in rows)
    validation = [s for s in trained_on if len(s) == 5]
    assert len(validation) == 1  # one env over the validation users; the learners' envs never hold them
    learners = [s for s in trained_on if len(s) not in (5, 10)]
    assert learners and all(not (s & validation[0]) for s in learners)
    assert (
        "Learners kept at their best validation point (5 training users set aside"
        in (tmp_path / "policies.md").read_text()
    )


def test_best_on_validation_restores_the_best_parameters():
    from recagent_gym.runs.policies.selection import BestOnValidation, validation_split

    class Model:
        def __init__(self):
            self.net = torch.nn.Linear(1, 1)

    model = Model()
    selector = BestOnValidation(lambda m: np.array([float(m.net.bias.detach())]), n_users=1)
    for step, bias in enumerate([0.1, 0.7, 0.7, -0.3]):
        with torch.no_grad():
            model.net.bias.fill_(bias)
        selector.offer(model, step)
    assert selector.best_step == 1  # the earliest of the tied best points
    selector.restore(model)
    assert float(model.net.bias.detach()) == pytest.approx(0.7)
    learn, held = validation_split(np.arange(10), 3, seed=0)
    assert len(held) == 3 and set(learn) | set(held) == set(range(10)) and not set(learn) & set(held)
    with pytest.raises(ValueError, match="validation_users is 10 but there are only 10 training users"):
        validation_split(np.arange(10), 10, seed=0)


def test_a_selection_window_keeps_a_point_in_a_good_stretch_not_a_lone_spike(tmp_path):
    from recagent_gym.runs.policies.selection import BestOnValidation
    from recagent_gym.runs.policies.validation_file import validation_curves

    class Model:
        def __init__(self):
            self.net = torch.nn.Linear(1, 1)

    returns = [0.0, 1.0, 0.0, 0.6, 0.7, 0.6, 0.0]  # a lone spike at step 1, a good stretch around step 4
    model = Model()
    single = BestOnValidation(lambda m: np.array([float(m.net.bias.detach())]), n_users=1)
    smoothed = BestOnValidation(lambda m: np.array([float(m.net.bias.detach())]), n_users=1, window=3)
    for step, value in enumerate(returns):
        with torch.no_grad():
            model.net.bias.fill_(value)
        single.offer(model, step * 10)
        smoothed.offer(model, step * 10)
    assert single.best_step == 10 and smoothed.best_step == 40
    assert smoothed.best_return == pytest.approx((0.6 + 0.7 + 0.6) / 3)
    with torch.no_grad():
        model.net.bias.fill_(-5.0)
    assert float(smoothed.restore(model).net.bias.detach()) == pytest.approx(0.7)  # the kept point's own parameters
    smoothed.write_csv(tmp_path / "bc_ppo_0" / "validation.csv")
    rows = list(csv.DictReader((tmp_path / "bc_ppo_0" / "validation.csv").open()))
    assert [float(r["selection_score"]) for r in rows][:2] == pytest.approx([0.5, 1.0 / 3])  # the first: 2 points
    assert float(rows[-1]["selection_score"]) == pytest.approx(0.3)  # the last point's window is cut at the end
    [(kept_step, kept_return)] = validation_curves(tmp_path, ["bc_ppo"])["bc_ppo"][1]
    assert kept_step == 40 and kept_return == pytest.approx(0.7)
    with pytest.raises(ConfigError, match="selection_window must be an odd"):
        BestOnValidation(lambda m: np.zeros(1), n_users=1, window=2)


def test_validation_repeats_replay_each_users_first_session_with_other_seeds():
    from recagent_gym.runs.comparisons.rl_comparison import _selection
    from recagent_gym.runs.make_env import make_candidate_env
    from recagent_gym.runs.policies.evaluate_policies import REPEAT_SEED_STRIDE, EvalProtocol, run_sessions

    config = Config(train=TrainConfig(n_candidates=20, n_bootstrap=100, validation_repeats=1))
    config.user.model = "recsim"
    config.env.social = False
    data = make_dataset(per_user=24)
    users = np.arange(6)
    env = make_candidate_env(config, data, users)

    class InOrder:  # reads nothing but the observation, as a trained policy: the candidates in retrieval order
        def predict(self, obs, deterministic=True):
            return np.linspace(1.0, -1.0, len(obs["candidates"])), None

    once = _selection(config, data, users, env.retriever)().evaluate(InOrder())
    config.train.validation_repeats = 3
    thrice = _selection(config, data, users, env.retriever)().evaluate(InOrder())
    protocols = [EvalProtocol(users=users, seed=REPEAT_SEED_STRIDE * r, swapped=False) for r in range(3)]
    replays = [run_sessions(InOrder(), env, p).returns[:, 0] for p in protocols]
    assert np.allclose(replays[0], once)  # the first repeat is the session one repeat plays, from the same state
    assert np.allclose(np.mean(replays, axis=0), thrice) and not np.allclose(thrice, once)
    together = run_sessions(InOrder(), env, EvalProtocol(users=users, swapped=False, repeats=3)).returns
    assert together.shape == (6, 3) and np.allclose(together, np.stack(replays, axis=1))  # a repeat per column


def test_an_even_selection_window_is_refused_by_the_config():
    with pytest.raises(ConfigError, match="selection_window"):
        load_config("rl_recsim", overrides=["train.selection_window=4"])


def test_plackett_luce_pages_leave_out_items_shown_this_session(dataset):
    from stable_baselines3 import PPO

    from recagent_gym.policies.candidate_baselines import SHOWN_COLUMN
    from recagent_gym.policies.slate_distribution import decode_page

    env = _env(dataset)
    model = PPO(ItemScoringPolicy, env, n_steps=32, batch_size=32, seed=0, device="cpu", policy_kwargs={"page_size": 5})
    obs, _ = env.reset(seed=0)
    plain, _ = model.predict(obs, deterministic=True)
    top = np.argsort(-plain)[:5]
    obs["candidates"][top, SHOWN_COLUMN] = 1.0  # the page it would show, as if shown on the page before
    again, _ = model.predict(obs, deterministic=True)
    assert not set(np.argsort(-again)[:5].tolist()) & set(top.tolist())
    tensors = {k: torch.as_tensor(v[None]) for k, v in obs.items()}
    for _ in range(20):  # sampled pages too, so training and evaluation follow the same rule
        page = decode_page(model.policy.get_distribution(tensors).sample(), 5)[0].tolist()
        assert not set(page) & set(top.tolist())
    obs["candidates"][:, SHOWN_COLUMN] = 1.0  # every candidate shown: the page still holds valid candidates
    last, _ = model.predict(obs, deterministic=True)
    assert all(obs["candidate_mask"][i] > 0 for i in np.argsort(-last)[:5])
