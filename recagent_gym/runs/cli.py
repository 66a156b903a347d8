"""The ``recagent-gym`` command. Each subcommand lives with the package that owns it and registers itself here.

:func:`main` is the one place where the project's typed errors (:class:`~recagent_gym.errors.RecAgentError`) become
a one-line message and exit status 2, and where logging is set up (third-party INFO lines only with ``-v``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
import traceback
from collections.abc import Sequence

from recagent_gym import __version__
from recagent_gym.errors import RecAgentError

DESCRIPTION = """\
Recommender-system research with simulated users: a Gymnasium environment in which the recommender is the RL
policy and the users are LLM agents with profiles, memory and a social life (after RecAgent, arXiv 2306.02552),
classical user models and recommenders as baselines, the round-based RecAgent simulator, and the paper's
evaluations. Runs offline on a CPU with the embedded Gemma 3 270M model, or against any OpenAI-compatible server.
"""

EPILOG = """\
examples:
  recagent-gym train --config quickstart                    train PPO against LLM users (a few minutes)
  recagent-gym evaluate policies --config quickstart --policy ppo=runs/quickstart/policy.zip
  recagent-gym simulate --config simulate_small --out runs/sim
  recagent-gym serve --config simulate_small                the web dashboard
  recagent-gym data info bundled                            what a dataset holds

--config takes a YAML file or the name of a shipped configuration (quickstart, simulate_small, ...);
--set KEY=VALUE overrides one key. 'recagent-gym COMMAND --help' describes a command.
"""

# Modules exposing ``register(subparsers) -> None``; each adds its subcommand(s) with ``func`` as the handler.
COMMAND_MODULES: tuple[str, ...] = (
    "recagent_gym.runs.commands.data",
    "recagent_gym.runs.commands.llm",
    "recagent_gym.runs.commands.train",
    "recagent_gym.runs.commands.evaluate",
    "recagent_gym.runs.commands.calibrate",
    "recagent_gym.runs.commands.simulate",
    "recagent_gym.runs.commands.dashboard",
    "recagent_gym.runs.commands.users",
)

EXIT_ERROR = 2
"""Exit status of a typed error (bad configuration, data, backend, run), as for a command-line usage error."""


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--config`` / ``--set`` pair shared by every command that reads configuration."""
    parser.add_argument(
        "--config", default=None, help="YAML file, or the name of a shipped configuration (e.g. 'quickstart')"
    )
    add_set_argument(parser)


def add_set_argument(
    parser: argparse.ArgumentParser, help: str = "override one configuration key, e.g. --set llm.backend=openai"
) -> None:
    """``--set KEY=VALUE`` (repeatable) into ``args.overrides``."""
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=f"{help} (repeatable)"
    )


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"wants a whole number of processes >= 1, got {text!r}")
    return value


def add_jobs_argument(parser: argparse.ArgumentParser) -> None:
    """``--jobs N``: env seeds run in ``N`` worker processes at once (argparse refuses anything but a whole number
    >= 1)."""
    parser.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                        help="env seeds run in N processes at once (default 1; 2 on a 2-core machine halves the wall "
                             "time: each seed is single-threaded)")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recagent-gym",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logging, other libraries' INFO lines, and tracebacks"
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(subparsers)
    return parser


def configure_logging(*, verbose: bool) -> None:
    """This project's INFO lines (DEBUG with ``verbose``); other libraries' from WARNING (INFO with ``verbose``).

    Like :func:`logging.basicConfig`, nothing changes when the root logger already has handlers (an embedding
    application, pytest).
    """
    own, others = (logging.DEBUG, logging.INFO) if verbose else (logging.INFO, logging.WARNING)

    def keep(record: logging.LogRecord) -> bool:
        mine = record.name == "recagent_gym" or record.name.startswith("recagent_gym.") or record.name == "__main__"
        return record.levelno >= (own if mine else others)

    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(keep)
    logging.basicConfig(level=own, handlers=[handler])


def error_message(exc: RecAgentError) -> str:
    """The error as one line: ``recagent-gym: <kind>: <message>`` (a multi-line message joined with '; ')."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = "; ".join(lines).replace(":;", ":") or type(exc).__name__
    return f"recagent-gym: {getattr(exc, 'label', 'error')}: {text}"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command line a results page states
    configure_logging(verbose=args.verbose)
    return dispatch(args)


OUTPUT_OPTIONS: dict[str, str] = {"out": "--out", "output_dir": "--output-dir"}
"""The options naming a command's output folder, checked before the command runs (:func:`check_outputs`)."""


def check_outputs(args: argparse.Namespace) -> None:
    """Every output folder given on the command line can be written, before the command loads anything."""
    from recagent_gym.runs.output_folder import check_output_folder

    for dest, option in OUTPUT_OPTIONS.items():
        value = getattr(args, dest, None)
        if value is not None:
            check_output_folder(value, option)
    page = getattr(args, "results_page", None)
    if page is not None:
        from pathlib import Path

        from recagent_gym.settings_section import ConfigError

        if not str(page).strip() or Path(page).is_dir():
            raise ConfigError(f"--results-page: {page!r} is not a file path")
        # not locked: commands writing different pages of one folder (docs/results) may run at once; each page is
        # written whole by os.replace (runs/provenance.py)
        check_output_folder(Path(page).parent, "--results-page", lock=False)


SEED_OPTIONS: dict[str, str] = {"seed": "--seed"}
SEED_LIST_OPTIONS: dict[str, str] = {"seeds": "--seeds", "env_seeds": "--env-seeds"}
"""The options giving a seed or a comma-separated list of seeds, checked before the command runs."""


def seed_list(text: str, what: str) -> list[int]:
    """``"0,1,2"`` as distinct seeds (each ``0 <= s < 2**32``); one :class:`ConfigError` naming ``what`` if not."""
    from recagent_gym.settings_section import ConfigError, check_seed

    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"{what} wants integers separated by commas, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"{what} wants distinct integers separated by commas, got {text!r}")
    for seed in seeds:
        try:
            check_seed(seed, "each seed")
        except ValueError as exc:
            raise ConfigError(f"{what}: {exc}") from None
    return seeds


def check_seeds(args: argparse.Namespace) -> None:
    """Every seed given on the command line is a valid seed (``0 <= s < 2**32``), before the command runs: a
    negative one used to fail deep inside numpy, after a folder or ``collect.json`` had been written with it."""
    from recagent_gym.settings_section import ConfigError, check_seed

    for dest, option in SEED_OPTIONS.items():
        value = getattr(args, dest, None)
        if isinstance(value, int):
            try:
                check_seed(value, option)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
    for dest, option in SEED_LIST_OPTIONS.items():
        value = getattr(args, dest, None)
        if isinstance(value, str):
            seed_list(value, option)


def dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command; a typed error becomes one line on stderr and :data:`EXIT_ERROR`.

    Every output folder the command checks is locked for it until it ends (one writer per folder:
    :func:`~recagent_gym.runs.output_folder.one_writer`). A command that declared a results report
    (:func:`~recagent_gym.runs.provenance.declare_report`) gets its provenance header here, with the command's wall
    time, once it has returned 0."""
    from recagent_gym.runs.output_folder import one_writer

    try:
        with one_writer():
            check_seeds(args)
            check_outputs(args)
            commit = None
            if hasattr(args, "results_page"):  # a results command: the commit that runs, not the one at the end
                from recagent_gym.runs.provenance import git_commit

                commit = git_commit()
            started = time.perf_counter()
            status = int(args.func(args) or 0)
            if status == 0 and getattr(args, "report_facts", None) is not None:
                from recagent_gym.runs.provenance import stamp_report

                page = stamp_report(args, time.perf_counter() - started, commit=commit)
                if page is not None:
                    print(f"results page: {page}")
            return status
    except RecAgentError as exc:
        if args.verbose:
            traceback.print_exc()
        print(error_message(exc), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("recagent-gym: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
