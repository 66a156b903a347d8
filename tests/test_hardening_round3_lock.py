"""Issue 54, one writer per run folder: two commands on one folder at once used to append the same rows twice (146
rows for 73 decisions). Every command now locks each output folder it writes (``runs/output_folder.py``); a second
process is refused in one line before it writes anything, the first finishes as if alone, and the lock of a
process killed with SIGKILL does not block the next run.

The first process is the real ``simulate`` command in a subprocess whose scripted model waits for a gate file
(:mod:`tests._hardening_round3_cli`), so the second one meets it at a known point: lock taken, nothing appended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recagent_gym.runs.cli import main as cli_main
from recagent_gym.runs.output_folder import LOCK_NAME, FolderLocks, check_output_folder, one_writer
from recagent_gym.runs.simulator import runner
from tests._sim_fixtures import events_bytes, main, make_config, make_embedder, make_llm, settings

ROOT = Path(__file__).resolve().parent.parent
IN_USE = "recagent-gym: folder in use: "


def sets(*extra: str) -> list[str]:
    return [arg for s in settings(*extra) for arg in ("--set", s)]


def spawn(args: list[str], gate: Path | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ROUND3_GATE", None)
    if gate is not None:
        env["ROUND3_GATE"] = str(gate)
    return subprocess.Popen(
        [sys.executable, "-m", "tests._hardening_round3_cli", *args],
        cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def wait_for_lock(folder: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while not (folder / LOCK_NAME).exists():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the first process never took its lock"
        time.sleep(0.05)


def refused(proc: subprocess.Popen) -> str:
    _, err = proc.communicate(timeout=60)
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 2 and "Traceback" not in err, err[-2000:]
    assert len(lines) == 1 and lines[0].startswith(IN_USE), err
    return lines[0]


def reference(tmp_path: Path) -> Path:
    """The same three rounds, run alone."""
    folder = tmp_path / "reference"
    runner.start(make_config(), folder, llm=make_llm(), embedder=make_embedder()).run()
    return folder


def same_run(a: Path, b: Path) -> None:
    assert events_bytes(a) == events_bytes(b)  # not one event duplicated nor lost
    assert (a / "interactions.csv").read_bytes() == (b / "interactions.csv").read_bytes()


@pytest.fixture
def paused(tmp_path: Path) -> Path:
    """A run paused after round 1 of 3 (``simulate --rounds 1``)."""
    run = tmp_path / "run"
    assert main(["simulate", *sets(), "--out", str(run), "--rounds", "1"]) == 0
    return run


@pytest.mark.slow
def test_two_resumes_of_one_run_one_is_refused_and_no_row_is_duplicated(paused, tmp_path, capsys):
    gate = tmp_path / "gate"
    first = spawn(["simulate", "--resume", str(paused), "--set", "simulation.rounds=3"], gate=gate)
    try:
        wait_for_lock(paused, first)
        line = refused(spawn(["simulate", "--resume", str(paused), "--set", "simulation.rounds=3"]))
        assert f"(process {first.pid})" in line and str(paused) in line
        for argv in (  # any command writing the folder is refused before it loads anything
            ["users", "collect", "--out", str(paused), "--sessions", "40"],
            ["simulate", "--out", str(paused)],
            ["train", "--output-dir", str(paused)],
        ):
            capsys.readouterr()
            assert cli_main(argv) == 2
            err = capsys.readouterr().err
            assert err.startswith(IN_USE) and len(err.splitlines()) == 1 and "Traceback" not in err, err
    finally:
        gate.touch()
        _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err[-2000:]
    same_run(paused, reference(tmp_path))
    assert not (paused / LOCK_NAME).exists()


@pytest.mark.slow
def test_two_fresh_runs_into_one_folder_one_is_refused(tmp_path):
    out, gate = tmp_path / "out", tmp_path / "gate"
    first = spawn(["simulate", *sets(), "--out", str(out)], gate=gate)
    try:
        wait_for_lock(out, first)
        refused(spawn(["simulate", *sets(), "--out", str(out)]))
    finally:
        gate.touch()
        _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err[-2000:]
    same_run(out, reference(tmp_path))
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


@pytest.mark.slow
def test_the_lock_of_a_killed_writer_does_not_block_the_next_run(paused, tmp_path):
    first = spawn(["simulate", "--resume", str(paused)], gate=tmp_path / "never")
    wait_for_lock(paused, first)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    assert (paused / LOCK_NAME).exists()  # left by the killed process, but no longer locked
    assert main(["simulate", "--resume", str(paused)]) == 0
    same_run(paused, reference(tmp_path))
    assert not (paused / LOCK_NAME).exists()


@pytest.mark.slow
def test_a_refused_command_leaves_no_folder_and_a_finished_one_no_lock(tmp_path, capsys):
    deep = tmp_path / "new" / "deeper"
    assert cli_main(["simulate", "--config", str(tmp_path / "missing.yaml"), "--out", str(deep)]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "new").exists()  # made for the lock, removed with it
    out = tmp_path / "done"
    assert main(["simulate", *sets("simulation.rounds=1"), "--out", str(out)]) == 0
    assert (out / "events.jsonl").exists() and not (out / LOCK_NAME).exists()


def test_one_lock_per_tree_and_none_outside_a_command(tmp_path):
    check_output_folder(tmp_path / "library", "train.output_dir")  # the library used from Python locks nothing
    assert not (tmp_path / "library").exists()
    with one_writer() as locks:
        check_output_folder(tmp_path / "run", "--out")
        check_output_folder(tmp_path / "run" / "seed_0", "train.output_dir")  # covered by the run's lock
        assert isinstance(locks, FolderLocks) and len(locks.held) == 1
        assert (tmp_path / "run" / LOCK_NAME).read_text().strip() == str(os.getpid())
    assert not (tmp_path / "run").exists()


def test_a_folder_of_results_pages_is_checked_but_not_locked(tmp_path):
    pages = tmp_path / "docs" / "results"
    with one_writer() as locks:
        check_output_folder(pages, "--results-page", lock=False)  # many commands write pages there at once
        assert locks is not None and not locks.held and not (pages / LOCK_NAME).exists()
    with one_writer(), pytest.raises(Exception, match="not a folder"):
        (tmp_path / "file").write_text("x")
        check_output_folder(tmp_path / "file" / "results", "--results-page", lock=False)
