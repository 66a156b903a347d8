"""``recagent-gym users fit-agreement``: fit the LLM agents' page decision to the ranking, on train users only.

    recagent-gym users fit-agreement [--config agreement] [--dataset D] [--users 60] [--seed 0]
                                     [--rank-weight W] [--variant V] [--pages DIR/pages.npz] [--out DIR]
                                     [--results-page PATH]

Writes ``DIR/prior.json`` (use it with ``--set user.prior_weights=DIR/prior.json --set user.prior_fit=parts``; every
evaluation with it leaves the fit users out), ``DIR/fit.md``, the logged pages ``DIR/pages.npz`` (``--pages`` fits
them again, e.g. after a change of the variants, without an LLM call) and the train users' agreement report in
``DIR/zoo``.
The protocol is :mod:`recagent_gym.runs.evaluation.agreement.fit`'s.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from recagent_gym.runs.provenance import ReportFacts, add_results_page_argument, declare_report, llm_of


def add_fit_agreement(users_subparsers: Any) -> None:
    from recagent_gym.runs.cli import add_config_arguments
    from recagent_gym.runs.evaluation.agreement.fit import FIT_USERS, RANK_WEIGHTS, VARIANTS

    parser = users_subparsers.add_parser(
        "fit-agreement", help="fit the LLM agents' page decision (LLM score, embedding, prior, threshold) to the "
        "real ranking of recommenders on train users; writes prior.json for user.prior_weights",
    )  # fmt: skip
    add_config_arguments(parser)
    parser.add_argument("--dataset", default=None, help="'bundled' or a dataset folder (default: data.dataset)")
    parser.add_argument("--users", type=int, default=FIT_USERS, help=f"train users to fit on (default {FIT_USERS})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fit users' draw (default 0)")
    parser.add_argument(
        "--rank-weight",
        type=float,
        default=None,
        help="weight of the recommenders' hit-rate term beside the pages' likelihood (default: chosen by the "
        f"validation among {', '.join(f'{w:g}' for w in RANK_WEIGHTS)})",
    )
    parser.add_argument("--variant", choices=tuple(VARIANTS), default=None,
                        help="the prior terms fitted beside the LLM and embedding scores (default: chosen by the "
                             "validation)")  # fmt: skip
    parser.add_argument("--pages", default=None, metavar="PAGES_NPZ",
                        help="fit again on the pages an earlier fit logged (its pages.npz; the same dataset, --users "
                             "and --seed): no LLM call, seconds")  # fmt: skip
    parser.add_argument("--out", default="runs/fit-agreement", help="output folder (default runs/fit-agreement)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_results_page_argument(parser)
    parser.set_defaults(func=run_fit_agreement_command)


def run_fit_agreement_command(args: argparse.Namespace) -> int:
    from recagent_gym.data.load import load_dataset_from_config
    from recagent_gym.runs.config import dump_config, load_config
    from recagent_gym.runs.evaluation.agreement.evaluate import run_agreement
    from recagent_gym.runs.evaluation.agreement.fit import fit_markdown, run_fit_agreement, write_fit
    from recagent_gym.runs.evaluation.agreement.report import Report
    from recagent_gym.settings_section import ConfigError
    from recagent_gym.users.prior_default import configured_llm_name

    if args.users < 2 or (args.rank_weight is not None and not 0.0 <= args.rank_weight <= 1e3):
        raise ConfigError("--users must be >= 2 and --rank-weight in [0, 1000]")
    config = load_config(args.config or "agreement", list(args.overrides)).in_run_folder(args.out)
    if args.dataset is not None:
        config.data.dataset = args.dataset
    dataset = load_dataset_from_config(config.data)
    out = Path(args.out)
    pages = None if args.pages is None else Path(args.pages)
    result = run_fit_agreement(config, dataset, out=out, users=args.users, seed=args.seed, play=run_agreement,
                               rank_weight=args.rank_weight, progress=not args.no_progress, say=print, pages=pages,
                               variant=args.variant)  # fmt: skip
    path = write_fit(result, out, configured_llm_name(config.llm))
    if result.zoo is not None:  # the train users' own agreement (the LLM agents before the fit)
        Report(result.zoo).write(out / "zoo")
    (out / "config.yaml").write_text(dump_config(config), encoding="utf-8")
    print(fit_markdown(result))
    print(f"written: {path}, {out / 'fit.md'}")
    facts = ReportFacts(out / "fit.md", str(config.data.dataset), ["llm"], llm_of(["llm"], config.llm), [args.seed],
                        len(result.users))  # fmt: skip
    declare_report(args, facts)
    return 0
