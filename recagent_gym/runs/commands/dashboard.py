"""``recagent-gym serve --config C [--host 127.0.0.1] [--port 8000] [--allow-host NAME] [--out DIR]``: the web
dashboard."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import logging
import socket
from pathlib import Path
from typing import Any

from recagent_gym.runs.cli import add_config_arguments
from recagent_gym.runs.config import ConfigError, load_config
from recagent_gym.runs.dashboard.guard import allowed_hosts, is_loopback

log = logging.getLogger(__name__)

DEFAULT_OUT = "outputs/dashboard"


def register(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser("serve", help="web dashboard: watch, steer and play a simulation in the browser")
    add_config_arguments(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="another Host name the dashboard answers to (repeatable; default: the bound address, loopback names)",
    )
    serve.add_argument("--out", default=DEFAULT_OUT, help=f"folder of the runs (run-001, ...; default: {DEFAULT_OUT})")
    serve.set_defaults(func=lambda args: run_serve(args))


def run_serve(args: argparse.Namespace, *, llm: Any = None, embedder: Any = None) -> int:
    """Build the simulation, then serve the dashboard until interrupted; ``llm``/``embedder`` for tests."""
    import uvicorn

    from recagent_gym.runs.dashboard.app import create_app
    from recagent_gym.runs.dashboard.controller import Dashboard

    if not 0 < args.port < 65536:
        raise ConfigError(f"--port must be in 1..65535, got {args.port}")
    check_address(args.host, args.port)
    try:
        allowed_hosts(args.host, args.port, args.allow_host)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if not is_loopback(args.host):
        log.warning(
            "serving on %s: the dashboard has no login (its token is in its page); anyone who reaches it controls it",
            args.host,
        )
    config = load_config(args.config, args.overrides).in_run_folder(args.out)  # the LLM cache beside the runs
    dashboard = Dashboard(config, Path(args.out), llm=llm, embedder=embedder)
    try:
        shown = f"[{args.host}]" if ":" in args.host else args.host
        print(f"dashboard: http://{shown}:{args.port}/  (runs in {args.out}; Ctrl-C stops)", flush=True)
        app = create_app(dashboard, host=args.host, port=args.port, allow_hosts=args.allow_host)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        dashboard.close()
    return 0


def check_address(host: str, port: int) -> None:
    """A :class:`ConfigError` unless ``host:port`` can be bound now, checked before the run folder is made.

    Binds (and closes) a socket the way uvicorn will: an address that is no IP address (``256.1.1.1``), a name that
    does not resolve, an address of another machine and a port in use each get one line instead of uvicorn's own
    message after the dashboard's run folder exists.
    """
    bare = host.strip("[]")
    looks_numeric = bool(bare) and all(c.isdigit() or c == "." for c in bare)
    if looks_numeric or ":" in bare:
        try:
            ipaddress.ip_address(bare)
        except ValueError:
            raise ConfigError(f"--host {host!r} is not an IP address") from None
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bare, port))
        except socket.gaierror as exc:
            raise ConfigError(f"--host {host!r}: no such address ({exc.strerror})") from None
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"--port {port} is in use on {host} (choose another with --port)") from None
            raise ConfigError(f"--host {host!r}, --port {port}: cannot listen there ({exc.strerror})") from None
