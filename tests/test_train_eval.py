"""Training and evaluation: in-process on a synthetic dataset, and the scripts/CLI as subprocesses at tiny sizes."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from recagent_gym.config import Config, ConfigError
from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.policies.config import TrainConfig
from recagent_gym.policies.evaluate_policies import PolicyRecommender, evaluate_recommenders, write_results
from recagent_gym.policies.training import train_policy
from recagent_gym.recommenders.factory import build_recommender

from ._env_fixtures import make_dataset

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dataset():
    return make_dataset()


@pytest.mark.parametrize(("algorithm", "action"), [("ppo", "score"), ("a2c", "page"), ("dqn", "genre")])
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
    env = RecAgentEnv(dataset, "recsim", config=config)
    recommenders = {
        "random": build_recommender("random", dataset, config, env.page_size),
        algorithm: PolicyRecommender.load(result.policy_path, env),
    }
    results = evaluate_recommenders(recommenders, env, n_episodes=4, seed=0)
    assert [r.recommender for r in results] == ["random", algorithm]
    assert all(r.sessions == 4 and r.pages_per_session >= 1 and 0 <= r.genre_entropy <= 1 for r in results)
    paths = write_results(results, tmp_path / "eval", "title")
    rows = list(csv.DictReader(paths["csv"].open()))
    assert len(rows) == 2 and paths["plot"].stat().st_size > 0


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
            "recagent_gym.cli",
            "evaluate",
            "policies",
            "--recommenders",
            "random",
            "--policy",
            f"ppo={out / 'policy.zip'}",
            "--episodes",
            "3",
            "--output-dir",
            str(tmp_path / "ev"),
        ],
        tmp_path,
    )
    assert "| ppo |" in proc.stdout and (tmp_path / "ev" / "policies.png").exists()
    proc = run(
        [
            sys.executable,
            str(ROOT / "evaluate.py"),
            "--recommenders",
            "popularity",
            "--episodes",
            "2",
            "--output-dir",
            str(tmp_path / "ev2"),
        ],
        tmp_path,
    )
    assert "| popularity |" in proc.stdout
