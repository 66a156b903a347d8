"""``recagent-gym serve --config C [--host 127.0.0.1] [--port 8000] [--out DIR]``: the web dashboard."""

from __future__ import annotations

import argparse
import ipaddress
import logging
from pathlib import Path
from typing import Any

from recagent_gym.cli import add_config_arguments
from recagent_gym.config import ConfigError, load_config

log = logging.getLogger(__name__)

DEFAULT_OUT = "outputs/dashboard"


def register(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser("serve", help="web dashboard: watch, steer and play a simulation in the browser")
    add_config_arguments(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    serve.add_argument("--out", default=DEFAULT_OUT, help=f"folder of the runs (run-001, ...; default: {DEFAULT_OUT})")
    serve.set_defaults(func=lambda args: run_serve(args))


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run_serve(args: argparse.Namespace, *, llm: Any = None, embedder: Any = None) -> int:
    """Build the simulation, then serve the dashboard until interrupted; ``llm``/``embedder`` for tests."""
    import uvicorn

    from recagent_gym.dashboard.app import create_app
    from recagent_gym.dashboard.controller import Dashboard

    if not 0 < args.port < 65536:
        raise ConfigError(f"--port must be in 1..65535, got {args.port}")
    if not _is_loopback(args.host):
        log.warning("serving on %s: the dashboard has no authentication; anyone who reaches it controls it", args.host)
    config = load_config(args.config, args.overrides).in_run_folder(args.out)  # the LLM cache beside the runs
    dashboard = Dashboard(config, Path(args.out), llm=llm, embedder=embedder)
    try:
        print(f"dashboard: http://{args.host}:{args.port}/  (runs in {args.out}; Ctrl-C stops)", flush=True)
        uvicorn.run(create_app(dashboard), host=args.host, port=args.port, log_level="warning")
    finally:
        dashboard.close()
    return 0
