"""``recagent-gym train --engine rllib``: PPO on Ray RLlib with two env runners on a local Ray instance, then the
held-out evaluation of ``evaluate policies`` (the trained RLModule answering SB3's ``predict``). Skipped, with the
reason, where the ``[ray]`` extra is not installed; the missing-extra error is tested without Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ["user.model=recsim", "train.action=score", "train.total_timesteps=256", "train.n_envs=2",
            "train.n_steps=64", "train.batch_size=64", "train.eval_users=8", "train.eval_swapped=false",
            "train.n_bootstrap=200", "env.max_pages=5"]  # fmt: skip


def _cli(*argv: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "recagent_gym", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)  # fmt: skip


@pytest.mark.slow
def test_rllib_ppo_with_two_env_runners_trains_and_is_evaluated_on_held_out_users(tmp_path: Path) -> None:
    pytest.importorskip("ray.rllib", reason="the [ray] extra (Ray RLlib) is not installed")
    out = tmp_path / "run"
    overrides = [a for s in [*SETTINGS, f"train.output_dir={out}"] for a in ("--set", s)]
    done = _cli("train", "--config", "quickstart", "--engine", "rllib", "--num-env-runners", "2", *overrides,
                cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "env runners: 2)" in done.stdout
    assert "rllib ppo: iteration 2," in done.stdout  # 256 steps in batches of n_steps x n_envs = 128
    meta = json.loads((out / "policy.json").read_text())
    assert meta["engine"] == "rllib" and meta["timesteps"] >= 256 and meta["num_env_runners"] == 2
    assert (out / "rllib_checkpoint").is_dir()
    report = (out / "evaluation" / "policies.md").read_text()
    assert "8 held-out users" in report
    rows = {line.split("|")[1].strip(): line for line in report.splitlines() if line.startswith("| ")}
    assert {"random", "popularity", "ppo_rllib"} <= set(rows)

    # The saved RLModule acts on the raw env through SB3's predict: a page of distinct unseen items, deterministic.
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.make_env import catalogue_env
    from recagent_gym.runs.rllib.policy import RLlibPolicy

    config = load_config("quickstart", SETTINGS)
    env = catalogue_env(config.data.dataset, "recsim", config=config)
    policy = RLlibPolicy.load(out / "rllib_checkpoint", env, "score")
    obs, _ = env.reset(seed=3)
    page, state = policy.predict(obs, deterministic=True)
    again, _ = policy.predict(obs, deterministic=True)
    assert state is None and page.shape == (env.page_size,) and len(set(page.tolist())) == env.page_size
    assert np.array_equal(page, again) and env.action_space.contains(page)


@pytest.mark.slow
def test_engine_rllib_without_ray_is_one_line_exit_2(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"  # import ray raises ImportError, as without the extra
        "from recagent_gym.runs.cli import main\n"
        f"sys.exit(main(['train', '--engine', 'rllib', '--set', 'train.output_dir={tmp_path / 'run'}']))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'recagent-gym[ray]'" in lines[0], done.stderr
    assert not (tmp_path / "run").exists()  # nothing written


def test_rllib_settings_mirror_the_sb3_ppo() -> None:
    pytest.importorskip("ray.rllib", reason="the [ray] extra (Ray RLlib) is not installed")
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.rllib.training import ppo_config

    config = load_config("quickstart", SETTINGS)
    ppo = ppo_config(config, 2)
    assert ppo.num_env_runners == 2 and ppo.num_envs_per_env_runner == 1
    assert ppo.train_batch_size_per_learner == 128 and ppo.minibatch_size == 64
    assert ppo.lambda_ == 0.95 and ppo.clip_param == 0.2 and ppo.gamma == 0.99
    assert ppo.env == "recagent_gym/RecAgentCatalogue-v0"
    assert "api_keys" in ppo.env_config["config"]["llm"] and ppo.env_config["config"]["llm"]["api_keys"] == []


@pytest.mark.slow
def test_the_rllib_env_steps_in_gymnasiums_sync_vector_env_as_env_runners_do() -> None:
    """RLlib's env runners vectorize the registered env with Gymnasium's ``SyncVectorEnv``, which stacks each info
    key across envs: the env's info (``item`` an int in one env and None in another) is kept whole for it."""
    import gymnasium as gym

    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.rllib.env import StepInfo, env_config, make_env

    context = env_config(load_config("quickstart", SETTINGS))
    venv = gym.vector.SyncVectorEnv([lambda: make_env(context)] * 3)
    venv.reset(seed=0)
    items = set()
    for _ in range(20):
        *_, info = venv.step(venv.action_space.sample())
        steps = [s for s in info["recagent"] if s is not None]
        assert all(isinstance(s, StepInfo) for s in steps)
        items |= {s.info.get("item") is None for s in steps}
    assert items == {True, False}  # an item watched and none watched: the two kinds that failed when stacked
    venv.close()
