"""Issue 54, every setting checked where the configuration is read, before any work or folder: seeds (non-negative,
below 2**32, in any spelling), the comparison's recommender lists, policies (loaded before fitting), ``--rounds``
on a finished run; and the dashboard's answer to a bad agent id (4xx, never 500).

Each bad input ends in one ``recagent-gym: ...`` line and exit status 2, with no traceback and nothing created."""

from __future__ import annotations

import time
import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from recagent_gym.runs.cli import main as cli_main
from recagent_gym.runs.dashboard.app import create_app
from tests._dashboard_fixtures import make_dashboard
from tests._sim_fixtures import main as sim_main
from tests._sim_fixtures import settings


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str], main=cli_main) -> str:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("recagent-gym: "), err
    return lines[0]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder: whatever a refused command creates shows up in it."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


# -- seeds ------------------------------------------------------------------------------------------------------

SEED_CASES = [
    ["evaluate", "rl-comparison", "--env-seeds=-1", "--output-dir", "out"],
    ["evaluate", "rl-comparison", "--env-seeds", "0,4294967296", "--output-dir", "out"],
    ["evaluate", "rl-comparison", "--set", "train.split_seed=-1", "--output-dir", "out"],
    ["evaluate", "rl-comparison", "--set", "user.recsim_seed=-1", "--output-dir", "out"],
    ["evaluate", "rl-comparison", "--set", "user.recsim_seed=0x100000000", "--output-dir", "out"],
    ["evaluate", "rl-comparison", "--set", "train.seeds=[0,-2]", "--output-dir", "out"],
    ["users", "collect", "--out", "out", "--sessions", "2", "--seed", "-1"],
    ["users", "collect", "--out", "out", "--sessions", "2", "--seed=4294967296"],
    ["users", "transfer", "--out", "out", "--seeds", "0,-1"],
    ["evaluate", "policies", "--seed", "-1", "--output-dir", "out"],
    ["evaluate", "discrimination", "--seed", "-1", "--out", "out"],
    ["simulate", "--set", "simulation.seed=-1", "--out", "out"],
    ["simulate", "--set", "llm.seed=4294967296", "--out", "out"],
    ["train", "--seed", "-1", "--output-dir", "out"],
    ["train", "--set", "evaluation.seed=-1", "--output-dir", "out"],
]


@pytest.mark.parametrize("argv", SEED_CASES, ids=lambda argv: " ".join(argv))
def test_a_seed_out_of_range_is_one_line_before_any_folder(capsys, work, argv):
    started = time.monotonic()
    line = one_line(capsys, argv)
    assert "from 0 to 4294967295" in line or "greater than or equal to 0" in line, line
    assert time.monotonic() - started < 20  # refused when the configuration is read, not after a run
    assert list(work.iterdir()) == []  # no out/, no env_seed_-1/config.yaml, no collect.json


def test_a_config_file_with_a_negative_seed_is_refused(capsys, work):
    (work.parent / "c.yaml").write_text("train:\n  split_seed: -7\n")
    line = one_line(capsys, ["train", "--config", str(work.parent / "c.yaml"), "--output-dir", "out"])
    assert "train.split_seed" in line and list(work.iterdir()) == []


# -- the comparison's recommender lists ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("compare", "extra", "says"),
    [
        ("[]", [], "train.compare is empty"),
        ("[bogus]", [], "unknown recommenders ['bogus']"),
        ("[random,random,ppo]", [], "more than once"),
        ("[random,popularity]", ["--env-seeds", "0,1"], "at least one of each"),
        ("[ppo,slateq]", ["--env-seeds", "0"], "at least one of each"),
    ],
)
def test_a_bad_comparison_list_is_refused_before_any_seed_runs(capsys, work, compare, extra, says):
    started = time.monotonic()
    argv = ["evaluate", "rl-comparison", "--set", f"train.compare={compare}", *extra, "--output-dir", "out"]
    assert says in one_line(capsys, argv)
    assert time.monotonic() - started < 20 and list(work.iterdir()) == []


# -- policies, loaded before any fitting ------------------------------------------------------------------------


def test_a_garbage_policy_is_refused_before_the_agreement_fits_anything(capsys, work):
    (work.parent / "garbage.zip").write_bytes(b"PK\x03\x04" + bytes(200))
    started = time.monotonic()
    line = one_line(capsys, ["evaluate", "agreement", "--policy", f"p={work.parent / 'garbage.zip'}", "--out", "out"])
    assert "garbage.zip" in line and time.monotonic() - started < 20
    assert list(work.iterdir()) == []


def flipped_network(source: Path, target: Path) -> None:
    """A copy of ``source`` whose network member is damaged, while ``data`` (what a zip check reads) is intact."""
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w") as copy:
        for info in original.infolist():
            data = original.read(info)
            if info.filename == "policy.pth":
                data = data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) + data[len(data) // 2 + 1 :]
                data = data[:-40]
            copy.writestr(info, data)


@pytest.mark.slow
def test_a_damaged_policy_leaves_no_prior_behind_in_users_transfer(capsys, work):
    from tests._agent_fixtures import make_config
    from tests._distilled_fixtures import tiny_policy

    (work.parent / "p").mkdir()
    good = tiny_policy(work.parent / "p", make_config())
    bad = work.parent / "bad" / "policy.zip"
    bad.parent.mkdir()
    flipped_network(good, bad)
    (bad.parent / "policy.json").write_bytes((good.parent / "policy.json").read_bytes())
    argv = ["users", "transfer", "--out", "out", "--policy", str(bad), "--set", "train.transfer_env=v1"]
    assert "does not load" in one_line(capsys, argv)
    assert list(work.iterdir()) == []  # no out/prior.json


# -- simulate --resume --rounds on a finished run ---------------------------------------------------------------


@pytest.mark.slow
def test_rounds_beyond_a_finished_run_say_how_to_continue(capsys, tmp_path):
    run = tmp_path / "run"
    sets = [arg for s in settings("simulation.rounds=1") for arg in ("--set", s)]
    assert sim_main(["simulate", *sets, "--out", str(run)]) == 0
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    line = one_line(capsys, ["simulate", "--resume", str(run), "--rounds", "40"], main=sim_main)
    assert "has done all its simulation.rounds=1 rounds" in line and "--set simulation.rounds=41" in line
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    assert sim_main(["simulate", "--resume", str(run), "--rounds", "1", "--set", "simulation.rounds=2"]) == 0
    assert '"round": 1' in (run / "events.jsonl").read_text()  # continued by one round


# -- the dashboard --------------------------------------------------------------------------------------------


BAD_IDS = ["9" * 5000, "%23" + "9" * 5000, "²", "٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣", "x" * 5000, "%00", "-1", "%23-1", "1e3"]


@pytest.mark.slow
def test_a_bad_agent_id_is_a_4xx_never_a_500(tmp_path):
    """``GET /api/agents/<5000 digits>`` was an HTTP 500 with a server traceback (int() refuses 4,300+ digits)."""
    dash = make_dashboard(tmp_path / "runs")
    try:
        client = TestClient(create_app(dash), base_url="http://127.0.0.1:8000")
        for who in BAD_IDS:
            response = client.get(f"/api/agents/{who}")
            assert 400 <= response.status_code < 500, (who[:20], response.text[:300])
            assert len(response.json()["error"]) < 400  # the message does not echo 5,000 characters
        assert client.get("/api/agents/%230").status_code == 200
    finally:
        dash.close()
