"""RecAgent-v1 speed: env steps/s (RecSim users; single env and the batched vector env x4) and the item-scoring
network's update at 1 and 2 torch threads. With LLM users: ``bench_env_v1_vector.py``.

    python benchmarks/bench_rl_v1.py --steps 2000

Prints its figures; not a timed test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from recagent_gym.policies.item_scoring import CandidateScorer
from recagent_gym.runs.make_env import candidates_env, candidates_vector_env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--updates", type=int, default=200)
    args = parser.parse_args()

    start = time.perf_counter()
    env = candidates_env("bundled", "recsim", social=False)
    print(f"construction: {time.perf_counter() - start:.1f}s")
    obs, _ = env.reset(seed=0)
    observations = []
    start = time.perf_counter()
    for _ in range(args.steps):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        observations.append(obs)
        if terminated or truncated:
            obs, _ = env.reset()
    print(f"env: {args.steps / (time.perf_counter() - start):.0f} steps/s (random scores, RecSim users)")
    venv = candidates_vector_env(4, env.dataset, "recsim", social=False, retriever=env.retriever)
    venv.reset(seed=0)
    actions = np.random.default_rng(0).uniform(-1, 1, (args.steps // 4, 4, env.n_candidates)).astype(np.float32)
    start = time.perf_counter()
    for action in actions:
        venv.step(action)
    print(f"vector env x4: {len(actions) * 4 / (time.perf_counter() - start):.0f} user steps/s (same)")

    batch = {k: torch.as_tensor(np.stack([o[k] for o in observations[:64]])) for k in obs}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        scorer = CandidateScorer(env.observation_space)
        optimiser = torch.optim.Adam(scorer.parameters(), lr=1e-3)
        start = time.perf_counter()
        for _ in range(args.updates):
            scores, _ = scorer(batch)
            loss = scores.square().mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        per = (time.perf_counter() - start) / args.updates * 1000
        print(f"scorer update (batch 64 x 50 candidates), {threads} torch thread(s): {per:.2f} ms")


if __name__ == "__main__":
    main()
