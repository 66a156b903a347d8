"""``recagent-gym simulate`` (run, resume, branch, role play), ``sim-intervene`` and ``sim-interview``.

* ``simulate --config C [--set k=v] [--out DIR] [--rounds N] [--human NAME]``: a fresh run into ``DIR``.
* ``simulate --resume CHECKPOINT [--set k=v] [--out DIR2] [--rounds N]``: continue a run (a checkpoint file or a
  run folder, whose latest checkpoint is used); with ``--out`` into another folder, i.e. a branch. ``--rounds N``
  stops after N rounds (a pause: resume later).
* ``sim-intervene CHECKPOINT [--out DIR2] --profile NAME --traits ... | --post NAME TEXT | --message A B TEXT |
  --recommender MODEL``: change the saved world and save it as a checkpoint of the same round (in place, or in
  ``DIR2`` to keep the original branch).
* ``sim-interview CHECKPOINT --agent NAME --question Q``: the agent answers in character (nothing is saved).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO, Any

import numpy as np

from recagent_gym.llm.protocol import LLMError
from recagent_gym.runs.cli import add_config_arguments
from recagent_gym.runs.config import ConfigError, load_config
from recagent_gym.runs.simulator.errors import SimulationError
from recagent_gym.runs.simulator.events import Event
from recagent_gym.runs.simulator.human import HumanPlayer

DEFAULT_OUT = "outputs/simulation"


def register(subparsers: argparse._SubParsersAction) -> None:
    sim = subparsers.add_parser("simulate", help="run the round-based RecAgent simulator")
    add_config_arguments(sim)
    sim.add_argument("--out", default=None, help=f"output folder (default: {DEFAULT_OUT}; with --resume: its run)")
    sim.add_argument("--resume", default=None, metavar="CHECKPOINT", help="continue from a checkpoint or run folder")
    sim.add_argument("--rounds", type=int, default=None, metavar="N", help="stop after N rounds (pause)")
    sim.add_argument("--human", default=None, metavar="NAME", help="play this agent yourself (reads stdin)")
    sim.set_defaults(func=lambda args: run_simulate(args))

    edit = subparsers.add_parser("sim-intervene", help="edit a paused simulation (profile, post, message, recommender)")
    edit.add_argument("checkpoint", help="a checkpoint file or a run folder (its latest checkpoint)")
    edit.add_argument("--out", default=None, help="save the edited world in this new folder (a branch)")
    edit.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a resumable key (llm.*, recommender.*)",
    )
    edit.add_argument("--profile", default=None, metavar="NAME", help="the agent whose profile the next flags edit")
    edit.add_argument("--traits", default=None)
    edit.add_argument("--interests", default=None, help="comma-separated, e.g. 'Horror,Thriller'")
    edit.add_argument("--career", default=None)
    edit.add_argument("--post", nargs=2, default=None, metavar=("NAME", "TEXT"), help="inject a post by NAME")
    edit.add_argument("--message", nargs=3, default=None, metavar=("FROM", "TO", "TEXT"), help="inject a message")
    edit.add_argument("--recommender", default=None, help="swap the recommender (random, popularity, mf)")
    edit.set_defaults(func=lambda args: run_intervene(args))

    ask = subparsers.add_parser("sim-interview", help="ask an agent of a simulation a question, in character")
    ask.add_argument("checkpoint", help="a checkpoint file or a run folder (its latest checkpoint)")
    ask.add_argument("--agent", required=True, help="the agent's name or #id")
    ask.add_argument("--question", action="append", default=[], help="repeatable; none: read questions from stdin")
    ask.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ask.set_defaults(func=lambda args: run_interview(args))


def run_simulate(
    args: argparse.Namespace,
    *,
    llm: Any = None,
    embedder: Any = None,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
) -> int:
    """The ``simulate`` command; ``llm``/``embedder``/streams are injectable for tests."""
    from recagent_gym.runs.simulator import runner

    if args.rounds is not None and args.rounds < 1:
        raise ConfigError(f"--rounds must be >= 1, got {args.rounds}")
    human = HumanPlayer(args.human, stdin, stdout) if args.human else None
    if args.resume:
        if args.config:
            raise ConfigError("--config cannot be combined with --resume (the checkpoint has its config); use --set")
        out = Path(args.out) if args.out else None
        sim = runner.resume(args.resume, out, args.overrides, llm=llm, embedder=embedder, human=human)
    else:
        config = load_config(args.config, args.overrides)
        out = Path(args.out or DEFAULT_OUT)
        sim = runner.start(config.in_run_folder(out), out, llm=llm, embedder=embedder, human=human)
    try:
        check_rounds_left(sim, args.rounds)
        sim.run(args.rounds)
    except LLMError as exc:
        raise SimulationError(
            f"language model failed in round {sim.clock.round + 1}: {exc}; the checkpoints in "
            f"{sim.out / 'checkpoints'} are intact: fix the cause and continue with --resume {sim.out}"
        ) from exc
    finally:
        sim.close()
    summary = sim.summary()
    print(
        f"{summary['rounds']} rounds done in {sim.out}: {summary['interactions']} watches, "
        f"{summary['llm']['prompt_tokens'] + summary['llm']['completion_tokens']} tokens, "
        f"{summary['mean_seconds_per_round']:.1f} s per round"
    )
    return 0


def check_rounds_left(sim: Any, rounds: int | None) -> None:
    """``--rounds N`` pauses a run before its ``simulation.rounds``: on a run that has done them all it would do
    nothing and exit 0, so it is refused with the way to continue; beyond what is left, the run stops at its end."""
    target, done = sim.config.simulation.rounds, sim.clock.round
    if rounds is None:
        return
    if done >= target:
        raise ConfigError(
            f"--rounds {rounds}: {sim.out} has done all its simulation.rounds={target} rounds; to continue it, "
            f"resume with --set simulation.rounds={done + rounds}"
        )
    if rounds > target - done:
        print(
            f"--rounds {rounds}: only {target - done} of simulation.rounds={target} are left; the run ends after them"
            f" (raise it with --set simulation.rounds=N to go further)",
            file=sys.stderr,
        )


def run_intervene(args: argparse.Namespace, *, llm: Any = None, embedder: Any = None) -> int:
    from recagent_gym.runs.simulator import runner

    edits = {k: v for k, v in (("traits", args.traits), ("career", args.career)) if v is not None}
    if args.interests is not None:
        edits["interests"] = [s.strip() for s in args.interests.split(",") if s.strip()]
    if bool(edits) != bool(args.profile):
        raise ConfigError("--profile NAME goes with at least one of --traits/--interests/--career, and they with it")
    if not (args.profile or args.post or args.message or args.recommender):
        raise ConfigError("nothing to do: pass --profile, --post, --message or --recommender")
    overrides = list(args.overrides) + ([f"recommender.model={args.recommender}"] if args.recommender else [])
    # Validate everything against the loaded world before anything is written.
    sim = runner.resume(args.checkpoint, None, overrides, llm=llm, embedder=embedder, dry=True)
    try:
        path = _intervene(sim, args, edits)
    finally:
        sim.close()  # the language model: a remote backend's HTTP sessions, the cache's connection
    print(f"intervention saved: {path}")
    return 0


def _intervene(sim: Any, args: argparse.Namespace, edits: dict[str, Any]) -> Path:
    """Apply the edits of ``sim-intervene`` to the loaded world and save it; returns the checkpoint written."""
    from recagent_gym.runs.simulator import runner
    from recagent_gym.runs.simulator.social_step import deliver_message, deliver_post

    if args.profile:
        sim.edit_profile(args.profile, **edits)
    t, r = sim.clock.time_h, sim.clock.round
    if args.post:
        author = sim.find_agent(args.post[0])
        deliver_post(sim.model, author, args.post[1], t)
        sim.note(Event(r, t, "intervention", author, sim.names[author], text=f"injected post: {args.post[1]}"))
    if args.message:
        sender, receiver = sim.find_agent(args.message[0]), sim.find_agent(args.message[1])
        deliver_message(sim.model, sender, receiver, args.message[2], t)
        sim.note(
            Event(
                r,
                t,
                "intervention",
                sender,
                sim.names[sender],
                text=f"injected message to {sim.names[receiver]}: {args.message[2]}",
            )
        )
    return runner.save_intervention(sim, args.checkpoint, Path(args.out) if args.out else None)


def run_interview(
    args: argparse.Namespace, *, llm: Any = None, embedder: Any = None, stdin: IO[str] | None = None
) -> int:
    from recagent_gym.runs.simulator import runner

    sim = runner.resume(args.checkpoint, None, args.overrides, llm=llm, embedder=embedder, dry=True)
    try:
        user = sim.find_agent(args.agent)
        questions = list(args.question) or [line.strip() for line in (stdin or sys.stdin) if line.strip()]
        rng = np.random.default_rng(np.random.SeedSequence([sim.config.simulation.seed, sim.clock.round, user]))
        for question in questions:
            answer = sim.model.interview(user, question, rng, sim.clock.time_h)
            print(f"Interviewer: {question}\n{sim.names[user]}: {answer}")
    finally:
        sim.close()
    return 0
