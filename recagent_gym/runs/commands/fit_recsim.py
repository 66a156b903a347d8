"""``recagent-gym users fit-recsim``: fit the RecSim-style users' utility on real choices.

    recagent-gym users fit-recsim [--config C] [--dataset D] [--holdout 10] [--choices 10] [--seed 0] [--out DIR]

Writes ``DIR/recsim_fit.json`` (use it with ``--set user.recsim_fitted=DIR/recsim_fit.json``) and ``DIR/fit.md``.
The protocol is :mod:`recagent_gym.users.recsim_fit`'s; ``recagent_gym/users/recsim_bundled.json`` is this
command's output on the bundled dataset with the defaults.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_fit_recsim(users_subparsers: Any) -> None:
    from recagent_gym.runs.cli import add_config_arguments

    parser = users_subparsers.add_parser(
        "fit-recsim", help="fit the RecSim-style users' weights (genre, collaborative affinity, quality, popularity, "
        "no-click mass) on real choices; writes recsim_fit.json for user.recsim_fitted",
    )  # fmt: skip
    add_config_arguments(parser)
    parser.add_argument("--dataset", default=None, help="'bundled' or a dataset folder (default: data.dataset)")
    parser.add_argument("--holdout", type=int, default=10,
                        help="each user's last items never read (the agreement test's future; default 10)")  # fmt: skip
    parser.add_argument("--choices", type=int, default=10, help="real choices per user before them (default 10)")
    parser.add_argument("--pages", type=int, default=8, help="random pages per user and sampler (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="seed of pools and pages (default 0)")
    parser.add_argument("--out", default="runs/fit-recsim", help="output folder (default runs/fit-recsim)")
    parser.set_defaults(func=run_fit_recsim_command)


def run_fit_recsim_command(args: argparse.Namespace) -> int:
    from recagent_gym.data.load import load_dataset_from_config
    from recagent_gym.runs.config import load_config
    from recagent_gym.settings_section import ConfigError
    from recagent_gym.users.recsim import RecSimUser
    from recagent_gym.users.recsim_fit import fit_markdown, fit_recsim

    if args.holdout < 1 or args.choices < 1 or args.pages < 1:
        raise ConfigError("--holdout, --choices and --pages must be >= 1")
    config = load_config(args.config, list(args.overrides))
    if args.dataset is not None:
        config.data.dataset = args.dataset
    dataset = load_dataset_from_config(config.data)
    ev = config.evaluation
    fit = fit_recsim(dataset, config.user, holdout=args.holdout, choices=args.choices,
                     min_history=ev.agreement_min_history, pool=ev.agreement_pool, pages=args.pages,
                     page_size=config.env.page_size, seed=args.seed, say=print,
                     features=lambda history, user: RecSimUser(history, user).features)  # fmt: skip
    out = Path(args.out)
    path = fit.write(out / "recsim_fit.json")
    (out / "fit.md").write_text(fit_markdown(fit), encoding="utf-8")
    print(fit_markdown(fit))
    print(f"written: {path}, {out / 'fit.md'}")
    return 0
