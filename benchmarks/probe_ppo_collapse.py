"""Why PPO's held-out return collapses when it trains long on ``rl_recsim`` (docs/findings.md): every ``--every``
steps, its return on the held-out users with top-k pages (as the RL comparison evaluates) and with sampled
Plackett-Luce pages (as PPO trains), beside its training return in the progress line.

    python benchmarks/probe_ppo_collapse.py --steps 700000 --every 100000 --env-seed 3

Prints one line per point and writes ``modes.csv`` in ``--out``. Measured with it: docs/findings.md (PPO section).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from recagent_gym.runs.comparisons import rl_comparison as rc
from recagent_gym.runs.config import load_config
from recagent_gym.runs.policies.callbacks import HeldOutEval
from recagent_gym.runs.policies.protocol import bootstrap_mean, split_users
from recagent_gym.runs.policies.selection import validation_split


class Sampled:
    """A trained model whose pages are sampled (``deterministic=False``) whatever the caller asks."""

    def __init__(self, model: object) -> None:
        self.model = model

    def predict(self, obs, state=None, episode_start=None, deterministic=True):
        return self.model.predict(obs, state, episode_start, deterministic=False)  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=700_000)
    parser.add_argument("--every", type=int, default=100_000)
    parser.add_argument("--env-seed", type=int, default=3)
    parser.add_argument("--users", type=int, default=0, help="held-out users scored (0: all)")
    parser.add_argument("--out", default="runs/probe_ppo_collapse")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = load_config("rl_recsim", ["train.seeds=[0]", f"train.learner_timesteps={{ppo: {args.steps}}}"])
    config.user.recsim_seed = config.train.split_seed = args.env_seed
    torch.set_num_threads(config.train.torch_threads)
    dataset = rc.resolve_dataset(None, config)
    split = split_users(dataset.n_users, test_fraction=config.train.test_fraction, seed=args.env_seed)
    learn, _ = validation_split(split.train, config.train.validation_users, seed=args.env_seed)
    users = split.test[: args.users] if args.users else split.test
    env = rc.make_candidate_env(config, dataset, users)
    protocol = rc.EvalProtocol(users=users, seed=args.env_seed, swapped=False, n_boot=1000)
    log = (out / "modes.csv").open("w", encoding="utf-8")
    log.write("step,topk,topk_low,topk_high,sampled,sampled_low,sampled_high,n_users\n")

    def evaluate(model: object) -> np.ndarray:
        topk = rc.run_sessions(model, env, protocol).returns.mean(axis=1)
        sampled = rc.run_sessions(Sampled(model), env, protocol).returns.mean(axis=1)
        a, b = bootstrap_mean(topk, n_boot=1000, seed=1), bootstrap_mean(sampled, n_boot=1000, seed=1)
        step = model.num_timesteps  # type: ignore[attr-defined]
        log.write(f"{step},{a.mean:.3f},{a.low:.3f},{a.high:.3f},{b.mean:.3f},{b.low:.3f},{b.high:.3f},{len(users)}\n")
        log.flush()
        print(
            f"{time.strftime('%H:%M:%S')} step {step} ({len(users)} held-out users): top-k pages {a.mean:.3f} "
            f"[{a.low:.3f}, {a.high:.3f}], sampled pages {b.mean:.3f} [{b.low:.3f}, {b.high:.3f}]",
            flush=True,
        )
        return topk

    curve = HeldOutEval(evaluate, eval_every=args.every, output_dir=out / "curve")
    model = rc.train_item_scoring("ppo", config, dataset, learn, 0, curve, env.retriever)
    evaluate(model)
    log.close()


if __name__ == "__main__":
    main()
