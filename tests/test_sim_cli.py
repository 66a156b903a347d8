"""The commands end to end: kill -9 mid-run then resume, role play from piped input, intervene, interview, errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recagent_gym.runs.cli import main as cli_main
from recagent_gym.runs.simulator import runner
from recagent_gym.runs.simulator.checkpoint import checkpoint_path, load_checkpoint
from tests._sim_fixtures import events_bytes, main, make_config, make_embedder, make_llm, settings

ROOT = Path(__file__).resolve().parent.parent


def sets(*extra: str) -> list[str]:
    return [arg for s in settings(*extra) for arg in ("--set", s)]


def spawn(args: list[str], delay: float = 0.0, **kwargs: object) -> subprocess.Popen:
    env = {**os.environ, "SIM_TEST_DELAY": str(delay), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests._sim_fixtures", *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


@pytest.mark.slow
def test_kill_mid_run_then_resume_loses_at_most_the_round_in_progress(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    runner.start(make_config("simulation.rounds=4"), reference, llm=make_llm(), embedder=make_embedder()).run()
    out = tmp_path / "killed"
    proc = spawn(["simulate", *sets("simulation.rounds=4"), "--out", str(out)], delay=0.05)
    deadline = time.monotonic() + 240
    while not checkpoint_path(out, 2).exists():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "no checkpoint of round 2 in time"
        time.sleep(0.05)
    time.sleep(0.3)  # well inside round 3: each round makes dozens of delayed LLM batches
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    path, saved = load_checkpoint(out)
    assert saved["round"] in (2, 3), f"at most the round in progress is lost (latest: {path.name})"
    resumed = runner.resume(out, llm=make_llm(), embedder=make_embedder())
    resumed.run()
    assert events_bytes(out) == events_bytes(reference)
    assert (out / "interactions.csv").read_bytes() == (reference / "interactions.csv").read_bytes()


@pytest.mark.slow
def test_role_play_from_piped_input(tmp_path: Path) -> None:
    out = tmp_path / "play"
    script = "r\nw 1 5\nl\ns\npost: I loved Pulp Fiction, go see it\n"
    proc = spawn(["simulate", *sets("simulation.rounds=2"), "--human", "#0", "--out", str(out)], stdin=subprocess.PIPE)
    stdout, stderr = proc.communicate(script, timeout=300)
    assert proc.returncode == 0, stderr[-2000:]
    assert "page 1:" in stdout and "enters the recommender system" in stdout
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    mine = [e for e in events if e["agent"] == 0]
    watch = next(e for e in mine if e["kind"] == "watch")
    assert watch["round"] == 0 and watch["extra"]["rating"] == 5.0
    assert any(e["kind"] == "leave" and e["round"] == 0 for e in mine)
    social = [e for e in mine if e["round"] == 1 and e["kind"] in ("post", "social_none")]
    assert social, "the human's social choice is logged"
    if social[0]["kind"] == "post":
        assert social[0]["extra"]["human"] and "Pulp Fiction" in social[0]["titles"]
    rows = (out / "interactions.csv").read_text().splitlines()
    assert any(r.startswith(f"0,{watch['items'][0]},5.0,") for r in rows)


@pytest.mark.slow
def test_intervene_and_interview_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["simulate", *sets("simulation.rounds=1"), "--out", str(out)]) == 0
    sim = runner.resume(out, llm=make_llm(), embedder=make_embedder(), dry=True)
    name = sim.names[1]
    assert (
        main(["sim-intervene", str(out), "--profile", name, "--traits", "grumpy", "--post", name, "Watch Casino"]) == 0
    )
    saved = load_checkpoint(out)[1]
    assert saved["round"] == 1
    assert saved["state"]["profile_edits"] == {"1": {"traits": "grumpy"}}
    assert any("injected post" in e["text"] for e in saved["state"]["pending_events"])
    capsys.readouterr()
    assert main(["sim-interview", str(out), "--agent", name, "--question", "How are you?"]) == 0
    printed = capsys.readouterr().out
    assert f"{name}: I watched Toy Story" in printed
    assert main(["simulate", "--resume", str(out), "--rounds", "1", *sets("simulation.rounds=2")[-2:]]) == 0
    assert "injected post: Watch Casino" in (out / "events.log").read_text()


@pytest.mark.slow
def test_bad_input_exits_with_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["simulate", "--set", "simulation.agnets=3", "--out", str(tmp_path / "a")]) == 2
    assert "simulation.agnets: unknown key" in capsys.readouterr().err
    assert cli_main(["simulate", "--resume", str(tmp_path / "missing.json")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err
    assert cli_main(["simulate", "--resume", str(tmp_path), "--config", "x.yaml"]) == 2
    assert "--config cannot be combined with --resume" in capsys.readouterr().err
    out = tmp_path / "run"
    assert main(["simulate", *sets("simulation.rounds=1"), "--out", str(out)]) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["sim-interview", str(out), "--agent", "Nobody At All", "--question", "hi"]) == 2
    assert "unknown agent 'Nobody At All'" in capsys.readouterr().err
    assert main(["sim-intervene", str(out), "--message", "#0", "Nobody At All", "hi"]) == 2
    assert main(["simulate", *sets("simulation.rounds=1"), "--out", str(out)]) == 2
    assert "already holds a simulation" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "a").exists()
