"""Training and evaluation: in-process on a synthetic dataset, and the scripts/CLI as subprocesses at tiny sizes."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recagent_gym.policies.config import TrainConfig
from recagent_gym.recommenders.factory import build_recommender
from recagent_gym.runs.config import Config, ConfigError
from recagent_gym.runs.make_env import catalogue_env
from recagent_gym.runs.policies.evaluate_policies import (
    EvalProtocol,
    PolicyMetrics,
    PolicyRecommender,
    evaluate_recommenders,
    run_sessions,
)
from recagent_gym.runs.policies.protocol import bootstrap_mean, derangement, split_users
from recagent_gym.runs.policies.results_table import summary_line, write_results
from recagent_gym.runs.policies.training import train_policy

from ._env_fixtures import make_dataset

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dataset():
    return make_dataset()


@pytest.mark.parametrize(("algorithm", "action"), [("ppo", "score"), ("a2c", "page"), ("dqn", "genre")])
@pytest.mark.slow
def test_train_then_evaluate_in_process(tmp_path, dataset, algorithm, action):
    config = Config(
        train=TrainConfig(
            algorithm=algorithm,
            action=action,
            total_timesteps=128,
            n_envs=2,
            n_steps=16,
            batch_size=16,
            checkpoint_every=64,
        ),
    )
    config.user.model = "recsim"
    result = train_policy(config, dataset=dataset, output_dir=tmp_path, progress_bar=False)
    assert result.policy_path.exists() and result.timesteps >= 128
    assert list((tmp_path / "checkpoints").glob("*.zip"))
    assert "user:" in (tmp_path / "config.yaml").read_text()
    assert json.loads((tmp_path / "policy.json").read_text())["action"] == action
    env = catalogue_env(dataset, "recsim", config=config)
    recommenders = {
        "random": build_recommender("random", dataset, config.recommender, env.page_size),
        algorithm: PolicyRecommender.load(result.policy_path, env),
    }
    split = split_users(dataset.n_users, test_fraction=0.25, seed=0)
    protocol = EvalProtocol(users=split.test, sessions_per_user=2, seed=0, n_boot=200)
    results = evaluate_recommenders(recommenders, env, protocol)
    assert [r.recommender for r in results] == ["random", algorithm]
    assert all(r.sessions == 2 * len(split.test) and r.n_users == len(split.test) for r in results)
    assert all(r.ci_low <= r.mean_return <= r.ci_high and 0 <= r.genre_entropy <= 1 for r in results)
    paths = write_results(results, tmp_path / "eval", "title", summary_line(results, learned=[algorithm]))
    rows = list(csv.DictReader(paths["csv"].open()))
    assert len(rows) == 2 and paths["plot"].stat().st_size > 0
    for column in REQUIRED_COLUMNS:
        assert column in rows[0]
    assert rows[0]["oracle_ratio"] == ""  # no oracle row: empty, not a made-up number


REQUIRED_COLUMNS = (
    "recommender",
    "mean_return",
    "ci_low",
    "ci_high",
    "n_users",
    "swapped_drop",
    "swapped_ci_low",
    "swapped_ci_high",
    "oracle_ratio",
)


def test_split_is_seeded_disjoint_and_covers_everyone():
    a, b = split_users(100, test_fraction=0.2, seed=3), split_users(100, test_fraction=0.2, seed=3)
    assert np.array_equal(a.test, b.test) and len(a.test) == 20
    assert not set(a.train) & set(a.test) and len(a.train) + len(a.test) == 100
    assert not np.array_equal(a.test, split_users(100, test_fraction=0.2, seed=4).test)


def test_bootstrap_interval_is_over_users_and_narrows_with_more_users():
    rng = np.random.default_rng(0)
    small = bootstrap_mean(rng.normal(1.0, 1.0, 10), seed=0)
    large = bootstrap_mean(rng.normal(1.0, 1.0, 1000), seed=0)
    assert small.n == 10 and large.n == 1000
    assert small.low < small.mean < small.high and large.low < 1.0 < large.high
    assert (large.high - large.low) < (small.high - small.low) / 3


def test_derangement_has_no_fixed_point():
    for n in (2, 3, 10, 101):
        partner = derangement(n, seed=n)
        assert sorted(partner) == list(range(n)) and all(partner[i] != i for i in range(n))


class _FavouriteGenre:
    """Recommends the best items of the genre the observation's user_features say the user likes most."""

    def __init__(self, env):
        self.env = env

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        tables = self.env.tables
        genre = int(np.argmax(observation["user_features"][: tables.n_genres]))
        scores = tables.topics[:, genre] + 0.1 * tables.quality
        scores = np.where(self.env.seen_mask, -np.inf, scores)
        return np.argsort(-scores)[: self.env.page_size], None


def test_swapped_encoding_hurts_a_personalised_recommender_not_popularity(dataset):
    config = Config()
    config.user.model = "recsim"
    env = catalogue_env(dataset, "recsim", config=config, social=False)
    protocol = EvalProtocol(users=np.arange(dataset.n_users), sessions_per_user=3, seed=0, n_boot=500)
    results = evaluate_recommenders(
        {
            "popularity": build_recommender("popularity", dataset, config.recommender, env.page_size),
            "fav": _FavouriteGenre(env),
        },
        env,
        protocol,
    )
    by_name = {r.recommender: r for r in results}
    assert by_name["fav"].swapped_interval.excludes_zero() and by_name["fav"].swapped_drop > 0
    assert by_name["popularity"].swapped_ci_low <= 0 <= by_name["popularity"].swapped_ci_high
    # the control freezes the user's own session-start encoding the same way: the drop against it is the part that
    # depends on whose encoding it is (popularity reads only which items the history holds, to skip them)
    assert by_name["fav"].frozen_drop > 0 and by_name["fav"].frozen_ci_low > 0
    assert by_name["fav"].frozen_drop > 3 * abs(by_name["popularity"].frozen_drop)


def test_each_held_out_user_starts_from_the_same_state_for_every_recommender(dataset):
    config = Config()
    config.user.model = "recsim"
    env = catalogue_env(dataset, "recsim", config=config, social=False)
    protocol = EvalProtocol(users=np.array([3, 7, 11]), sessions_per_user=2, seed=5, swapped=False)
    seen = []
    rec = build_recommender("popularity", dataset, config.recommender, env.page_size)
    first = run_sessions(rec, env, protocol).returns
    env.reset(seed=99)  # the env's state moves on between recommenders ...
    for _ in range(3):
        env.reset()
        seen.append(env.current_user)
    second = run_sessions(rec, env, protocol).returns
    assert np.array_equal(first, second)  # ... and the held-out users still start from the same state
    assert first.shape == (3, 2)


def test_summary_line_reads_the_intervals():
    def row(name, mean, low, high):
        nan = float("nan")
        return PolicyMetrics(name, mean, low, high, 30, 30, 1, *[nan] * 10, 1, 0, 3, 0.3, 0.1, 0.5, 0)

    line = summary_line([row("ppo", 0.5, 0.2, 0.8), row("popularity", 1.0, 0.7, 1.3)], learned=["ppo"])
    assert "popularity" in line and "not separable from ppo" in line and "30 held-out users" in line
    line = summary_line([row("ppo", 2.0, 1.8, 2.2), row("random", 1.0, 0.7, 1.3)], learned=["ppo"])
    assert "above random" in line


def test_training_meets_train_users_only_and_prints_progress(tmp_path, dataset, monkeypatch, capsys):
    import recagent_gym.runs.policies.training as training

    built = []
    real = training.catalogue_vector_env

    def spy(*args, **kwargs):
        venv = real(*args, **kwargs)
        built.append(venv)
        return venv

    monkeypatch.setattr(training, "catalogue_vector_env", spy)
    config = Config(
        train=TrainConfig(total_timesteps=64, n_envs=2, n_steps=16, batch_size=16, test_fraction=0.25, log_every=1)
    )
    config.user.model = "recsim"
    train_policy(config, dataset=dataset, output_dir=tmp_path, progress_bar=True)
    split = split_users(dataset.n_users, test_fraction=0.25, seed=0)
    (venv,) = built
    assert venv.dataset.n_users == len(split.train)
    held_out_histories = {tuple(sorted(dataset.user_history(int(u))["item_id"])) for u in split.test}
    train_histories = {tuple(sorted(venv.dataset.user_history(u)["item_id"])) for u in range(venv.dataset.n_users)}
    assert not held_out_histories & train_histories
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("train step")]
    assert len(lines) >= 2 and "return" in lines[-1] and "64/64" in lines[-1]
    assert "it/s" not in out  # no progress bar when the output is not a terminal


def test_held_out_learning_curve_is_written_with_intervals(tmp_path, dataset):
    config = Config(
        train=TrainConfig(total_timesteps=64, n_envs=2, n_steps=16, batch_size=16, eval_every=32, eval_curve_users=5)
    )
    config.user.model = "recsim"
    config.env.social = False
    train_policy(config, dataset=dataset, output_dir=tmp_path, progress_bar=False)
    rows = list(csv.DictReader((tmp_path / "learning_curve.csv").open()))
    assert int(rows[0]["step"]) == 0 and int(rows[-1]["step"]) >= 64
    assert all(int(r["n_users"]) == 5 and float(r["ci_low"]) <= float(r["mean_return"]) for r in rows)
    assert (tmp_path / "learning_curve.png").stat().st_size > 0


def test_dqn_needs_the_genre_action(tmp_path, dataset):
    config = Config(train=TrainConfig(algorithm="dqn", action="score", total_timesteps=8))
    config.user.model = "recsim"
    with pytest.raises(ConfigError, match="genre"):
        train_policy(config, dataset=dataset, output_dir=tmp_path, progress_bar=False)


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_scripts_and_cli_smoke(tmp_path):
    """train.py, then ``recagent-gym evaluate policies`` and evaluate.py on the bundled data, at tiny sizes."""
    out = tmp_path / "run"
    run(
        [
            sys.executable,
            str(ROOT / "train.py"),
            "--total-timesteps",
            "64",
            "--n-envs",
            "2",
            "--set",
            "train.n_steps=16",
            "--set",
            "train.batch_size=16",
            "--output-dir",
            str(out),
            "--no-progress",
        ],
        tmp_path,
    )
    assert (out / "policy.zip").exists()
    proc = run(
        [
            sys.executable,
            "-m",
            "recagent_gym.runs.cli",
            "evaluate",
            "policies",
            "--recommenders",
            "random",
            "--policy",
            f"ppo={out / 'policy.zip'}",
            "--users",
            "3",
            "--output-dir",
            str(tmp_path / "ev"),
        ],
        tmp_path,
    )
    assert "| ppo | " in proc.stdout and "held-out users" in proc.stdout and (tmp_path / "ev" / "policies.png").exists()
    proc = run(
        [
            sys.executable,
            str(ROOT / "evaluate.py"),
            "--recommenders",
            "popularity",
            "--users",
            "2",
            "--no-swapped",
            "--output-dir",
            str(tmp_path / "ev2"),
        ],
        tmp_path,
    )
    assert "| popularity | " in proc.stdout
