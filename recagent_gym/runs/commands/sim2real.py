"""``recagent-gym evaluate sim2real``: the RL comparison for several simulators at the same env seeds, and which
simulator's shipped learner holds up on the held-out users' real next items (:mod:`~recagent_gym.runs.comparisons.
sim2real`). A configuration whose folder already holds its comparison at every seed, run with the same
configuration, is read, not run again."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from recagent_gym.runs.cli import add_jobs_argument, add_set_argument
from recagent_gym.runs.config import Config, ConfigError, load_config
from recagent_gym.runs.output_folder import check_output_folder
from recagent_gym.runs.provenance import ReportFacts, add_results_page_argument, declare_report

logger = logging.getLogger(__name__)

DEFAULT_CONFIGS = "rl_recsim,rl_fitted,rl_distilled,rl_embedding"


def add_evaluate_sim2real(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sim2real",
        help="the RL comparison on several simulators (user models) at the same env seeds, and which one's "
        "learners hold up on the held-out users' real next items",
    )
    parser.add_argument(
        "--configs",
        default=DEFAULT_CONFIGS,
        metavar="C,C,...",
        help=f"RL comparison configurations, shipped names or YAML (default {DEFAULT_CONFIGS})",
    )
    add_set_argument(parser, "override one key of every configuration, e.g. --set 'train.seeds=[0]'")
    parser.add_argument("--env-seeds", default="3,4,5", metavar="S,S,...",
                        help="env seeds (each fixes the held-out users; default 3,4,5: never tuned on)")  # fmt: skip
    parser.add_argument(
        "--output-dir",
        default=None,
        help="one folder per configuration, and the report (default: sim2real beside the first configuration's "
        "train.output_dir, runs/sim2real for the shipped ones)",
    )
    add_jobs_argument(parser)
    add_results_page_argument(parser)
    parser.set_defaults(func=run_sim2real)


def run_sim2real(args: argparse.Namespace) -> int:
    from recagent_gym.runs.cli import seed_list
    from recagent_gym.runs.comparisons import sim2real
    from recagent_gym.runs.comparisons.env_seeds import run_env_seeds
    from recagent_gym.runs.comparisons.rl_comparison import check_compare

    seeds = seed_list(args.env_seeds, "--env-seeds")
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    if not names or len(set(names)) != len(names):
        raise ConfigError(f"--configs wants distinct configuration names separated by commas, got {args.configs!r}")
    configs = {_label(name): load_config(name, list(args.overrides)) for name in names}
    for config in configs.values():
        check_compare(config, env_seeds=True)  # every configuration checked before any runs
    first = next(iter(configs.values()))
    out = check_output_folder(args.output_dir or Path(first.train.output_dir).parent / "sim2real", "--output-dir")
    runs: dict[str, list[sim2real.SeedRun]] = {}
    origin = []
    for label, config in configs.items():
        folder = out / label
        if _done(config, seeds, folder):
            logger.info("sim2real: %s already holds the comparison at env seeds %s: read, not run", folder, seeds)
            how = "read from its folder"
        else:
            run_env_seeds(config, seeds, output_dir=folder, jobs=args.jobs)
            how = "run now"
        runs[label] = [sim2real.read_seed_run(label, s, folder / f"env_seed_{s}") for s in seeds]
        origin.append(f"`{label}` {how} ({_wall(folder, seeds)})")
    n_boot = max(c.train.n_bootstrap for c in configs.values())
    rows = sim2real.rows_for(runs, n_boot)
    report = sim2real.write(rows, sim2real.verdicts(runs, n_boot), out, _intro(configs, seeds, origin))
    print(report.read_text(encoding="utf-8"), flush=True)
    models = list(dict.fromkeys(c.user.model for c in configs.values()))
    declare_report(args, ReportFacts(report, str(first.data.dataset), models, "-",
                                     first.train.seeds, "all held-out", extra={"env seeds": ", ".join(map(str, seeds)),
                                     "configurations": ", ".join(configs)}))  # fmt: skip
    return 0


def _wall(folder: Path, seeds: list[int]) -> str:
    """The comparisons' own wall time summed over the seeds (``timing.json``), not the wall time of a ``--jobs`` run."""
    total = 0.0
    for seed in seeds:
        timing = folder / f"env_seed_{seed}" / "timing.json"
        seconds = json.loads(timing.read_text(encoding="utf-8")).get("total_s") if timing.is_file() else None
        if seconds is None:
            return "its wall time not recorded"
        total += float(seconds)
    return f"its comparisons took {total / 60:.0f} min, summed over the seeds"


def _label(name: str) -> str:
    return Path(name).stem


def _done(config: Config, seeds: list[int], folder: Path) -> bool:
    """Whether ``folder`` holds this configuration's comparison at every seed; a different configuration there is
    refused (it would be mixed up with this one)."""
    from recagent_gym.runs.comparisons.env_seeds import holds_comparison

    return all([holds_comparison(config, seed, folder, strict=True) for seed in seeds])


def _intro(configs: dict[str, Config], seeds: list[int], origin: list[str]) -> str:
    from recagent_gym.runs.comparisons.rl_comparison import learner_steps_text

    steps = "; ".join(f"`{label}`: {c.user.model} users, rows {', '.join(n for n in c.train.compare)}, "
                      f"training seeds {c.train.seeds}, steps per seed {learner_steps_text(c)}"
                      for label, c in configs.items())  # fmt: skip
    return (
        "Each simulator (an RL comparison configuration) trains its learners on the training users and is judged by "
        "what its shipped learner, the one with the best simulated return on the validation users (training users "
        "set aside), does on the held-out users' real next items (hit rate of its pages among never-seen negatives, "
        "the users replayed; `evaluate rl-comparison`'s real side). At one env seed every simulator is evaluated on "
        "the same users, and the history recommenders (MF, item-kNN) fitted on their history are the same rows. "
        "Differences are paired over users; pooled rows take every held-out user at every env seed as one unit. "
        f"Env seeds {', '.join(map(str, seeds))}. {steps}. {'; '.join(origin)}."
    )
