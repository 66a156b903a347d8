"""Env steps per second with the RecSim-style user: single env (raw and through gymnasium.make) and vector form.

.venv/bin/python benchmarks/bench_env.py [--steps 50000]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import recagent_gym  # noqa: F401  (registers the env)
from recagent_gym.data.load import load_dataset
from recagent_gym.envs import ENV_ID
from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.envs.vector import RecAgentVectorEnv


def single(env: gym.Env, actions: np.ndarray) -> float:
    env.reset(seed=0)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return len(actions) / (time.perf_counter() - start)


def vector(num_envs: int, dataset, steps: int) -> float:
    venv = RecAgentVectorEnv(num_envs, dataset, "recsim")
    venv.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, dataset.n_items, size=(steps // num_envs, num_envs, 5))
    start = time.perf_counter()
    for action in actions:
        venv.step(action)
    return actions.shape[0] * num_envs / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=50_000)
    args = parser.parse_args()
    dataset = load_dataset("bundled")
    actions = np.random.default_rng(0).integers(0, dataset.n_items, size=(args.steps, 5))
    print(f"dataset: {dataset.name} ({dataset.n_users} users, {dataset.n_items} items), random pages of 5")
    raw = single(RecAgentEnv(dataset, "recsim"), actions)
    made = single(gym.make(ENV_ID, dataset=dataset, user_model="recsim"), actions)
    print(f"RecAgentEnv (raw)          : {raw:9.0f} steps/s")
    print(f"gymnasium.make (wrappers)  : {made:9.0f} steps/s")
    print()
    for n in (4, 16):
        print(f"RecAgentVectorEnv x{n:<2}      : {vector(n, dataset, args.steps):9.0f} steps/s (all sub-envs)")


if __name__ == "__main__":
    main()
