"""The ``recagent-gym`` command. Each subcommand lives with the package that owns it and registers itself here."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from recagent_gym.config import ConfigError

# Modules exposing ``register(subparsers) -> None``; each adds its subcommand(s) with ``func`` as the handler.
COMMAND_MODULES: tuple[str, ...] = (
    "recagent_gym.data.commands",
    "recagent_gym.llm.commands",
    "recagent_gym.policies.commands",
    "recagent_gym.evaluation.commands",
    "recagent_gym.simulator.commands",
    "recagent_gym.dashboard.commands",
)


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--config`` / ``--set`` pair shared by every command that reads configuration."""
    parser.add_argument("--config", default=None, help="YAML file (or a name from configs/, e.g. 'quickstart')")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one configuration key, e.g. --set llm.backend=openai (repeatable)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="recagent-gym", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"recagent-gym: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("recagent-gym: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
