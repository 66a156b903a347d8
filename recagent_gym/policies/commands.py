"""``recagent-gym train`` and ``recagent-gym evaluate policies``."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from recagent_gym.cli import add_config_arguments
from recagent_gym.config import Config, ConfigError, load_config
from recagent_gym.config.loader import read_config_file

logger = logging.getLogger(__name__)

USER_MODELS = ("recsim", "embedding", "llm")


def _config(args: argparse.Namespace, extra: list[str]) -> Config:
    return load_config(args.config, [*args.overrides, *extra])


def register(subparsers: Any) -> None:
    """Add ``train``."""
    parser = subparsers.add_parser("train", help="train an RL recommender (SB3 PPO/A2C/DQN) on the env")
    add_config_arguments(parser)
    parser.add_argument(
        "--user-model",
        choices=USER_MODELS,
        default=None,
        help="user model (default: recsim unless the config sets user.model)",
    )
    parser.add_argument("--algorithm", choices=("ppo", "a2c", "dqn"), default=None)
    parser.add_argument(
        "--action",
        choices=("score", "genre", "page"),
        default=None,
        help="action wrapper: score (query vector), genre (discrete, DQN) or page (raw)",
    )
    parser.add_argument("--total-timesteps", type=int, default=None)
    parser.add_argument("--n-envs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--output-dir", default=None, help="folder for logs, checkpoints and the policy")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_train)


def train_overrides(args: argparse.Namespace) -> list[str]:
    """``--set`` style overrides from the explicit flags (flags win over the config file)."""
    pairs = {
        "train.algorithm": args.algorithm,
        "train.action": args.action,
        "train.total_timesteps": args.total_timesteps,
        "train.n_envs": args.n_envs,
        "train.seed": args.seed,
        "train.output_dir": args.output_dir,
    }
    overrides = [f"{key}={value}" for key, value in pairs.items() if value is not None]
    return [*_user_model_override(args), *overrides]


def _user_model_override(args: argparse.Namespace) -> list[str]:
    """``user.model=recsim`` unless the flag, an override or the config file names a user model."""
    if args.user_model is not None:
        return [f"user.model={args.user_model}"]
    if any(o.startswith("user.model=") for o in args.overrides):
        return []
    if args.config is not None:
        raw, _ = read_config_file(args.config)
        if isinstance(raw.get("user"), dict) and "model" in raw["user"]:
            return []
    # Classical users by default: fast runs; ``--user-model llm`` for real ones.
    return ["user.model=recsim"]


def run_train(args: argparse.Namespace) -> int:
    from recagent_gym.policies.training import train_policy

    config = _config(args, train_overrides(args))
    config = config.in_run_folder(config.train.output_dir)
    result = train_policy(config, progress_bar=not args.no_progress)
    print(f"policy: {result.policy_path}")
    print(f"{result.timesteps} steps in {result.seconds:.1f}s ({result.steps_per_s:.0f} steps/s)")
    return 0


def add_evaluate_policies(evaluate_subparsers: Any) -> None:
    """Add ``evaluate policies`` to the ``evaluate`` group."""
    parser = evaluate_subparsers.add_parser(
        "policies", help="compare recommenders (baselines, trained policies) on the same seeded users"
    )
    add_config_arguments(parser)
    parser.add_argument(
        "--user-model",
        choices=USER_MODELS,
        default=None,
        help="user model (default: recsim unless the config sets user.model)",
    )
    parser.add_argument(
        "--recommenders",
        default="random,popularity,mf",
        help="comma-separated baselines among random, popularity, mf ('' for none)",
    )
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="a trained policy (policy.zip, a checkpoint or its run folder); repeatable",
    )
    parser.add_argument("--episodes", type=int, default=None, help="sessions per recommender")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--output-dir", default=None, help="folder for policies.md/.csv/.png")
    parser.set_defaults(func=run_evaluate_policies)


def run_evaluate_policies(args: argparse.Namespace) -> int:
    from recagent_gym.envs.recagent_env import RecAgentEnv
    from recagent_gym.policies.evaluate_policies import (
        PolicyRecommender,
        evaluate_recommenders,
        markdown_table,
        write_results,
    )
    from recagent_gym.recommenders.factory import build_recommender

    overrides = _user_model_override(args)
    if args.episodes is not None:
        overrides.append(f"train.n_eval_episodes={args.episodes}")
    if args.seed is not None:
        overrides.append(f"train.seed={args.seed}")
    config = _config(args, overrides)
    out = Path(args.output_dir or Path(config.train.output_dir) / "evaluation")
    config = config.in_run_folder(out)
    env = RecAgentEnv(config.data.dataset, config.user.model, config=config)
    seed = config.train.seed
    recommenders: dict[str, Any] = {}
    for name in filter(None, (n.strip() for n in args.recommenders.split(","))):
        recommenders[name] = build_recommender(name, env.dataset, config, env.page_size, seed)
    for spec in args.policy:
        name, _, path = spec.rpartition("=")
        recommenders[name or Path(path).stem] = PolicyRecommender.load(path, env)
    if not recommenders:
        raise ConfigError("evaluate policies: nothing to evaluate (give --recommenders and/or --policy)")
    results = evaluate_recommenders(recommenders, env, config.train.n_eval_episodes, seed)
    title = f"{env.dataset.name}, {config.user.model} users, {config.train.n_eval_episodes} sessions each, seed {seed}"
    paths = write_results(results, out, title)
    print(title)
    print(markdown_table(results))
    print("written: " + ", ".join(str(p) for p in paths.values()))
    return 0
