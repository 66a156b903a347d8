"""Shared pieces of the simulator tests: a deterministic scripted world, and a CLI entry for subprocess runs.

``python -m tests._sim_fixtures simulate ...`` runs the real ``simulate`` command with the scripted model and the
hashing embedder (``SIM_TEST_DELAY`` seconds of sleep per LLM batch make a run slow enough to be killed mid-way).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
from recagent_gym.runs.config import Config, load_config

BASE_SETTINGS: tuple[str, ...] = (
    "simulation.agents=12",
    "simulation.rounds=3",
    "simulation.progress=false",
    "simulation.activation=uniform",
    "simulation.active_prob=0.6",
    "simulation.max_pages=3",
    "recommender.model=popularity",
    "user.history_shots=3",
    "user.negative_shots=3",
)
"""Small and quick: 12 agents of the bundled data, 3 rounds, popularity recommender, scripted model."""


def reply(prompt: str) -> str:
    """A deterministic free-text answer that names a movie (so friends can hear about it)."""
    return "I watched Toy Story and Jumanji last week, both were great fun."


class SlowScriptedLLM(ScriptedLLM):
    """The scripted model, sleeping ``delay`` seconds per batch (for kill-mid-run tests)."""

    def __init__(self, delay: float = 0.0, **kwargs: Any) -> None:
        super().__init__(default=reply, **kwargs)
        self.delay = delay

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list:
        time.sleep(self.delay)
        return super().generate(prompts, **kwargs)

    def choose(self, prompts: Sequence[str], options: Sequence[Sequence[str]], **kwargs: Any) -> list:
        time.sleep(self.delay)
        return super().choose(prompts, options, **kwargs)


def make_llm(delay: float = 0.0) -> SlowScriptedLLM:
    return SlowScriptedLLM(delay)


def make_embedder() -> HashingEmbedder:
    return HashingEmbedder(32)


def settings(*extra: str) -> list[str]:
    return [*BASE_SETTINGS, *extra]


def make_config(*extra: str) -> Config:
    return load_config(None, settings(*extra))


def main(argv: Sequence[str] | None = None) -> int:
    """``recagent-gym`` with the scripted model and hashing embedder injected into the simulator commands."""
    from recagent_gym.runs.cli import build_parser, dispatch
    from recagent_gym.runs.commands import simulate as commands

    args = build_parser().parse_args(argv)
    delay = float(os.environ.get("SIM_TEST_DELAY", "0"))
    kwargs = {"llm": make_llm(delay), "embedder": make_embedder()}
    runs = {"simulate": commands.run_simulate, "sim-intervene": commands.run_intervene}
    runs["sim-interview"] = commands.run_interview
    if args.command not in runs:
        raise SystemExit(f"unsupported command {args.command}")
    args.func = lambda parsed: runs[args.command](parsed, **kwargs)
    return dispatch(args)


def events_bytes(folder: Path) -> bytes:
    return (folder / "events.jsonl").read_bytes()


if __name__ == "__main__":
    sys.exit(main())
