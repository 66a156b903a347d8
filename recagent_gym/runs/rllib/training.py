"""PPO on Ray RLlib's current API stack over the project's env (``recagent-gym train --engine rllib``).

Read top to bottom as the SB3 trainer (:mod:`recagent_gym.runs.policies.training`): Ray, seeding, environment,
algorithm, learning, saving; then the held-out evaluation of ``evaluate policies``
(:mod:`recagent_gym.runs.rllib.report`). PPO's settings follow stable-baselines3's defaults where RLlib's differ
(GAE lambda 0.95, clip 0.2, value loss 0.5, no KL penalty, two tanh layers of 64 for policy and value apart), and
the rollout per update is SB3's ``n_steps x n_envs``, so the two engines train the same learner on the same env.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recagent_gym.envs.resolve import resolve_dataset
from recagent_gym.runs.config import Config, dump_config
from recagent_gym.runs.output_folder import check_output_folder
from recagent_gym.runs.policies.policy_files import META_FILE
from recagent_gym.runs.policies.protocol import split_users, training_dataset
from recagent_gym.runs.rllib import env as rllib_env
from recagent_gym.runs.rllib.policy import flatten_connector

logger = logging.getLogger(__name__)

CHECKPOINT_DIR = "rllib_checkpoint"
SB3_PPO: dict[str, Any] = {
    "lambda_": 0.95, "clip_param": 0.2, "vf_loss_coeff": 0.5, "entropy_coeff": 0.0, "use_kl_loss": False,
    "num_epochs": 10, "grad_clip": 0.5, "vf_clip_param": math.inf,
}  # fmt: skip
"""stable-baselines3's PPO defaults in RLlib's names."""


@dataclass(frozen=True)
class RLlibRun:
    """Where the run went and how fast it sampled."""

    output_dir: Path
    checkpoint: Path
    timesteps: int
    seconds: float
    iterations: int
    num_env_runners: int

    @property
    def steps_per_s(self) -> float:
        return self.timesteps / self.seconds if self.seconds > 0 else float("nan")


def start_ray(address: str | None, *, num_cpus: int | None = None, object_store_mb: int = 200) -> bool:
    """Join the cluster at ``address`` (``auto``, ``ray://host:10001``, ``host:6379``) or start a small local
    instance (no dashboard; ``num_cpus``: the CPUs Ray schedules on). True when this call connected Ray (the caller
    then shuts it down); False when Ray was already up (a notebook's, a test's)."""
    ray = rllib_env.require_ray()
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, object_store_memory=object_store_mb * 2**20,
                 log_to_driver=False)  # fmt: skip
    return True


def ppo_config(config: Config, num_env_runners: int) -> Any:
    """RLlib's ``PPOConfig`` for ``config.train`` with ``num_env_runners`` env runners (0: sample in the driver)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    train = config.train
    runners = max(num_env_runners, 1)
    envs_per_runner = max(1, train.n_envs // runners)
    return (
        PPOConfig()
        .environment(rllib_env.ENV_NAME, env_config=rllib_env.env_config(config))
        .framework("torch")
        .env_runners(
            num_env_runners=num_env_runners,
            num_envs_per_env_runner=envs_per_runner,
            num_cpus_per_env_runner=1,
            rollout_fragment_length="auto",
            env_to_module_connector=env_to_module,
        )
        .learners(num_learners=0)
        .training(
            lr=train.learning_rate,
            gamma=0.99,
            train_batch_size_per_learner=train.n_steps * train.n_envs,
            minibatch_size=min(train.batch_size, train.n_steps * train.n_envs),
            **SB3_PPO,
        )
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], fcnet_activation="tanh"))
        .debugging(seed=train.seed, log_level="ERROR")
    )


def env_to_module(env: Any = None, spaces: Any = None, device: Any = None) -> Any:
    """The env runners' connector piece (RLlib calls it with the vector env and its spaces): the ``Dict``
    observation flattened, raw ids removed."""
    observation_space, action_space = spaces["__env_single__"] if spaces else (
        env.single_observation_space, env.single_action_space)  # fmt: skip
    return flatten_connector(observation_space, action_space)


def _sampled(result: dict[str, Any]) -> int:
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    value = result.get(NUM_ENV_STEPS_SAMPLED_LIFETIME) or result.get(ENV_RUNNER_RESULTS, {}).get(
        NUM_ENV_STEPS_SAMPLED_LIFETIME, 0
    )
    return int(value)


def _episode_return(result: dict[str, Any]) -> float:
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN

    return float(result.get(ENV_RUNNER_RESULTS, {}).get(EPISODE_RETURN_MEAN, float("nan")))


def train_rllib(
    config: Config,
    *,
    num_env_runners: int = 2,
    address: str | None = None,
    output_dir: str | Path | None = None,
    num_cpus: int | None = None,
    progress: Any = print,
) -> RLlibRun:
    """Train PPO for ``train.total_timesteps`` env steps; save the algorithm checkpoint, config and ``policy.json``."""
    train = config.train
    out = check_output_folder(output_dir if output_dir is not None else train.output_dir, "train.output_dir")

    # Ray: a local instance, or the cluster at ``address``; the env registered with Ray's registry.
    # Each env runner asks for one CPU: a local instance offers at least that many, however few cores there are.
    started = start_ray(address, num_cpus=num_cpus or max(os.cpu_count() or 1, num_env_runners))
    rllib_env.register()

    # The users split as in the SB3 path (checked before the folder is made); the driver's env gives the spaces.
    dataset = resolve_dataset(None, config)
    split = split_users(dataset.n_users, test_fraction=train.test_fraction, seed=train.split_seed)
    probe = rllib_env.build_env(config, training_dataset(dataset, split.train))
    flatten_connector(probe.observation_space, probe.action_space)  # fails here, not in a remote actor
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(dump_config(config), encoding="utf-8")

    # Algorithm, then learning until the env runners sampled ``total_timesteps`` steps.
    algo = ppo_config(config, num_env_runners).build_algo()
    probe.close()
    sampled, iterations, start = 0, 0, time.perf_counter()
    while sampled < train.total_timesteps:
        result = algo.train()
        iterations += 1
        sampled = _sampled(result)
        seconds = time.perf_counter() - start
        progress(f"rllib ppo: iteration {iterations}, {sampled} steps, {sampled / seconds:.0f} steps/s, "
                 f"episode return {_episode_return(result):.3f}")  # fmt: skip
    seconds = time.perf_counter() - start

    # Saving: the algorithm checkpoint (its RLModule is what evaluation loads) and what evaluation needs beside it.
    checkpoint = out / CHECKPOINT_DIR
    algo.save(str(checkpoint.resolve()))
    algo.stop()
    if started:
        rllib_env.require_ray().shutdown()
    meta = {
        "engine": "rllib",
        "algorithm": "ppo",
        "action": train.action,
        "checkpoint": CHECKPOINT_DIR,
        "dataset": dataset.name,
        "n_items": dataset.n_items,
        "user_model": config.user.model,
        "split_seed": train.split_seed,
        "test_fraction": train.test_fraction,
        "train_users": len(split.train),
        "timesteps": sampled,
        "seconds": seconds,
        "num_env_runners": num_env_runners,
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    logger.info("trained rllib ppo for %d steps in %.1fs -> %s", sampled, seconds, checkpoint)
    return RLlibRun(out, checkpoint, sampled, seconds, iterations, num_env_runners)
