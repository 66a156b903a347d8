"""Train a stable-baselines3 policy on the RecAgent env (what ``train.py`` / ``recagent-gym train`` run).

Read top to bottom like a CleanRL script: seeding, environment, algorithm, learning, saving.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback
from stable_baselines3.common.vec_env import VecMonitor

from recagent_gym.data.schema import Dataset
from recagent_gym.envs.adapters import TRAINING_KEYS, ObsFlattener
from recagent_gym.envs.resolve import resolve_dataset
from recagent_gym.envs.vector import SB3VecEnv
from recagent_gym.envs.wrappers import page_adapter
from recagent_gym.runs.config import Config, ConfigError, dump_config
from recagent_gym.runs.make_env import catalogue_env, catalogue_vector_env
from recagent_gym.runs.output_folder import check_output_folder
from recagent_gym.runs.policies.callbacks import HeldOutEval, ProgressLine
from recagent_gym.runs.policies.evaluate_policies import EvalProtocol, PolicyRecommender, run_sessions
from recagent_gym.runs.policies.policy_files import ALGORITHMS, META_FILE, POLICY_FILE
from recagent_gym.runs.policies.protocol import split_users, training_dataset
from recagent_gym.users.prior_default import keep_weights

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainResult:
    output_dir: Path
    policy_path: Path
    timesteps: int
    seconds: float

    @property
    def steps_per_s(self) -> float:
        return self.timesteps / self.seconds if self.seconds > 0 else float("nan")


def _algorithm_kwargs(config: Config) -> dict[str, Any]:
    train = config.train
    if train.algorithm == "dqn":
        if train.action != "genre":
            raise ConfigError("train.algorithm=dqn needs a discrete action: set train.action=genre")
        return {"batch_size": train.batch_size, "learning_starts": min(1000, train.total_timesteps // 10)}
    kwargs: dict[str, Any] = {"n_steps": train.n_steps}
    if train.algorithm == "ppo":
        kwargs["batch_size"] = train.batch_size
    return kwargs


def train_policy(
    config: Config,
    *,
    dataset: Dataset | None = None,
    output_dir: str | Path | None = None,
    progress_bar: bool = True,
    llm: Any = None,
    embedder: Any = None,
) -> TrainResult:
    """Train ``config.train.algorithm`` on ``config.train.n_envs`` concurrent sessions; save policy and config."""
    train = config.train
    out = check_output_folder(output_dir if output_dir is not None else train.output_dir, "train.output_dir")

    # Seeding: one seed for SB3 (policy init, exploration) and the env (activation, users, LLM seeds).
    torch.set_num_threads(train.torch_threads)
    seed = train.seed

    # Users: a fixed split (its own seed, shared by every training seed); training never meets a held-out user.
    # Both are checked before the output folder is made, so a dataset too small to split leaves nothing behind.
    dataset = resolve_dataset(dataset, config)
    split = split_users(dataset.n_users, test_fraction=train.test_fraction, seed=train.split_seed)
    train_data = training_dataset(dataset, split.train)
    out.mkdir(parents=True, exist_ok=True)

    # Environment: the vector env steps all sessions together (one batch per step for LLM users).
    venv = catalogue_vector_env(
        train.n_envs,
        train_data,
        config.user.model,
        config=config,
        action=train.action,
        flatten=True,
        llm=llm,
        embedder=embedder,
    )
    env = VecMonitor(SB3VecEnv(venv))
    env.seed(seed)

    # Algorithm.
    algorithm = ALGORITHMS[train.algorithm]
    model = algorithm(
        "MlpPolicy",
        env,
        learning_rate=train.learning_rate,
        seed=seed,
        device="cpu",
        tensorboard_log=str(out / "tensorboard"),
        verbose=0,
        **_algorithm_kwargs(config),
    )

    # Learning, with periodic checkpoints, a progress line with the episode return (readable in a log file; the
    # progress bar only on a terminal), and the held-out learning curve when asked for.
    callbacks: list[BaseCallback] = [
        CheckpointCallback(
            save_freq=max(train.checkpoint_every // train.n_envs, 1),
            save_path=str(out / "checkpoints"),
            name_prefix=train.algorithm,
        ),
        ProgressLine(train.total_timesteps, every=train.log_every, every_s=train.log_every_s),
    ]
    if train.eval_every > 0:
        callbacks.append(_held_out_eval(config, dataset, split.test, out, llm=llm, embedder=embedder))
    (out / "config.yaml").write_text(dump_config(config), encoding="utf-8")
    if config.user.model == "llm":  # the run folder keeps the behavioural prior's weights the agents use
        keep_weights(config, dataset, out, llm=llm)
    start = time.perf_counter()
    model.learn(
        total_timesteps=train.total_timesteps,
        callback=callbacks,
        progress_bar=progress_bar and sys.stderr.isatty(),
    )
    seconds = time.perf_counter() - start

    # Saving: the policy, and what evaluation needs to act with it (action kind, observation keys).
    policy_path = out / POLICY_FILE
    model.save(policy_path)
    meta = {
        "algorithm": train.algorithm,
        "action": train.action,
        "observation_keys": list(TRAINING_KEYS),
        "page_size": venv.face.page_size,
        "dataset": dataset.name,
        "n_items": dataset.n_items,
        "user_model": config.user.model,
        "split_seed": train.split_seed,
        "test_fraction": train.test_fraction,
        "train_users": len(split.train),
        "timesteps": int(model.num_timesteps),
        "seconds": seconds,
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    env.close()
    logger.info(
        "trained %s for %d steps in %.1fs (%.0f steps/s) -> %s",
        train.algorithm,
        model.num_timesteps,
        seconds,
        model.num_timesteps / max(seconds, 1e-9),
        policy_path,
    )
    return TrainResult(out, policy_path, int(model.num_timesteps), seconds)


def _held_out_eval(
    config: Config, dataset: Dataset, test_users: Any, out: Path, *, llm: Any, embedder: Any
) -> HeldOutEval:
    """The learning-curve callback on a separate single env over the full dataset (held-out users only)."""

    train = config.train
    env = catalogue_env(dataset, config.user.model, config=config, llm=llm, embedder=embedder)
    protocol = EvalProtocol(users=test_users[: train.eval_curve_users], seed=train.split_seed, swapped=False)
    flattener = ObsFlattener(env.observation_space, TRAINING_KEYS)
    adapter = page_adapter(train.action, env)

    def evaluate(model: Any) -> Any:
        return run_sessions(PolicyRecommender(model, adapter, flattener, env), env, protocol).returns.mean(axis=1)

    return HeldOutEval(evaluate, eval_every=train.eval_every, output_dir=out, n_boot=train.n_bootstrap, seed=train.seed)
