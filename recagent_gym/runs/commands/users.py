"""``recagent-gym users collect | distill | fidelity``: distilled LLM users, from logs to a checked model."""

from __future__ import annotations

import argparse
from typing import Any

from recagent_gym.runs.distill.pages import SOURCES


def register(subparsers: Any) -> None:
    from recagent_gym.runs.cli import add_config_arguments
    from recagent_gym.runs.provenance import add_results_page_argument

    users = subparsers.add_parser(
        "users", help="distilled LLM users: collect decisions, distil, check fidelity, train-on-distilled transfer"
    )
    sub = users.add_subparsers(dest="users_command", required=True)

    collect = sub.add_parser("collect", help="log the LLM users' page decisions over diverse pages (Parquet)")
    add_config_arguments(collect)
    collect.add_argument("--out", required=True, help="folder of the decision logs (appended to; resumable)")
    collect.add_argument("--sessions", type=int, default=200, help="sessions in the plan (default 200)")
    collect.add_argument("--sources", default=",".join(SOURCES), help=f"page sources (default {','.join(SOURCES)})")
    collect.add_argument("--batch", type=int, default=8, help="sessions decided side by side (one LLM batch)")
    collect.add_argument("--max-pages", type=int, default=10, help="decisions per session at most (default 10)")
    collect.add_argument(
        "--policy",
        default=None,
        help="a RecAgent-v1 policy.zip (e.g. from 'users transfer'): adds the 'policy' source, whose sessions show"
        " the pages this policy chooses (the collection step of a DAgger loop)",
    )
    collect.add_argument("--seed", type=int, default=0)
    collect.add_argument("--no-progress", action="store_true", help="no progress bar")
    collect.set_defaults(func=run_collect)

    distill = sub.add_parser("distill", help="train the distilled user model on decision logs")
    add_config_arguments(distill)
    distill.add_argument("--logs", required=True, help="folder written by 'users collect'")
    distill.add_argument("--out", required=True, help="artefact folder (weights.npz + model.json)")
    distill.add_argument("--epochs", type=int, default=60)
    distill.add_argument("--seed", type=int, default=0)
    distill.add_argument(
        "--split",
        choices=("policy", "own"),
        default="policy",
        help="held-out users: those of the RL split (train.test_fraction, train.split_seed; default), or"
        " --test-fraction of the logged users",
    )
    distill.add_argument("--test-fraction", type=float, default=0.2, help="held-out users with --split own")
    distill.add_argument(
        "--real-weight",
        type=float,
        default=None,
        help="weight of the real-choice objective: the train users' real next items among never-seen negatives"
        " (0: the LLM users' decisions alone; default 0.3, chosen by measurement: users/distilled/bundled/README.md);"
        " recorded in model.json",
    )
    distill.add_argument(
        "--real-users",
        type=int,
        default=None,
        help="users beyond the logged ones whose real next items the real-choice objective also fits (a seeded draw"
        " among users neither logged nor held out; they are left out of every evaluation); default 0",
    )
    distill.add_argument(
        "--collab-dims",
        type=int,
        default=None,
        help="collaborative item vectors (SVD of the history before the real items) in the model's features, with"
        " a direct affinity term; 0: none; default 8 (recorded in model.json)",
    )
    distill.add_argument(
        "--real-target",
        choices=("order", "watch"),
        default=None,
        help="what the real-choice objective fits: 'order' (the real item among its page; the default) or 'watch'"
        " (also pages of negatives only, on which the real user watches nothing: the scores' level against the"
        " watch threshold); recorded in model.json",
    )
    distill.set_defaults(func=run_distill)

    fidelity = sub.add_parser("fidelity", help="distilled vs LLM users on held-out users: table, CSV and plot")
    add_config_arguments(fidelity)
    fidelity.add_argument("--logs", required=True, help="folder written by 'users collect'")
    fidelity.add_argument("--model", required=True, help="artefact folder written by 'users distill'")
    fidelity.add_argument("--out", required=True, help="folder of the report (fidelity.md, fidelity.csv, .png)")
    fidelity.add_argument("--replays", type=int, default=20, help="replays of each held-out session (default 20)")
    fidelity.add_argument("--bootstrap", type=int, default=1000)
    fidelity.add_argument(
        "--real-llm-users",
        type=int,
        default=40,
        help="held-out users whose real-choice pages the LLM users score (one LLM call per user and sampler;"
        " 0: no LLM row in the real-choice table; default 40)",
    )
    fidelity.add_argument("--seed", type=int, default=0)
    fidelity.set_defaults(func=run_fidelity)

    from recagent_gym.runs.commands.fit_agreement import add_fit_agreement
    from recagent_gym.runs.commands.fit_recsim import add_fit_recsim

    add_fit_recsim(sub)
    add_fit_agreement(sub)

    transfer = sub.add_parser(
        "transfer", help="train PPO on distilled users, evaluate it on held-out LLM users vs random/popularity/MF"
    )
    add_config_arguments(transfer)
    transfer.add_argument("--out", default=None, help="folder of policies and report (default train.output_dir)")
    transfer.add_argument("--users", type=int, default=None, help="held-out users (default train.eval_users; 0: all)")
    transfer.add_argument("--seeds", default=None, help="training seeds, comma-separated (default train.seed)")
    transfer.add_argument(
        "--user-models",
        default="distilled,llm",
        help="users the policies are evaluated on, in order (default distilled,llm; add recsim,embedding for the "
        "naive surrogates' ranking beside the LLM users')",
    )
    transfer.add_argument(
        "--policy",
        action="append",
        default=[],
        help="evaluate this trained policy.zip instead of training (repeatable)",
    )
    transfer.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_results_page_argument(transfer)
    transfer.set_defaults(func=run_transfer_command)


def _config_and_dataset(args: argparse.Namespace) -> tuple[Any, Any]:
    from recagent_gym.data.load import load_dataset_from_config
    from recagent_gym.runs.config import load_config

    config = load_config(args.config, args.overrides)
    return config, load_dataset_from_config(config.data)


def run_collect(args: argparse.Namespace) -> int:
    from recagent_gym.runs.distill.collect import collect
    from recagent_gym.users.factory import build_user_model
    from recagent_gym.users.prior_default import prior_note

    if args.policy is not None:  # a damaged or foreign zip fails before the LLM users are built
        from recagent_gym.runs.policies.policy_files import check_policy

        check_policy(args.policy)
    config, dataset = _config_and_dataset(args)
    model = build_user_model("llm", dataset, **config.user_model_sections())
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    if args.policy is not None and "policy" not in sources:
        sources.append("policy")
    rows = collect(
        model,
        dataset,
        args.out,
        sessions=args.sessions,
        sources=sources,
        page_size=config.env.page_size,
        max_pages=args.max_pages,
        batch=args.batch,
        seed=args.seed,
        config=config,
        model_name=config.llm.model_name,
        policy=args.policy,
        users=prior_note(config, dataset),
        progress=not args.no_progress,
    )
    print(f"users collect: {rows} new decisions in {args.out}")
    return 0


def run_distill(args: argparse.Namespace) -> int:
    from recagent_gym.runs.distill.fit import distill
    from recagent_gym.runs.distill.objective import FitSettings

    config, dataset = _config_and_dataset(args)
    real = {} if args.real_weight is None else {"real_weight": args.real_weight}
    if args.collab_dims is not None:
        real["collab_dims"] = args.collab_dims
    if args.real_users is not None:
        real["real_users"] = args.real_users
    if args.real_target is not None:
        real["real_target"] = args.real_target
    settings = FitSettings(
        epochs=args.epochs, seed=args.seed, split=args.split, test_fraction=args.test_fraction, **real
    )
    report = distill(args.logs, dataset, config, args.out, settings=settings)
    print(f"users distill: {args.out} ({report})")
    return 0


def run_fidelity(args: argparse.Namespace) -> int:
    from recagent_gym.runs.distill.fidelity import fidelity_report

    config, dataset = _config_and_dataset(args)
    table = fidelity_report(
        args.logs, args.model, dataset, config, args.out, replays=args.replays, bootstrap=args.bootstrap,
        seed=args.seed, real_llm_users=args.real_llm_users,
    )  # fmt: skip
    print(table)
    return 0


def run_transfer_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from recagent_gym.runs.cli import seed_list
    from recagent_gym.runs.comparisons.transfer import markdown, ranking, run_transfer, verdict
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.output_folder import check_output_folder
    from recagent_gym.runs.provenance import ReportFacts, declare_report, llm_description

    config = load_config(args.config, args.overrides)
    out = check_output_folder(args.out or config.train.output_dir, "--out" if args.out else "train.output_dir")
    config = config.in_run_folder(out)
    seeds = seed_list(args.seeds, "--seeds") if args.seeds else [config.train.seed]
    models = [m.strip() for m in args.user_models.split(",") if m.strip()]
    users = config.train.eval_users if args.users is None else args.users
    rows = run_transfer(
        config, out, n_users=users, seeds=seeds, user_models=models, progress=not args.no_progress,
        policies=[Path(p) for p in args.policy],
    )  # fmt: skip
    print(markdown(rows))
    for model in models:
        print(verdict(rows, model))
    print(ranking(rows))
    print(f"written: {out / 'transfer.md'}, {out / 'transfer.csv'}, {out / 'transfer.png'}")
    trained = {"policies": ", ".join(args.policy)} if args.policy else {}  # evaluated, not trained at ``seeds``
    facts = ReportFacts(out / "transfer.md", str(config.data.dataset), models, llm_description(config.llm),
                        [] if args.policy else seeds, users, extra=trained)  # fmt: skip
    declare_report(args, facts)
    return 0
