"""Configuration of RL training (stable-baselines3)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recagent_gym.section import Section


class TrainConfig(Section):
    algorithm: Literal["ppo", "a2c", "dqn"] = "ppo"
    """stable-baselines3 algorithm."""

    total_timesteps: int = Field(20_000, ge=1)
    """Environment steps to train for."""

    n_envs: int = Field(4, ge=1)
    """Parallel sub-environments."""

    learning_rate: float = Field(3e-4, gt=0.0)
    """Optimiser learning rate."""

    n_steps: int = Field(128, ge=1)
    """Rollout length per sub-environment (PPO/A2C)."""

    batch_size: int = Field(64, ge=1)
    """Minibatch size (PPO/DQN)."""

    torch_threads: int = Field(1, ge=1)
    """Torch threads; the policy networks here are small, where one thread is fastest."""

    seed: int = Field(0, ge=0)
    """Seed of training."""

    action: Literal["score", "genre", "page"] = "score"
    """Action wrapper the policy acts through: ``score`` (a query vector over item features, top-k by score),
    ``genre`` (one discrete genre per page; needed by DQN), or ``page`` (the raw MultiDiscrete page)."""

    n_eval_episodes: int = Field(50, ge=1)
    """Sessions per recommender in ``evaluate policies``."""

    checkpoint_every: int = Field(10_000, ge=1)
    """Save the policy every N environment steps."""

    output_dir: str = "runs"
    """Folder receiving TensorBoard logs, checkpoints, the dumped config and evaluation tables."""
