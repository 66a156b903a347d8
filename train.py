"""Train an RL recommender on the RecAgent env (same as ``recagent-gym train``).

    python train.py --total-timesteps 20000 --user-model recsim
    python train.py --config quickstart

All logic lives in :mod:`recagent_gym.runs.policies.training`; this script only maps its arguments onto the config.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from dataclasses import dataclass, field

from recagent_gym.runs.config import load_config
from recagent_gym.runs.policies.training import train_policy


@dataclass
class Args:
    config: str | None = None
    """YAML config file, or a name from configs/ (e.g. quickstart)."""
    overrides: list[str] = field(default_factory=list)
    """Extra ``key=value`` config overrides (``--set``)."""
    user_model: str = "recsim"
    """recsim (fast), embedding, or llm (the LLM agents; real runs)."""
    algorithm: str | None = None
    """ppo, a2c or dqn (dqn needs --action genre); default from the config (ppo)."""
    action: str | None = None
    """score (query vector, top-k), genre (discrete) or page (raw MultiDiscrete)."""
    total_timesteps: int | None = None
    """Environment steps to train for."""
    n_envs: int | None = None
    """Concurrent user sessions (one batch per step)."""
    seed: int | None = None
    """The run's only seed: policy initialisation, exploration, activation and users."""
    output_dir: str | None = None
    """Folder for TensorBoard logs, checkpoints, policy.zip and config.yaml."""
    progress: bool = True
    """Show a progress bar."""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in dataclasses.fields(Args):
        flag = "--set" if f.name == "overrides" else "--" + f.name.replace("_", "-")
        if f.type == "bool":
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=f.default)
        elif f.name == "overrides":
            parser.add_argument(flag, dest=f.name, action="append", default=[], help=f.metadata.get("help"))
        else:
            kind = int if "int" in str(f.type) else str
            parser.add_argument(flag, dest=f.name, type=kind, default=f.default)
    return Args(**vars(parser.parse_args()))


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    flags = {
        "user.model": args.user_model, "train.algorithm": args.algorithm, "train.action": args.action,
        "train.total_timesteps": args.total_timesteps, "train.n_envs": args.n_envs, "train.seed": args.seed,
        "train.output_dir": args.output_dir,
    }  # fmt: skip
    config = load_config(args.config, [*args.overrides, *(f"{k}={v}" for k, v in flags.items() if v is not None)])
    config = config.in_run_folder(config.train.output_dir)  # a relative llm.cache_path lies in the run's folder
    result = train_policy(config, progress_bar=args.progress)
    print(f"policy: {result.policy_path} ({result.timesteps} steps, {result.steps_per_s:.0f} steps/s)")


if __name__ == "__main__":
    main()
