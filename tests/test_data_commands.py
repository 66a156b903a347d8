"""``recagent-gym data info`` on the bundled data and on fixture folders of each format."""

from __future__ import annotations

import json

import pytest

from recagent_gym.runs.cli import main
from tests import _data_fixtures as fx


@pytest.mark.slow
def test_info_bundled_table(capsys):
    assert main(["data", "info", "bundled"]) == 0
    out = capsys.readouterr().out
    assert "users              610" in out and "items              9742" in out and "0.5 .. 5" in out


@pytest.mark.parametrize("maker", [fx.ml_1m, fx.ml_100k, fx.recagent_csv, fx.ml_latest])
def test_info_json_on_each_format(tmp_path, capsys, maker):
    folder = maker(tmp_path)
    assert main(["data", "info", str(folder), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["users"] >= 2 and summary["items"] >= 2 and summary["interactions"] >= 3
    assert summary["time_start"] <= summary["time_end"]


def test_info_reports_bad_rows(tmp_path, capsys):
    folder = fx.ml_1m(tmp_path, extra_ratings="1::2::x::5\n")
    assert main(["data", "info", str(folder)]) == 2
    assert "ratings.dat, line 6: column 'rating'" in capsys.readouterr().err
    assert main(["data", "info", str(folder), "--on-bad-row", "skip", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped_rows"] == 1
