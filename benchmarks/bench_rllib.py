"""RLlib PPO with 1 and 2 env runners against stable-baselines3's single process, on RecSim-style and distilled users.

    python benchmarks/bench_rllib.py [--users recsim,distilled] [--runners 1,2] [--steps 4096]

The env is what ``recagent-gym train`` steps (``recagent_gym/RecAgentCatalogue-v0``, the quickstart's settings with
``train.action=score``), 4 sessions per update rollout of 128 steps each (``train.n_envs=4``, ``train.n_steps=128``;
RLlib: 4 envs spread over its runners), the same PPO on both engines (:mod:`recagent_gym.runs.rllib.training`).
Printed per users and engine:

- ``train``: env steps per second of ``--steps`` steps of PPO (sampling and the updates, which PPO runs one after
  the other), after setup (Ray's start and the actors' creation, printed apart);
- ``sample``: env steps per second of sampling alone with the current policy (RLlib: every remote env runner samples
  ``--steps / runners`` steps at once; SB3: the project's vector env stepped with the policy's actions in one process).

Not a timed test; on a shared machine the figures move with its load (printed first).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

SETTINGS = ["train.action=score", "train.n_envs=4", "train.n_steps=128", "train.batch_size=64", "env.max_pages=5",
            "train.checkpoint_every=1000000"]  # fmt: skip


def sb3(config: object, steps: int) -> tuple[float, float]:
    """(train steps/s, sample steps/s) of SB3's PPO in this process."""
    import tempfile

    import numpy as np

    from recagent_gym.runs.policies.training import train_policy

    with tempfile.TemporaryDirectory() as out:
        result = train_policy(config, output_dir=out, progress_bar=False)
        from stable_baselines3 import PPO

        from recagent_gym.envs.vector import SB3VecEnv
        from recagent_gym.runs.make_env import catalogue_vector_env

        model = PPO.load(result.policy_path, device="cpu")
        venv = SB3VecEnv(catalogue_vector_env(4, config.data.dataset, config.user.model, config=config,
                                              action="score", flatten=True))  # fmt: skip
        obs = venv.reset()
        start = time.perf_counter()
        for _ in range(steps // 4):
            action, _ = model.predict(obs, deterministic=False)
            obs, _, _, _ = venv.step(np.asarray(action))
        sample = steps / (time.perf_counter() - start)
        venv.close()
    return result.steps_per_s, sample


def rllib(config: object, runners: int, steps: int) -> tuple[float, float, float]:
    """(setup s, train steps/s, sample steps/s) of RLlib's PPO with ``runners`` env runners."""
    import ray

    from recagent_gym.runs.rllib import env as rllib_env
    from recagent_gym.runs.rllib.training import ppo_config

    begin = time.perf_counter()
    ray.init(num_cpus=max(os.cpu_count() or 1, runners), include_dashboard=False,
             object_store_memory=200 * 2**20, log_to_driver=False)  # fmt: skip
    rllib_env.register()
    algo = ppo_config(config, runners).build_algo()
    setup = time.perf_counter() - begin
    sampled, start = 0, time.perf_counter()
    while sampled < steps:
        result = algo.train()
        sampled = int(result["env_runners"]["num_env_steps_sampled_lifetime"])
    train = sampled / (time.perf_counter() - start)
    per_runner = steps // runners
    start = time.perf_counter()
    batches = algo.env_runner_group.foreach_env_runner(
        lambda runner: sum(len(e) for e in runner.sample(num_timesteps=per_runner)), local_env_runner=False
    )
    sample = sum(batches) / (time.perf_counter() - start)
    algo.stop()
    ray.shutdown()
    return setup, train, sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", default="recsim,distilled")
    parser.add_argument("--runners", default="1,2")
    parser.add_argument("--steps", type=int, default=4096)
    parser.add_argument("--skip-sb3", action="store_true")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from recagent_gym.runs.config import load_config

    print(f"load {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs; {args.steps} PPO steps per setting")
    for users in args.users.split(","):
        config = load_config("quickstart", [*SETTINGS, f"user.model={users}", f"train.total_timesteps={args.steps}"])
        if not args.skip_sb3:
            train, sample = sb3(config, args.steps)
            line = f"{users:<10} sb3, 1 process     : train {train:7.0f} steps/s, sample {sample:7.0f} steps/s"
            print(line, flush=True)
        for runners in (int(r) for r in args.runners.split(",")):
            setup, train, sample = rllib(config, runners, args.steps)
            print(f"{users:<10} rllib, {runners} env runner(s): train {train:7.0f} steps/s, sample {sample:7.0f} "
                  f"steps/s (setup {setup:.0f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
