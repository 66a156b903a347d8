"""The distilled users shipped for the bundled dataset: plain data, documented provenance, usable by name."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import recagent_gym  # noqa: F401  (registers the env)
from recagent_gym.envs import ENV_ID
from recagent_gym.users.distilled.user import BUNDLED_DIR


def test_shipped_model_has_provenance_and_report():
    meta = json.loads((BUNDLED_DIR / "model.json").read_text())
    assert meta["dataset"].startswith("ml-latest-small") and len(meta["logs_hash"]) == 64
    assert meta["logs"]["model"] and meta["logs"]["sessions"] > 0
    assert set(meta["train_users"]).isdisjoint(meta["test_users"])
    for name in ("fidelity.md", "fidelity.csv", "ranking.csv", "fidelity.png", "README.md"):
        assert (BUNDLED_DIR / name).is_file(), name
    with np.load(BUNDLED_DIR / "weights.npz", allow_pickle=False) as weights:
        assert weights["item_table"].shape[0] == meta["n_items"]


@pytest.mark.slow
def test_make_and_make_vec_with_the_shipped_model():
    env = gym.make(ENV_ID, dataset="bundled", user_model="distilled")
    env.reset(seed=0)
    for _ in range(20):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    venv = gym.make_vec(ENV_ID, num_envs=4, dataset="bundled", user_model="distilled")
    venv.reset(seed=0)
    for _ in range(10):
        venv.step(venv.action_space.sample())
