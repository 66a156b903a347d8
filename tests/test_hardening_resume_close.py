"""Issue 28: commands that use the OpenAI-compatible backend close it, so they end without aiohttp's "Unclosed client
session" lines; ``sim-intervene`` and ``users collect`` did not. Real subprocesses against a local server, since
those lines are printed when the interpreter shuts down."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recagent_gym.llm.local_server import LocalServer
from tests._sim_fixtures import settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    with LocalServer(reply=None, choice="first") as srv:
        yield srv


def command(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "tests._hardening_resume_cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def openai_sets(server: LocalServer, *extra: str) -> list[str]:
    llm = ("llm.backend=openai", f"llm.base_url={server.base_url}", "llm.model=test", "llm.structured_output=text")
    return [a for s in (*llm, *extra) for a in ("--set", s)]


def clean_exit(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert "Unclosed" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.slow
def test_sim_intervene_closes_its_backend(server: LocalServer, tmp_path: Path) -> None:
    base = [s for s in settings("simulation.agents=3", "simulation.rounds=2") if not s.startswith("llm.")]
    run = [a for s in base for a in ("--set", s)]
    clean_exit(command("simulate", *run, *openai_sets(server), "--out", "run", "--rounds", "1", cwd=tmp_path))
    # a post and a message: the receivers' memories take them in through the server
    edit = ["--post", "#0", "Watch Casino", "--message", "#0", "#1", "hello there"]
    clean_exit(command("sim-intervene", "run", "--set", f"llm.base_url={server.base_url}", *edit, cwd=tmp_path))


@pytest.mark.slow
def test_users_collect_closes_its_backend(server: LocalServer, tmp_path: Path) -> None:
    argv = ["users", "collect", "--out", "logs", "--sessions", "2", "--batch", "2", "--max-pages", "2"]
    done = command(*argv, "--no-progress", *openai_sets(server, "data.max_users=20"), cwd=tmp_path)
    clean_exit(done)
    assert "2 new decisions" in done.stdout or "new decisions" in done.stdout
