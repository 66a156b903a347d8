"""Steps per second with distilled LLM users: the user model alone and the vector env (RecSim beside, same run).

Wall-clock rates depend on what else runs on the machine; the rate per CPU-second of this process
(``time.process_time``) is printed beside them as the less contention-dependent figure.

PYTHONPATH=. .venv/bin/python benchmarks/bench_env_distilled.py [--steps 20000] [--model FOLDER]

``--model`` defaults to the distilled model shipped for the bundled dataset. ``--random-weights`` times an
untrained model of the same shapes instead (the speed does not depend on the weights), for checkouts without one.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from recagent_gym.data.load import load_dataset
from recagent_gym.runs.config import Config
from recagent_gym.runs.make_env import catalogue_vector_env
from recagent_gym.users.distilled.saved_model import FORMAT, Artefact
from recagent_gym.users.distilled.user import BUNDLED_DIR, DistilledUser
from recagent_gym.users.protocol import Context, Page


def random_artefact(n_users: int, n_items: int, folder: Path, dim: int = 32) -> Path:
    rng = np.random.default_rng(0)
    arrays = {
        "user_table": rng.standard_normal((n_users, dim)).astype(np.float32),
        "item_table": rng.standard_normal((n_items, dim)).astype(np.float32) / dim,
        "item_offset": np.zeros(n_items, np.float32),
        "threshold": np.full(n_users, 1.5),
        "search_interest": np.full(n_users, 0.05),
    }
    rule = {"patience": 3.0, "temperature": 1.0, "search_heard_probability": 0.3, "noise_std": 1.0}
    meta = {"format": FORMAT, "dataset": "random", "n_users": n_users, "n_items": n_items,
            "rule": {**rule, "rating_intercept": 3.0, "rating_slope": 0.5},
            "interest_queries": ["movies"] * n_users}  # fmt: skip
    Artefact(arrays, meta).save(folder)
    return folder


def users_alone(user: DistilledUser, n_users: int, n_items: int, steps: int, batch: int) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    rngs = [np.random.default_rng(k) for k in range(batch)]
    users = rng.choice(n_users, batch, replace=False)
    pages = rng.integers(0, n_items, size=(steps // batch, batch, 5))
    for u, r in zip(users, rngs, strict=True):
        user.start_session(int(u), r)
    start, cpu = time.perf_counter(), time.process_time()
    for step_pages in pages:
        requests = [(Page(tuple(p.tolist())), Context(user_id=int(u))) for p, u in zip(step_pages, users, strict=True)]
        for response, u, r in zip(user.respond_batch(requests, rngs), users, rngs, strict=True):
            if response.action.name == "LEAVE":
                user.start_session(int(u), r)
    n = pages.shape[0] * batch
    return n / (time.perf_counter() - start), n / (time.process_time() - cpu)


def vector(num_envs: int, dataset, kind: str, config: Config, steps: int) -> tuple[float, float]:
    venv = catalogue_vector_env(num_envs, dataset, kind, config=config)
    venv.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, dataset.n_items, size=(steps // num_envs, num_envs, 5))
    start, cpu = time.perf_counter(), time.process_time()
    for action in actions:
        venv.step(action)
    n = actions.shape[0] * num_envs
    return n / (time.perf_counter() - start), n / (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--model", default=str(BUNDLED_DIR))
    parser.add_argument("--random-weights", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dataset = load_dataset("bundled")
    model = args.model
    if args.random_weights:
        model = str(random_artefact(dataset.n_users, dataset.n_items, Path("/tmp/bench-distilled-random")))
    config = Config.model_validate({"user": {"distilled_path": model}})
    print(f"dataset: {dataset.name} ({dataset.n_users} users, {dataset.n_items} items), random pages of 5")
    print(f"model: {model}{' (random weights: timing only)' if args.random_weights else ''}")
    user = DistilledUser(dataset, model)
    for batch in (1, 16):
        rate, per_cpu = users_alone(user, dataset.n_users, dataset.n_items, args.steps, batch)
        print(f"DistilledUser.respond_batch x{batch:<2}  : {rate:9.0f} decisions/s  ({per_cpu:9.0f} per CPU-second)")
    for n in (4, 16):
        for kind in ("distilled", "recsim"):
            rate, per_cpu = vector(n, dataset, kind, config, args.steps)
            print(f"RecAgentVectorEnv x{n:<2} {kind:9}: {rate:9.0f} steps/s      ({per_cpu:9.0f} per CPU-second)")


if __name__ == "__main__":
    main()
