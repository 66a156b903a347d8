"""``recagent-gym evaluate discrimination|preference|rating|sequence`` (the paper's and the field's evaluations).

Flags override the ``evaluation`` configuration section (``--set evaluation.KEY=VALUE`` works too); the output
folder gets ``table.md``, ``table.csv``, ``plot.png`` and the redacted ``config.yaml``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from recagent_gym.runs.cli import add_config_arguments
from recagent_gym.runs.config import Config, load_config
from recagent_gym.runs.config.evaluation_section import EvaluationConfig
from recagent_gym.runs.provenance import (
    ReportFacts,
    add_results_page_argument,
    declare_report,
    llm_description,
    llm_of,
)

logger = logging.getLogger(__name__)

EFFICIENCY_CONFIG = "simulate_paper"
"""The configuration ``evaluate efficiency`` runs unless ``--config`` names another: the paper's simulator."""

USER_MODELS = ("llm", "recsim", "embedding", "prior", "llm+prior", "llm+prior-parts", "distilled")


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
    add_results_page_argument(parser)


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


def add_evaluate_preference(evaluate_subparsers: Any) -> None:
    """Add ``evaluate preference`` (Agent4Rec's 1:m preference discrimination) to the ``evaluate`` group."""
    parser = evaluate_subparsers.add_parser(
        "preference", help="preference discrimination 1:m (Agent4Rec): accuracy, precision, recall, F1"
    )
    _common_arguments(parser, "runs/evaluate/preference")
    parser.add_argument("--negatives", choices=("uniform", "popularity-matched", "both"), default=None,
                        help="negative sampler (default both)")  # fmt: skip
    parser.add_argument("--ratios", default=None, help="comma-separated ratios m (default 1,2,3,9)")
    parser.add_argument("--no-personalization-check", action="store_true",
                        help="skip re-scoring with swapped user histories")  # fmt: skip
    parser.set_defaults(func=run_preference_command)


def add_evaluate_rating(evaluate_subparsers: Any) -> None:
    """Add ``evaluate rating`` (rating prediction, RMSE) to the ``evaluate`` group."""
    parser = evaluate_subparsers.add_parser("rating", help="rating prediction of held-out items (RMSE)")
    _common_arguments(parser, "runs/evaluate/rating")
    parser.add_argument("--negatives", choices=("uniform", "popularity-matched", "both"), default=None,
                        help="negative sampler (default both)")  # fmt: skip
    parser.add_argument("--no-personalization-check", action="store_true",
                        help="skip re-scoring with swapped user histories")  # fmt: skip
    parser.set_defaults(func=run_rating_command)


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
        "preference_ratios": f"[{args.ratios}]" if getattr(args, "ratios", None) else None,
    }
    if getattr(args, "no_personalization_check", False):
        pairs["personalization_check"] = "false"
    if getattr(args, "no_judge", False):
        pairs["judge"] = "false"
    return [f"evaluation.{key}={value}" for key, value in pairs.items() if value is not None]


def load_configs(args: argparse.Namespace) -> tuple[Config, EvaluationConfig]:
    """The root configuration and the evaluation section, with ``--set`` and flag overrides applied."""
    overrides = [*args.overrides, *flag_overrides(args)]
    config = load_config(args.config, overrides).in_run_folder(args.out)
    if args.dataset is not None:
        config.data.dataset = args.dataset
    return config, config.evaluation


def _prepare(args: argparse.Namespace) -> Any:
    from recagent_gym.data.load import load_dataset_from_config
    from recagent_gym.runs.evaluation.subjects import Resources

    config, evaluation = load_configs(args)
    dataset = load_dataset_from_config(config.data)
    logger.info("dataset %s: %d users, %d items, %d interactions", dataset.name, dataset.n_users, dataset.n_items,
                len(dataset.interactions))  # fmt: skip
    return Resources(dataset, config, evaluation, progress=not args.no_progress)


def _finish(args: argparse.Namespace, resources: Any, result: Any) -> int:
    from recagent_gym.runs.evaluation.report import write_outputs

    paths = write_outputs(Path(args.out), result, resources.config, resources.eval)
    print(result.markdown())
    print("written: " + ", ".join(str(p) for p in paths.values()))
    config, evaluation = resources.config, resources.eval
    models = list(evaluation.user_models)
    judged = hasattr(args, "no_judge") and not args.no_judge  # sequence generation's judge is an LLM too
    llm = llm_description(evaluation.judge_llm or config.llm) if judged else llm_of(models, config.llm)
    facts = ReportFacts(paths["table.md"], resources.dataset.name, models, llm, [evaluation.seed], evaluation.users)
    declare_report(args, facts)
    return 0


def run_discrimination_command(args: argparse.Namespace) -> int:
    from recagent_gym.runs.evaluation.discrimination import run_discrimination

    resources = _prepare(args)
    return _finish(args, resources, run_discrimination(resources, progress=not args.no_progress))


def run_preference_command(args: argparse.Namespace) -> int:
    from recagent_gym.runs.evaluation.preference import run_preference

    resources = _prepare(args)
    return _finish(args, resources, run_preference(resources, progress=not args.no_progress))


def run_rating_command(args: argparse.Namespace) -> int:
    from recagent_gym.runs.evaluation.rating import run_rating

    resources = _prepare(args)
    return _finish(args, resources, run_rating(resources, progress=not args.no_progress))


def run_sequence_command(args: argparse.Namespace) -> int:
    from recagent_gym.runs.evaluation.sequence import run_sequence

    resources = _prepare(args)
    return _finish(args, resources, run_sequence(resources, progress=not args.no_progress))


def add_evaluate_efficiency(evaluate_subparsers: Any) -> None:
    """Add ``evaluate efficiency`` (seconds per round vs agents and API keys) to the ``evaluate`` group."""
    parser = evaluate_subparsers.add_parser(
        "efficiency",
        help="seconds per simulated round vs agents and API keys (local latency server or embedded); "
        f"runs the {EFFICIENCY_CONFIG} configuration unless --config names another",
    )
    add_config_arguments(parser)
    parser.set_defaults(config=EFFICIENCY_CONFIG)
    parser.add_argument("--dataset", default=None, help="'bundled' or a dataset folder (default: data.dataset)")
    parser.add_argument("--agents", default=None,
                        help="comma-separated agent counts (default 1,10,50,100; 500 is opt-in; "
                             "embedded: evaluation.efficiency_embedded_agents, default 1,2,5)")  # fmt: skip
    parser.add_argument("--keys", default=None, help="comma-separated API key counts (default 1,5)")
    parser.add_argument("--latency-ms", type=float, default=None, help="server latency per request (default 300)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per simulation (default 2)")
    parser.add_argument("--backend", choices=("local-server", "embedded"), default="local-server",
                        help="local OpenAI-compatible latency server, or the embedded model")  # fmt: skip
    parser.add_argument("--seed", type=int, default=None, help="seed of every draw (default 0)")
    parser.add_argument("--cpu-floor", action="store_true",
                        help="run every point again at zero latency: the CPU floor column")  # fmt: skip
    parser.add_argument("--out", default="runs/evaluate/efficiency", help="output folder")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_results_page_argument(parser)
    parser.set_defaults(func=run_efficiency_command)


def add_evaluate_social(evaluate_subparsers: Any) -> None:
    """Add ``evaluate social`` (information cocoon and conformity) to the ``evaluate`` group."""
    parser = evaluate_subparsers.add_parser(
        "social", help="information cocoon (genre entropy under MF / random / mitigation) and conformity"
    )
    add_config_arguments(parser)
    parser.add_argument("--dataset", default=None, help="'bundled' or a dataset folder (default: data.dataset)")
    parser.add_argument("--agents", type=int, default=None, help="agents per simulation (default 20)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per simulation (default 5)")
    parser.add_argument("--random-k", type=int, default=None, help="random items per page, mitigation (default 2)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the simulations (default: simulation.seed)")
    parser.add_argument("--out", default="runs/evaluate/social", help="output folder")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_social_command)


def _study_configs(args: argparse.Namespace, pairs: dict[str, Any]) -> tuple[Config, EvaluationConfig]:
    extra = [f"evaluation.{key}={value}" for key, value in pairs.items() if value is not None]
    if args.seed is not None:
        extra += [f"simulation.seed={args.seed}", f"evaluation.seed={args.seed}"]
    config = load_config(args.config, [*args.overrides, *extra]).in_run_folder(args.out)
    if args.dataset is not None:
        config.data.dataset = args.dataset
    return config, config.evaluation


def run_efficiency_command(args: argparse.Namespace) -> int:
    from recagent_gym.runs.evaluation.efficiency import run_efficiency

    agents_key = "efficiency_embedded_agents" if args.backend == "embedded" else "efficiency_agents"
    pairs = {
        agents_key: f"[{args.agents}]" if args.agents else None,
        "efficiency_keys": f"[{args.keys}]" if args.keys else None,
        "efficiency_latency_ms": args.latency_ms,
        "efficiency_rounds": args.rounds,
    }
    args.config = args.config or EFFICIENCY_CONFIG  # what `simulate --config simulate_paper` runs
    config, evaluation = _study_configs(args, pairs)
    result = run_efficiency(
        config, evaluation, backend=args.backend, out=args.out, progress=not args.no_progress,
        cpu_floor=args.cpu_floor, config_name=Path(args.config).stem if args.config.endswith(".yaml") else args.config,
    )  # fmt: skip
    paths = result.write(args.out, config, evaluation)
    print(result.markdown())
    print("written: " + ", ".join(str(p) for p in paths.values()))
    llm = "local latency server" if args.backend == "local-server" else llm_description(config.llm)
    agents = evaluation.efficiency_embedded_agents if args.backend == "embedded" else evaluation.efficiency_agents
    facts = ReportFacts(paths["table.md"], str(config.data.dataset), ["llm"], llm, [evaluation.seed],
                        f"agents {', '.join(str(a) for a in agents)}")  # fmt: skip
    declare_report(args, facts)
    return 0


def run_social_command(args: argparse.Namespace) -> int:
    from recagent_gym.runs.evaluation.social_study import run_social_study

    pairs = {"social_agents": args.agents, "social_rounds": args.rounds, "social_random_k": args.random_k}
    config, evaluation = _study_configs(args, pairs)
    result = run_social_study(config, evaluation, out=args.out, progress=not args.no_progress)
    paths = result.write(args.out, config, evaluation)
    print(result.markdown())
    print("written: " + ", ".join(str(p) for p in paths.values()))
    return 0
