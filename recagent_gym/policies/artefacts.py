"""What a trained policy folder holds: the SB3 algorithms by name and the file names (shared by training and
evaluation, so neither imports the other for them)."""

from __future__ import annotations

from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.base_class import BaseAlgorithm

ALGORITHMS: dict[str, type[BaseAlgorithm]] = {"ppo": PPO, "a2c": A2C, "dqn": DQN}
POLICY_FILE = "policy.zip"
META_FILE = "policy.json"
