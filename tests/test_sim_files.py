"""Atomic writes: permissions like a plain write, and the temp files of a killed writer cleaned on start/resume."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recagent_gym.runs.simulator import runner
from recagent_gym.runs.simulator.files import atomic_write_text, remove_stale_temp_files
from tests._sim_fixtures import make_config, make_embedder, make_llm

ROOT = Path(__file__).resolve().parent.parent

# Writes a file atomically but hangs before the rename, so the test can kill -9 it mid-write.
KILLED_WRITER = """
import os, sys, time
from pathlib import Path
from recagent_gym.runs.simulator import files
def hang(fd):
    print("writing", flush=True)
    time.sleep(600)
files.os.fsync = hang
files.atomic_write_text(Path(sys.argv[1]), "new text")
"""


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022():  # type: ignore[no-untyped-def]
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_atomic_writes_get_the_mode_of_a_plain_write(tmp_path: Path, umask_022: None) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic = tmp_path / "atomic.txt"
    atomic_write_text(atomic, "x")
    assert _mode(atomic) == _mode(plain) == 0o644
    os.chmod(atomic, 0o640)  # replacing a file keeps its mode, as open(path, "w") does
    atomic_write_text(atomic, "y")
    assert _mode(atomic) == 0o640 and atomic.read_text() == "y"


def _killed_mid_write(target: Path) -> list[Path]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(target)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return sorted(target.parent.glob(f".{target.name}.*.tmp"))


def test_temp_file_of_a_killed_writer_is_removed_and_live_ones_kept(tmp_path: Path) -> None:
    target = tmp_path / "checkpoints" / "round_0001.json"
    target.parent.mkdir()
    target.write_text("old")
    leftovers = _killed_mid_write(target)
    assert len(leftovers) == 1
    live = target.parent / f".{target.name}.{os.getpid()}-abc123.tmp"  # this process may be writing it now
    live.write_text("in progress")
    other = tmp_path / ".hidden.tmp"  # not our pattern
    other.write_text("keep")
    assert remove_stale_temp_files(tmp_path) == leftovers
    assert not leftovers[0].exists() and live.exists() and other.exists()
    assert target.read_text() == "old"  # the killed write never touched the target


@pytest.mark.slow
def test_start_and_resume_clean_stale_temp_files(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    first = _killed_mid_write(out / "config.yaml")  # killed before the run's first file was in place
    runner.start(make_config("simulation.rounds=1"), out, llm=make_llm(), embedder=make_embedder()).run()
    assert first and not any(p.exists() for p in first)
    second = _killed_mid_write(out / "checkpoints" / "round_0001.json")
    time.sleep(0.01)
    runner.resume(out, None, ["simulation.rounds=2"], llm=make_llm(), embedder=make_embedder())
    assert second and not any(p.exists() for p in second)
    assert not list(out.rglob("*.tmp"))
