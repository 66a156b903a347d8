"""``recagent-gym users ...``: registered, and bad inputs are one-line errors (exit 2)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")

from recagent_gym.runs.cli import main


def test_users_commands_are_registered(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["users", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "collect" in out and "distill" in out and "fidelity" in out


@pytest.mark.slow
def test_distill_without_logs_is_one_line(tmp_path, capsys):
    assert main(["users", "distill", "--logs", str(tmp_path / "none"), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no decision logs" in err[0] and "users collect" in err[0]


def test_fidelity_without_model_is_one_line(tmp_path, capsys):
    code = main(["users", "fidelity", "--logs", str(tmp_path), "--model", str(tmp_path), "--out", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a distilled user model" in err[0]
