"""PPO training steps per second end to end with the RecSim-style user (score action, flat observations).

Reference floor on this machine, measured on a trivial env with the same action shape: 490 steps/s with 1 env,
about 930 with 4.

    .venv/bin/python benchmarks/bench_ppo.py [--steps 8192]
"""

from __future__ import annotations

import argparse
import tempfile

from recagent_gym.data.load import load_dataset
from recagent_gym.policies.config import TrainConfig
from recagent_gym.runs.config import Config
from recagent_gym.runs.policies.training import train_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=8192)
    parser.add_argument("--action", default="score", choices=("score", "page", "genre"))
    args = parser.parse_args()
    dataset = load_dataset("bundled")
    for n_envs in (1, 4):
        config = Config(train=TrainConfig(total_timesteps=args.steps, n_envs=n_envs, action=args.action))
        config.user.model = "recsim"
        with tempfile.TemporaryDirectory() as out:
            result = train_policy(config, dataset=dataset, output_dir=out, progress_bar=False)
        print(
            f"PPO, {n_envs} env(s), action={args.action}: {result.steps_per_s:6.0f} steps/s "
            f"({result.timesteps} steps in {result.seconds:.1f}s)"
        )


if __name__ == "__main__":
    main()
