"""``recagent-gym evaluate agreement``: rank agreement of each user model with real held-out behaviour.

    recagent-gym evaluate agreement [--config agreement] [--dataset D] [--users 200] [--user-model M ...]
                                    [--recommender R ...] [--policy NAME=PATH ...] [--seed 0] [--out DIR]

Writes ``agreement.md``, ``agreement.csv``, ``rank_agreement.csv``, ``agreement.png`` and the redacted
``config.yaml`` into the output folder (default ``runs/evaluate/agreement``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from recagent_gym.runs.cli import add_config_arguments
from recagent_gym.runs.config.evaluation_section import AGREEMENT_USER_MODELS as USER_MODELS
from recagent_gym.runs.provenance import ReportFacts, add_results_page_argument, declare_report, llm_of


def add_evaluate_agreement(evaluate_subparsers: Any) -> None:
    from recagent_gym.runs.evaluation.agreement.zoo import RECOMMENDERS

    parser = evaluate_subparsers.add_parser(
        "agreement", help="does each user model rank recommenders the way real held-out behaviour does? "
        "(Kendall tau, dose-response, sim vs real)",
    )  # fmt: skip
    add_config_arguments(parser)
    parser.add_argument("--dataset", default=None, help="'bundled' or a dataset folder (default: data.dataset)")
    parser.add_argument("--users", type=int, default=None, help="held-out users (default 200)")
    parser.add_argument("--user-model", dest="user_models", action="append", choices=USER_MODELS, default=None,
                        help="simulated user model (repeatable; default evaluation.agreement_user_models: the "
                        "first five; llm+prior and llm+prior-parts need a calibrate file, the last two are "
                        "ablations of the llm row)")  # fmt: skip
    parser.add_argument("--recommender", dest="recommenders", action="append", choices=RECOMMENDERS, default=None,
                        help="recommender of the zoo (repeatable; default all)")  # fmt: skip
    parser.add_argument("--policy", action="append", default=[], metavar="NAME=PATH",
                        help="a trained RecAgent-v1 policy (policy.zip or its folder); a name given several times "
                             "is one row, its seeds pooled per user (repeatable)")  # fmt: skip
    parser.add_argument("--fit", action="append", default=[], metavar="NAME=PATH",
                        help="a users fit-agreement file (prior.json), e.g. one made on another dataset: a row "
                             "llm+fit:NAME beside the others, at no LLM cost of its own (repeatable)")  # fmt: skip
    parser.add_argument("--negatives", choices=("uniform", "popularity-matched", "both"), default=None,
                        help="how the pools' negatives are drawn (default both)")  # fmt: skip
    parser.add_argument("--split", choices=("leave-last-out", "global"), default=None,
                        help="each user's last items held out, or one time cut for everyone (default "
                        "leave-last-out)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=None, help="seed of every draw (default 0)")
    parser.add_argument("--sessions", type=int, default=None, help="sessions per user and recommender, each "
                        "simulated user model (its mean return; evaluation.agreement_sessions, default 1)")  # fmt: skip
    parser.add_argument("--out", default="runs/evaluate/agreement", help="output folder")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_results_page_argument(parser)
    parser.set_defaults(func=run_agreement_command)


def parse_policies(values: list[str], flag: str = "--policy") -> dict[str, list[Path]]:
    from recagent_gym.settings_section import ConfigError

    out: dict[str, list[Path]] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise ConfigError(f"{flag} wants NAME=PATH, got {value!r}")
        out.setdefault(name, []).append(Path(path))
    return out


def parse_fits(values: list[str]) -> dict[str, Path]:
    """``--fit NAME=PATH`` values, each file checked now (not after the zoo is fitted)."""
    from recagent_gym.settings_section import ConfigError
    from recagent_gym.users.prior_file import is_fit_file

    out: dict[str, Path] = {}
    for name, paths in parse_policies(values, "--fit").items():
        if len(paths) > 1:
            raise ConfigError(f"--fit: the name {name!r} is given {len(paths)} times")
        if not is_fit_file(paths[0]):
            raise ConfigError(f"--fit {name}={paths[0]}: not a 'users fit-agreement' file")
        out[name] = paths[0]
    return out


def run_agreement_command(args: argparse.Namespace) -> int:
    from recagent_gym.data.load import load_dataset_from_config
    from recagent_gym.runs.config import dump_config, load_config
    from recagent_gym.runs.evaluation.agreement.evaluate import run_agreement
    from recagent_gym.runs.evaluation.agreement.report import Report
    from recagent_gym.runs.policies.policy_files import check_policy

    policies = parse_policies(args.policy)
    fits = parse_fits(args.fit)
    for given in policies.values():  # a damaged or foreign zip fails now, not after the zoo is fitted
        for path in given:
            check_policy(path)
    pairs: dict[str, Any] = {
        "agreement_users": args.users, "seed": args.seed, "negatives": args.negatives,
        "agreement_sessions": args.sessions, "agreement_split": args.split,
        "agreement_user_models": f"[{','.join(args.user_models)}]" if args.user_models else None,
        "agreement_recommenders": f"[{','.join(args.recommenders)}]" if args.recommenders else None,
    }  # fmt: skip
    overrides = [*args.overrides, *(f"evaluation.{k}={v}" for k, v in pairs.items() if v is not None)]
    config = load_config(args.config or "agreement", overrides).in_run_folder(args.out)
    if args.dataset is not None:
        config.data.dataset = args.dataset
    dataset = load_dataset_from_config(config.data)
    out = Path(args.out)
    run = run_agreement(config, dataset, out=out, policies=policies, fits=fits, progress=not args.no_progress,
                        say=print)  # fmt: skip
    report = Report(run)
    paths = report.write(out)
    (out / "config.yaml").write_text(dump_config(config), encoding="utf-8")
    print(report.markdown())
    print("written: " + ", ".join(str(p) for p in paths.values()))
    evaluation = config.evaluation
    models = [*evaluation.agreement_user_models, *(f"llm+fit:{name}" for name in fits)]
    facts = ReportFacts(paths["markdown"], str(config.data.dataset), models, llm_of(models, config.llm),
                        [evaluation.seed], evaluation.agreement_users)  # fmt: skip
    declare_report(args, facts)
    return 0
