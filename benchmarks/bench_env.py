"""Env steps per second with the RecSim-style user: single env (raw and through gymnasium.make) and vector form,
and the kernel's own cost per step (a constant user that costs next to nothing).

.venv/bin/python benchmarks/bench_env.py [--steps 50000]

Each line also gives the fastest chunk of 20 steps (``best``, in µs per step): on a shared machine the mean
throughput swings with the load, the fastest chunk much less, so compare versions by it there.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import recagent_gym  # noqa: F401  (registers the env)
from recagent_gym.data.load import load_dataset
from recagent_gym.envs import ENV_ID
from recagent_gym.runs.make_env import catalogue_env, catalogue_vector_env
from recagent_gym.users.protocol import Action, Context, Page, Response


class ConstantUser:
    """Watches the first item of every page (4 stars) until ``max_pages``: every kernel phase runs (duplicate rule,
    watch, observation, restart), and the user itself costs a dict look-up, so the figure is the kernel's."""

    social = False

    def __init__(self) -> None:
        self._answers: dict[int, Response] = {}

    def _answer(self, item: int) -> Response:
        answer = self._answers.get(item)
        if answer is None:
            answer = self._answers[item] = Response(Action.WATCH, item=item, rating=4.0)
        return answer

    def respond(self, page: Page, context: Context, rng: np.random.Generator) -> Response:
        return self._answer(page.items[0])

    def respond_batch(self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[Any]) -> list[Response]:
        return [self._answer(page.items[0]) for page, _ in requests]

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        pass

    def end_sessions(self, user_ids: Sequence[int]) -> None:
        pass

    def write_ended(self, *, at_least: int = 1) -> list[int]:
        return []

    def social_round(self, rng: np.random.Generator, time_h: float, incoming: Sequence[int]) -> list[dict[str, Any]]:
        return []

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        return np.zeros(len(items))

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


CHUNK = 20
"""Steps per timed chunk (the ``best`` figure is the fastest chunk)."""


def single(env: gym.Env, actions: np.ndarray) -> tuple[float, float]:
    """Steps per second over ``actions``, and the fastest chunk's µs per step."""
    env.reset(seed=0)
    best = float("inf")
    start = time.perf_counter()
    for first in range(0, len(actions), CHUNK):
        chunk_start = time.perf_counter()
        for action in actions[first : first + CHUNK]:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        best = min(best, (time.perf_counter() - chunk_start) / len(actions[first : first + CHUNK]))
    return len(actions) / (time.perf_counter() - start), best * 1e6


def vector(num_envs: int, dataset, steps: int, user_model: Any = "recsim") -> tuple[float, float]:
    """Sub-env steps per second, and the fastest chunk's µs per sub-env step."""
    venv = catalogue_vector_env(num_envs, dataset, user_model)
    venv.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, dataset.n_items, size=(steps // num_envs, num_envs, 5))
    per_chunk = max(1, CHUNK // num_envs)
    best = float("inf")
    start = time.perf_counter()
    for first in range(0, len(actions), per_chunk):
        chunk_start = time.perf_counter()
        for action in actions[first : first + per_chunk]:
            venv.step(action)
        best = min(best, (time.perf_counter() - chunk_start) / (len(actions[first : first + per_chunk]) * num_envs))
    return actions.shape[0] * num_envs / (time.perf_counter() - start), best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=50_000)
    args = parser.parse_args()
    dataset = load_dataset("bundled")
    actions = np.random.default_rng(0).integers(0, dataset.n_items, size=(args.steps, 5))
    print(f"dataset: {dataset.name} ({dataset.n_users} users, {dataset.n_items} items), random pages of 5")
    raw = single(catalogue_env(dataset, "recsim"), actions)
    made = single(gym.make(ENV_ID, dataset=dataset, user_model="recsim"), actions)
    print(f"RecAgentEnv (raw)          : {raw[0]:9.0f} steps/s (best {raw[1]:5.1f} us/step)")
    print(f"gymnasium.make (wrappers)  : {made[0]:9.0f} steps/s (best {made[1]:5.1f} us/step)")
    print()
    for n in (4, 16):
        rate, best = vector(n, dataset, args.steps)
        print(f"RecAgentVectorEnv x{n:<2}      : {rate:9.0f} steps/s (best {best:5.1f} us/step; all sub-envs)")
    print()
    rate, best = single(catalogue_env(dataset, ConstantUser()), actions)
    print(f"kernel only (constant user): {rate:9.0f} steps/s = {1e6 / rate:5.1f} us/step (best {best:5.1f}; raw env)")
    rate, best = vector(16, dataset, args.steps, ConstantUser())
    print(f"kernel only, vector x16    : {rate:9.0f} steps/s = {1e6 / rate:5.1f} us/step (best {best:5.1f}; sub-env)")


if __name__ == "__main__":
    main()
