"""``recagent-gym calibrate``: fit the behavioural prior's weights on train users' real choices.

    recagent-gym calibrate [--dataset D] [--users 40] [--exclude-users 200] [--seed 0] [--no-llm] [--out DIR]

Writes ``DIR/prior.json`` (use it with ``--set user.prior_weights=DIR/prior.json``) and ``DIR/calibration.md``.
The protocol is :mod:`recagent_gym.runs.evaluation.calibrate`'s.
"""

from __future__ import annotations

import argparse
from typing import Any

from recagent_gym.runs.cli import add_config_arguments


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="fit the behavioural prior (popularity x conformity, trend, recency, rating scale) with "
        "the LLM agent on train users' real choices; writes prior.json for user.prior_weights",
    )  # fmt: skip
    add_config_arguments(parser)
    parser.add_argument("--dataset", default=None, help="'bundled' or a dataset folder (default: data.dataset)")
    parser.add_argument("--users", type=int, default=40, help="calibration users (default 40)")
    parser.add_argument("--exclude-users", type=int, default=200,
                        help="set aside the users an evaluation of this size samples at this seed (20 "
                             "always is; default 200)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=None, help="seed (default evaluation.seed, 0)")
    parser.add_argument("--negatives", type=int, default=9, help="never-interacted items per choice (default 9)")
    parser.add_argument("--window-days", type=float, default=180.0, help="trend window in days (default 180)")
    parser.add_argument("--l2", type=float, default=0.01, help="L2 penalty of the logit (default 0.01)")
    parser.add_argument("--no-llm", action="store_true", help="fit the prior alone (no LLM calls; no 'both')")
    parser.add_argument("--out", default="runs/calibrate", help="output folder (default runs/calibrate)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_calibrate_command)


def run_calibrate_command(args: argparse.Namespace) -> int:
    from recagent_gym.data.load import load_dataset_from_config
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.evaluation.calibrate import run_calibration, write_calibration
    from recagent_gym.runs.evaluation.subjects import Resources
    from recagent_gym.settings_section import ConfigError

    if args.users < 1 or args.negatives < 1 or args.window_days <= 0 or args.l2 < 0:
        raise ConfigError("--users and --negatives must be >= 1, --window-days > 0 and --l2 >= 0")
    overrides = [*args.overrides] + ([f"evaluation.seed={args.seed}"] if args.seed is not None else [])
    config = load_config(args.config, overrides).in_run_folder(args.out)
    if args.dataset is not None:
        config.data.dataset = args.dataset
    dataset = load_dataset_from_config(config.data)
    resources = Resources(dataset, config, config.evaluation, progress=not args.no_progress)
    result = run_calibration(
        resources, users=args.users, exclude=args.exclude_users, negatives=args.negatives, use_llm=not args.no_llm,
        window_days=args.window_days, l2=args.l2, progress=not args.no_progress,
    )  # fmt: skip
    paths = write_calibration(result, args.out)
    print(result.markdown())
    print("written: " + ", ".join(str(p) for p in paths.values()))
    return 0
