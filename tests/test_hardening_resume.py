"""Issue 28, ``simulate --resume``: a checkpoint with wrong values, a log garbled before the checkpoint's offset, and
a resume from another working directory. Each bad input ends in one ``recagent-gym: checkpoint error`` line and exit
status 2, and leaves the run (and every other folder) as it was."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from recagent_gym.runs.simulator import checkpoint as ckpt
from recagent_gym.runs.simulator.run_paths import placed_path, portable_path
from tests._sim_fixtures import main, settings

CACHE = "cache.sqlite"


def sets(*extra: str) -> list[str]:
    return [arg for s in settings(*extra) for arg in ("--set", s)]


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (``None`` for a folder)."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in folder.rglob("*")}


def one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("recagent-gym: checkpoint error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One round of a three-round run with a response cache, started from its parent folder with ``--out run``."""
    start = tmp_path_factory.mktemp("made")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(start)
        argv = ["simulate", *sets("llm.cache_mode=read_write", f"llm.cache_path={CACHE}"), "--out", "run"]
        assert main([*argv, "--rounds", "1"]) == 0
    return start / "run"


@pytest.fixture
def run(made: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the made run for one test (``tmp_path/start/run``), run from the empty ``tmp_path/elsewhere``
    (so that a file created in the working directory shows in :func:`snapshot` of ``tmp_path``)."""
    copy = tmp_path / "start" / "run"
    shutil.copytree(made, copy)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return copy


def edit_checkpoint(run: Path, change: Callable[[dict], None]) -> None:
    path = ckpt.checkpoint_path(run, 1)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def offsets(value: object) -> Callable[[dict], None]:
    return lambda data: data["state"]["log_offsets"].__setitem__("jsonl", value)


def profile_edits(data: dict) -> None:
    data["state"]["profile_edits"] = []


def log_folder(run: Path) -> None:
    (run / "events.jsonl").unlink()
    (run / "events.jsonl").mkdir()
    for i in range(400):  # a folder's size grows with its entries: past the offset, so the size check passes it
        (run / "events.jsonl" / f"{i:04d}-{'x' * 40}").touch()
    assert (run / "events.jsonl").stat().st_size > json.loads(ckpt.checkpoint_path(run, 1).read_text())["state"][
        "log_offsets"
    ]["jsonl"]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (offsets("abc"), r"state\.log_offsets\.jsonl: Input should be a valid integer \(got 'abc'\)"),
        (offsets(-5), r"state\.log_offsets\.jsonl: Input should be greater than or equal to 0 \(got -5\)"),
        (offsets(True), r"state\.log_offsets\.jsonl: Input should be a valid integer \(got True\)"),
        (profile_edits, r"state\.profile_edits: Input should be a valid dictionary \(got \[\]\)"),
        (lambda d: d["state"]["profile_edits"].__setitem__("0", {"age": "old"}), r"profile_edits\.0\.age"),
        (lambda d: d["state"]["interactions"].append({"user_id": 0}), r"state\.interactions\.\d+\.item_id: missing"),
        (lambda d: d["state"]["clock"].__setitem__("round", 7), "round is 1 but state.clock.round is 7"),
    ],
    ids=["offset-abc", "offset-negative", "offset-bool", "edits-list", "edit-type", "interaction-row", "round"],
)
@pytest.mark.slow
def test_a_checkpoint_with_wrong_values_is_refused_in_one_line(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[dict], None], says: str
) -> None:
    edit_checkpoint(run, edit)
    before = snapshot(tmp_path)
    line = one_error_line(capsys, ["simulate", "--resume", str(run), "--set", "simulation.rounds=3"])
    assert str(ckpt.checkpoint_path(run, 1)) in line
    assert re.search(says, line), line
    assert snapshot(tmp_path) == before


def test_an_event_log_replaced_by_a_folder_is_refused(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_folder(run)
    before = snapshot(tmp_path)
    line = one_error_line(capsys, ["simulate", "--resume", str(run)])
    assert f"{run / 'events.jsonl'} is not a file" in line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "garble",
    [
        lambda data: data[:100] + b"\xff\x00garbage" + data[109:],  # same length: the size check alone passes it
        lambda data: data.replace(b'"round": 0,', b'"round":-1,', 1),  # an event line's value out of range
        lambda data: data.replace(b'"kind"', b'"kinx"', 1),  # an unknown key, and no kind
    ],
    ids=["bytes", "round", "key"],
)
def test_a_log_garbled_before_the_offset_is_refused(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], garble: Callable[[bytes], bytes]
) -> None:
    log = run / "events.jsonl"
    data = log.read_bytes()
    changed = garble(data)
    assert len(changed) == len(data) and changed != data
    log.write_bytes(changed)
    before = snapshot(tmp_path)
    for argv in (["simulate", "--resume", str(run)], ["simulate", "--resume", str(run), "--out", str(run) + "-b"]):
        line = one_error_line(capsys, argv)
        assert f"{log} line 1 is not an event line" in line
        assert snapshot(tmp_path) == before  # nor a branch folder


def test_an_offset_inside_a_line_is_refused(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit_checkpoint(run, lambda d: d["state"]["log_offsets"].__setitem__("jsonl", 50))
    line = one_error_line(capsys, ["simulate", "--resume", str(run)])
    assert "line 1 is not an event line (the checkpoint's offset falls inside this line)" in line


def _rows(cache: Path) -> int:
    with sqlite3.connect(cache) as db:
        return int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])


@pytest.mark.slow
def test_a_resume_from_another_folder_uses_the_runs_own_cache(run: Path, tmp_path: Path) -> None:
    saved = json.loads(ckpt.checkpoint_path(run, 1).read_text())
    assert saved["config"]["llm"]["cache_path"] == CACHE == saved["llm_cache"]["path"]  # relative to the run
    rows = _rows(run / CACHE)
    elsewhere = tmp_path / "elsewhere"  # the working directory (the run fixture's)
    assert main(["simulate", "--resume", "../start/run", "--rounds", "1"]) == 0
    assert list(elsewhere.iterdir()) == []
    assert _rows(run / CACHE) > rows  # the resumed round's answers went into the run's own cache
    assert sorted(p.name for p in run.iterdir() if p.suffix == ".sqlite") == [CACHE]
    resumed = json.loads(ckpt.checkpoint_path(run, 2).read_text())
    assert resumed["config"]["llm"]["cache_path"] == CACHE  # still relative to the run: it can move again


@pytest.mark.slow
def test_a_refused_resume_from_another_folder_creates_nothing_anywhere(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The state fails only after the world (and its response cache) is built: the cache it made goes again."""
    (run / CACHE).unlink()
    edit_checkpoint(run, lambda d: d["state"]["user_model"].__setitem__("agents", 5))
    before = snapshot(tmp_path)
    line = one_error_line(capsys, ["simulate", "--resume", str(run)])
    assert "state does not load" in line
    assert snapshot(tmp_path) == before


def test_run_files_are_stored_relative_to_the_run_and_placed_back_under_it(tmp_path: Path) -> None:
    folder = tmp_path / "outputs" / "sim"
    assert portable_path(str(folder / "cache.sqlite"), folder) == "cache.sqlite"
    assert portable_path(str(tmp_path / "shared.sqlite"), folder) == str(tmp_path / "shared.sqlite")
    assert placed_path("cache.sqlite", folder) == str(folder.resolve() / "cache.sqlite")
    # a checkpoint of an earlier build: relative to where the run was started (``--out outputs/sim``)
    assert placed_path("outputs/sim/cache.sqlite", folder, legacy=True) == str(folder.resolve() / "cache.sqlite")
