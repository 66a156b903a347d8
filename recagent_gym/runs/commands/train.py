"""``recagent-gym train`` and ``recagent-gym evaluate policies``."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from recagent_gym.runs.cli import add_config_arguments, add_jobs_argument
from recagent_gym.runs.config import Config, ConfigError, load_config
from recagent_gym.runs.config.loader import read_config_file
from recagent_gym.runs.output_folder import check_output_folder
from recagent_gym.runs.provenance import ReportFacts, add_results_page_argument, declare_report, llm_description

logger = logging.getLogger(__name__)

USER_MODELS = ("recsim", "embedding", "llm", "distilled")


def _config(args: argparse.Namespace, extra: list[str]) -> Config:
    return load_config(args.config, [*args.overrides, *extra])


def register(subparsers: Any) -> None:
    """Add ``train``."""
    parser = subparsers.add_parser(
        "train", help="train an RL recommender (SB3 PPO/A2C/DQN, or PPO on Ray RLlib) on the env"
    )
    add_config_arguments(parser)
    parser.add_argument(
        "--engine",
        choices=("sb3", "rllib"),
        default="sb3",
        help="sb3: stable-baselines3 in this process; rllib: PPO on Ray RLlib (needs the [ray] extra), then the "
        "held-out evaluation of 'evaluate policies'",
    )
    parser.add_argument(
        "--num-env-runners", type=_runners, default=2, help="--engine rllib: env runners (Ray actors; 0: sample here)"
    )
    parser.add_argument(
        "--address",
        default=None,
        help="--engine rllib: an existing Ray cluster ('auto', HOST:6379 or ray://HOST:10001); default: a local one",
    )
    parser.add_argument(
        "--user-model",
        choices=USER_MODELS,
        default=None,
        help="user model (default: recsim unless the config sets user.model)",
    )
    parser.add_argument("--algorithm", choices=("ppo", "a2c", "dqn"), default=None)
    parser.add_argument(
        "--action",
        choices=("score", "genre", "page"),
        default=None,
        help="action wrapper: score (query vector), genre (discrete, DQN) or page (raw)",
    )
    parser.add_argument("--total-timesteps", type=int, default=None)
    parser.add_argument("--n-envs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--output-dir", default=None, help="folder for logs, checkpoints and the policy")
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (off anyway when stderr is not a terminal; the plain progress lines stay)",
    )
    parser.set_defaults(func=run_train)


def train_overrides(args: argparse.Namespace) -> list[str]:
    """``--set`` style overrides from the explicit flags (flags win over the config file)."""
    pairs = {
        "train.algorithm": args.algorithm,
        "train.action": args.action,
        "train.total_timesteps": args.total_timesteps,
        "train.n_envs": args.n_envs,
        "train.seed": args.seed,
        "train.output_dir": args.output_dir,
    }
    overrides = [f"{key}={value}" for key, value in pairs.items() if value is not None]
    return [*_user_model_override(args), *overrides]


def _user_model_override(args: argparse.Namespace) -> list[str]:
    """``user.model=recsim`` unless the flag, an override or the config file names a user model."""
    if args.user_model is not None:
        return [f"user.model={args.user_model}"]
    if any(o.startswith("user.model=") for o in args.overrides):
        return []
    if args.config is not None:
        raw, _ = read_config_file(args.config)
        if isinstance(raw.get("user"), dict) and "model" in raw["user"]:
            return []
    # Classical users by default: fast runs; ``--user-model llm`` for real ones.
    return ["user.model=recsim"]


def _runners(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def run_train(args: argparse.Namespace) -> int:
    from recagent_gym.runs.policies.training import train_policy

    config = _config(args, train_overrides(args))
    config = config.in_run_folder(config.train.output_dir)
    if args.engine == "rllib":
        return _run_train_rllib(args, config)
    result = train_policy(config, progress_bar=not args.no_progress)
    print(f"policy: {result.policy_path}")
    print(f"{result.timesteps} steps in {result.seconds:.1f}s ({result.steps_per_s:.0f} steps/s)")
    return 0


def _run_train_rllib(args: argparse.Namespace, config: Config) -> int:
    from recagent_gym.runs.rllib.env import require_ray

    if config.train.algorithm != "ppo":
        raise ConfigError(f"--engine rllib trains PPO; train.algorithm is {config.train.algorithm!r}")
    require_ray()  # one clear line without the extra, before anything is written
    from recagent_gym.runs.rllib.report import evaluate_run
    from recagent_gym.runs.rllib.training import train_rllib

    run = train_rllib(config, num_env_runners=args.num_env_runners, address=args.address)
    print(f"checkpoint: {run.checkpoint}")
    print(f"{run.timesteps} steps in {run.seconds:.1f}s ({run.steps_per_s:.0f} steps/s, "
          f"env runners: {run.num_env_runners})")  # fmt: skip
    evaluate_run(config, run.output_dir, run.checkpoint)
    return 0


def add_evaluate_policies(evaluate_subparsers: Any) -> None:
    """Add ``evaluate policies`` to the ``evaluate`` group."""
    parser = evaluate_subparsers.add_parser(
        "policies", help="compare recommenders (baselines, trained policies) on the same seeded users"
    )
    add_config_arguments(parser)
    parser.add_argument(
        "--user-model",
        choices=USER_MODELS,
        default=None,
        help="user model (default: recsim unless the config sets user.model)",
    )
    parser.add_argument(
        "--recommenders",
        default="random,popularity,mf",
        help="comma-separated baselines among random, popularity, mf ('' for none)",
    )
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="a trained policy (policy.zip, a checkpoint or its run folder); repeatable",
    )
    parser.add_argument(
        "--users", type=int, default=None, help="held-out users to evaluate (default train.eval_users; 0: all)"
    )
    parser.add_argument(
        "--sessions-per-user", type=int, default=None, help="sessions per held-out user (train.eval_sessions_per_user)"
    )
    parser.add_argument(
        "--episodes",
        dest="users",
        type=int,
        default=None,
        help="old name of --users (sessions per recommender = held-out users, one session each)",
    )
    parser.add_argument("--no-swapped", action="store_true", help="skip the personalisation (swapped encoding) check")
    parser.add_argument("--seed", type=int, default=None, help="evaluation seed (users' starting states)")
    parser.add_argument("--output-dir", default=None, help="folder for policies.md/.csv/.png")
    parser.set_defaults(func=run_evaluate_policies)

    comparison = evaluate_subparsers.add_parser(
        "rl-comparison",
        help="the RL comparison on RecAgent-v1: train every learner for every seed on training users, "
        "evaluate all recommenders on held-out users (e.g. --config rl_recsim)",
    )
    add_config_arguments(comparison)
    comparison.add_argument("--user-model", choices=USER_MODELS, default=None)
    comparison.add_argument("--output-dir", default=None, help="folder for the tables, plots and curves")
    comparison.add_argument("--env-seeds", default=None, metavar="S,S,...",
                            help="run the whole comparison at each env seed (user.recsim_seed and train.split_seed) "
                                 "and add env_seeds.md: learner minus best baseline per seed, paired")  # fmt: skip
    add_jobs_argument(comparison)
    add_results_page_argument(comparison)
    comparison.set_defaults(func=run_rl_comparison)


def run_rl_comparison(args: argparse.Namespace) -> int:
    from recagent_gym.runs.cli import seed_list
    from recagent_gym.runs.comparisons.rl_comparison import check_compare, run_comparison

    config = _config(args, _user_model_override(args))
    seeds = None if args.env_seeds is None else seed_list(args.env_seeds, "--env-seeds")
    check_compare(config, env_seeds=seeds is not None)  # before any seed runs or any folder is made
    if seeds is None and args.jobs > 1:
        raise ConfigError("--jobs runs env seeds at once: give --env-seeds too")
    out = check_output_folder(args.output_dir or Path(config.train.output_dir) / "comparison", "train.output_dir")
    users = config.train.eval_users or "all held-out"
    llm = llm_description(config.llm) if config.user.model == "llm" else "-"
    facts = ReportFacts(out / ("policies.md" if seeds is None else "env_seeds.md"), str(config.data.dataset),
                        [config.user.model], llm, config.train.seeds, users,
                        extra={"env seeds": ", ".join(map(str, seeds))} if seeds else {})  # fmt: skip
    if seeds is None:
        run_comparison(config.in_run_folder(out), output_dir=out)
    else:
        from recagent_gym.runs.comparisons.env_seeds import run_env_seeds

        run_env_seeds(config, seeds, output_dir=out, jobs=args.jobs)
    declare_report(args, facts)
    return 0


def run_evaluate_policies(args: argparse.Namespace) -> int:
    from recagent_gym.recommenders.factory import build_recommender
    from recagent_gym.runs.make_env import catalogue_env
    from recagent_gym.runs.policies.evaluate_policies import (
        EvalProtocol,
        PolicyRecommender,
        evaluate_recommenders,
        load_meta,
    )
    from recagent_gym.runs.policies.policy_files import check_policy
    from recagent_gym.runs.policies.protocol import split_users
    from recagent_gym.runs.policies.results_table import markdown_table, summary_line, write_results

    overrides = _user_model_override(args)
    if args.users is not None:
        overrides.append(f"train.eval_users={args.users}")
    if args.sessions_per_user is not None:
        overrides.append(f"train.eval_sessions_per_user={args.sessions_per_user}")
    config = _config(args, overrides)
    out = check_output_folder(args.output_dir or Path(config.train.output_dir) / "evaluation", "train.output_dir")
    config = config.in_run_folder(out)
    train = config.train
    for spec in args.policy:  # a missing, damaged or foreign zip fails before the env is built or MF fitted
        check_policy(spec.rpartition("=")[2])
    env = catalogue_env(config.data.dataset, config.user.model, config=config)
    seed = train.seed if args.seed is None else args.seed
    recommenders: dict[str, Any] = {}
    for name in filter(None, (n.strip() for n in args.recommenders.split(","))):
        recommenders[name] = build_recommender(name, env.dataset, config.recommender, env.page_size, seed)
    learned: dict[str, list[Any]] = {}
    steps: dict[str, list[int]] = {}
    for spec in args.policy:
        name, _, path = spec.rpartition("=")
        name = name or Path(path).stem
        learned.setdefault(name, []).append(PolicyRecommender.load(path, env))  # same name: one row, pooled seeds
        steps.setdefault(name, []).append(int(load_meta(path).get("timesteps", 0)))
    recommenders.update(learned)
    if not recommenders:
        raise ConfigError("evaluate policies: nothing to evaluate (give --recommenders and/or --policy)")
    split = split_users(env.dataset.n_users, test_fraction=train.test_fraction, seed=train.split_seed)
    users = split.test[: train.eval_users] if train.eval_users else split.test
    protocol = EvalProtocol(
        users=users,
        sessions_per_user=train.eval_sessions_per_user,
        seed=seed,
        n_boot=train.n_bootstrap,
        swapped=train.eval_swapped and not args.no_swapped,
    )
    results = evaluate_recommenders(recommenders, env, protocol, progress=lambda line: print(line, flush=True))
    trained = ", ".join(f"{n} trained {'/'.join(str(s) for s in v)} steps" for n, v in steps.items())
    title = (
        f"{env.dataset.name}, {config.user.model} users: {len(users)} held-out users x "
        f"{protocol.sessions_per_user} session(s), eval seed {seed}" + (f"; {trained}" if trained else "")
    )
    summary = summary_line(results, learned=list(learned))
    paths = write_results(results, out, title, summary)
    print(title)
    print(markdown_table(results))
    print(summary)
    print("written: " + ", ".join(str(p) for p in paths.values()))
    return 0
