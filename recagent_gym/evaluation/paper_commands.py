"""``recagent-gym evaluate discrimination`` and ``recagent-gym evaluate sequence`` (the paper's evaluations).

Flags override the ``evaluation`` configuration section (``--set evaluation.KEY=VALUE`` works too); the output
folder gets ``table.md``, ``table.csv``, ``plot.png`` and the redacted ``config.yaml``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from recagent_gym.cli import add_config_arguments
from recagent_gym.config import Config, ConfigError, load_config
from recagent_gym.config.loader import apply_overrides
from recagent_gym.evaluation.config import EvaluationConfig

logger = logging.getLogger(__name__)

USER_MODELS = ("llm", "recsim", "embedding")


def _common_arguments(parser: argparse.ArgumentParser, default_out: str) -> None:
    add_config_arguments(parser)
    parser.add_argument("--dataset", default=None,
                        help="'bundled' or a dataset folder (MovieLens-1M/100K/latest, RecAgent CSV); "
                             "default: data.dataset of the config")  # fmt: skip
    parser.add_argument("--user-model", dest="user_models", action="append", choices=USER_MODELS, default=None,
                        help="user model to evaluate (repeatable; default: evaluation.user_models)")  # fmt: skip
    parser.add_argument("--users", type=int, default=None, help="users sampled (default 20, the paper's)")
    parser.add_argument("--seed", type=int, default=None, help="seed of every draw (default 0)")
    parser.add_argument("--out", default=default_out, help=f"output folder (default {default_out})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_evaluate_discrimination(evaluate_subparsers: Any) -> None:
    """Add ``evaluate discrimination`` to the ``evaluate`` group."""
    parser = evaluate_subparsers.add_parser(
        "discrimination", help="discrimination (a,b) of the RecAgent paper, with popularity control"
    )
    _common_arguments(parser, "runs/evaluate/discrimination")
    parser.add_argument("--negatives", choices=("uniform", "popularity-matched", "both"), default=None,
                        help="negative sampler (default both)")  # fmt: skip
    parser.add_argument("--no-personalization-check", action="store_true",
                        help="skip re-scoring with swapped user histories")  # fmt: skip
    parser.set_defaults(func=run_discrimination_command)


def add_evaluate_sequence(evaluate_subparsers: Any) -> None:
    """Add ``evaluate sequence`` to the ``evaluate`` group."""
    parser = evaluate_subparsers.add_parser(
        "sequence", help="sequence generation of the RecAgent paper, with an LLM judge and objective metrics"
    )
    _common_arguments(parser, "runs/evaluate/sequence")
    parser.add_argument("--lengths", default=None, help="comma-separated held-out lengths N (default 5,10)")
    parser.add_argument("--choice", choices=("score", "respond"), default=None,
                        help="how a user picks from a page (default score)")  # fmt: skip
    parser.add_argument("--no-judge", action="store_true", help="objective metrics only")
    parser.set_defaults(func=run_sequence_command)


def flag_overrides(args: argparse.Namespace) -> list[str]:
    """``evaluation.*`` overrides from the explicit flags (flags win over the config file and ``--set``)."""
    pairs: dict[str, Any] = {
        "users": args.users,
        "seed": args.seed,
        "user_models": f"[{','.join(args.user_models)}]" if args.user_models else None,
        "negatives": getattr(args, "negatives", None),
        "sequence_choice": getattr(args, "choice", None),
        "sequence_lengths": f"[{args.lengths}]" if getattr(args, "lengths", None) else None,
    }
    if getattr(args, "no_personalization_check", False):
        pairs["personalization_check"] = "false"
    if getattr(args, "no_judge", False):
        pairs["judge"] = "false"
    return [f"evaluation.{key}={value}" for key, value in pairs.items() if value is not None]


def load_configs(args: argparse.Namespace) -> tuple[Config, EvaluationConfig]:
    """The root configuration and the evaluation section, with ``--set`` and flag overrides applied."""
    overrides = [*args.overrides, *flag_overrides(args)]
    if "evaluation" in Config.model_fields:
        config = load_config(args.config, overrides)
        evaluation = config.evaluation  # type: ignore[attr-defined]
    else:
        # Until the section is wired into the root config, its overrides are applied here (the file may not have it).
        ours = [o for o in overrides if o.startswith("evaluation.")]
        config = load_config(args.config, [o for o in overrides if not o.startswith("evaluation.")])
        section = apply_overrides({}, ours).get("evaluation", {})
        try:
            evaluation = EvaluationConfig.model_validate(section)
        except ValidationError as err:
            problems = "; ".join(f"evaluation.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
            raise ConfigError(f"invalid evaluation overrides {ours}: {problems}") from None
    if args.dataset is not None:
        config.data.dataset = args.dataset
    return config, evaluation


def _prepare(args: argparse.Namespace) -> Any:
    from recagent_gym.data import load_dataset_from_config
    from recagent_gym.evaluation.subjects import Resources

    config, evaluation = load_configs(args)
    dataset = load_dataset_from_config(config.data)
    logger.info("dataset %s: %d users, %d items, %d interactions", dataset.name, dataset.n_users, dataset.n_items,
                len(dataset.interactions))  # fmt: skip
    return Resources(dataset, config, evaluation, progress=not args.no_progress)


def _finish(args: argparse.Namespace, resources: Any, result: Any) -> int:
    from recagent_gym.evaluation.report import write_outputs

    paths = write_outputs(Path(args.out), result, resources.config, resources.eval)
    print(result.markdown())
    print("written: " + ", ".join(str(p) for p in paths.values()))
    return 0


def run_discrimination_command(args: argparse.Namespace) -> int:
    from recagent_gym.evaluation.discrimination import run_discrimination

    resources = _prepare(args)
    return _finish(args, resources, run_discrimination(resources, progress=not args.no_progress))


def run_sequence_command(args: argparse.Namespace) -> int:
    from recagent_gym.evaluation.sequence import run_sequence

    resources = _prepare(args)
    return _finish(args, resources, run_sequence(resources, progress=not args.no_progress))
