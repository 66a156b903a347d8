"""Issue 16: the distilled model is never fitted on the RL protocol's held-out users (``FitSettings.split``), so the
transfer's held-out users are held out of both the policy and the model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.runs.distill.fit import distill, policy_split
from recagent_gym.runs.distill.objective import FitSettings
from recagent_gym.runs.policies.protocol import split_users as rl_split
from recagent_gym.users.distilled.errors import DistillError
from tests._agent_fixtures import make_config, tiny_dataset
from tests._distilled_fixtures import tiny_logs


def test_the_policy_split_holds_out_the_rl_test_users(tmp_path) -> None:
    dataset, config = tiny_dataset(), make_config()
    logs_dir = tiny_logs(tmp_path / "logs")
    out = tmp_path / "model"
    distill(logs_dir, dataset, config, out, settings=FitSettings(epochs=2), embedder=HashingEmbedder(32))
    meta = json.loads((out / "model.json").read_text())
    held_out = set(
        rl_split(dataset.n_users, test_fraction=config.train.test_fraction, seed=config.train.split_seed).test
    )
    assert meta["train_users"] and meta["test_users"]
    assert not held_out & set(meta["train_users"])  # never fitted on a user the policy is evaluated on
    assert set(meta["test_users"]) <= held_out


def test_the_own_split_is_a_fraction_of_the_logged_users(tmp_path) -> None:
    dataset, config = tiny_dataset(), make_config()
    logs_dir = tiny_logs(tmp_path / "logs")
    out = tmp_path / "model"
    settings = FitSettings(epochs=2, split="own", test_fraction=0.5)
    distill(logs_dir, dataset, config, out, settings=settings, embedder=HashingEmbedder(32))
    meta = json.loads((out / "model.json").read_text())
    n = len(meta["train_users"]) + len(meta["test_users"])
    assert abs(len(meta["test_users"]) - n / 2) <= 1


def test_a_split_with_nobody_to_test_is_a_clear_error() -> None:
    dataset, config = tiny_dataset(), make_config()
    train = rl_split(dataset.n_users, test_fraction=config.train.test_fraction, seed=config.train.split_seed).train
    with pytest.raises(DistillError, match="no held-out logged user"):
        policy_split(np.asarray(train), dataset, config)
