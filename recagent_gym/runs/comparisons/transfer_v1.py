"""``users transfer`` on RecAgent-v1 (``train.transfer_env: v1``): candidates, item features, item-scoring PPO.

The policy is :mod:`recagent_gym.policies.item_scoring`'s PPO, trained on the distilled users of the training split
(one per seed, as in ``evaluate rl-comparison``); the baselines (random, popularity, quality-greedy, MF) choose
among the same retrieved candidates (``train.candidate_mix``; ``{random: 1.0}`` is RecSim's uniformly sampled
candidates). Every
user model's env shares one retriever and the distilled env's item features: the LLM users' env would otherwise
describe items by their genres only (the LLM agents expose no item vectors), and the policy must see the
observation it was trained on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.config import Config
from recagent_gym.runs.make_env import SharedCandidates

CURVE_USERS = 20
"""Held-out users of the learning curve during training (distilled users: cheap)."""


def train_v1(
    config: Config,
    dataset: Dataset,
    out: Path,
    seeds: Sequence[int],
    shared: SharedCandidates,
    train_users: np.ndarray,
    say: Callable[[str], None],
) -> list[Path]:
    """One item-scoring PPO per seed on the distilled users of ``train_users``; their ``policy.zip`` paths (with a
    ``policy.json`` beside each and a held-out learning curve on distilled users)."""
    import json

    import torch

    from recagent_gym.runs.comparisons.rl_comparison import learner_steps, train_item_scoring
    from recagent_gym.runs.policies.callbacks import HeldOutEval
    from recagent_gym.runs.policies.evaluate_policies import EvalProtocol, run_sessions

    torch.set_num_threads(config.train.torch_threads)
    cfg = config.model_copy(deep=True)
    cfg.user.model = "distilled"
    curve_users = shared.env.users[:CURVE_USERS]
    protocol = EvalProtocol(users=curve_users, seed=cfg.train.split_seed, swapped=False)
    steps = learner_steps(cfg, "ppo")
    paths = []
    for seed in seeds:
        folder = out / f"policy-seed{seed}"
        say(f"training PPO (item scoring, RecAgent-v1) on distilled users, seed {seed}: {steps} steps")
        curve = HeldOutEval(
            lambda model: run_sessions(model, shared.env, protocol).returns.mean(axis=1),
            eval_every=max(steps // 4, 1),
            output_dir=folder,
        )
        model = train_item_scoring("ppo", cfg, dataset, train_users, int(seed), curve, shared.retriever)
        model.save(folder / "policy.zip")
        meta = {"algorithm": "ppo", "env": "RecAgent-v1", "policy": "ItemScoringPolicy",
                "timesteps": int(model.num_timesteps),
                "user_model": "distilled", "seed": int(seed), "candidate_mix": cfg.train.candidate_mix}  # fmt: skip
        (folder / "policy.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
        paths.append(folder / "policy.zip")
    return paths


def recommenders_v1(env: Any, policies: Sequence[Path], seed: int) -> dict[str, list[Any]]:
    """The baselines among the env's candidates and the trained policies (one per seed), by report name."""
    from recagent_gym.policies.candidate_baselines import (
        MFCandidates,
        PopularCandidates,
        QualityCandidates,
        RandomCandidates,
    )

    return {
        "random": [RandomCandidates(env, seed=seed)],
        "popularity": [PopularCandidates(env)],
        "quality-greedy": [QualityCandidates(env)],
        "mf": [MFCandidates(env)],
        "policy": [load_v1(p, env) for p in policies],
    }


def load_v1(path: Path, env: Any) -> Any:
    """A RecAgent-v1 item-scoring PPO (``policy.json`` beside it says so), checked against ``env``'s spaces."""
    from recagent_gym.runs.policies.policy_files import PolicyError, load_policy, read_meta, trained_env

    meta = read_meta(path)
    if trained_env(meta) != "RecAgent-v1":
        raise PolicyError(
            f"{path}: trained on {trained_env(meta)}, but this transfer runs RecAgent-v1 (train.transfer_env=v1); "
            "give a policy of 'users transfer' on v1, or set train.transfer_env=v0"
        )
    return load_policy(path, "ppo", observation_space=env.observation_space, action_space=env.action_space)
