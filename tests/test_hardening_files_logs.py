"""``users distill`` and ``users fidelity`` on damaged or foreign decision logs: one line, exit 2, nothing written.

Each part is checked once where it is read (:mod:`recagent_gym.runs.distill.log_schema`): a part that is empty,
cut short, garbage, bit-flipped in its footer, or of another schema (columns or types), and a cut-short
``collect.json``, are a ``distill error`` naming the file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyarrow")

from recagent_gym.runs.distill import logs
from recagent_gym.users.distilled.errors import DistillError
from recagent_gym.users.distilled.user import BUNDLED_DIR
from tests._hardening_files import bundled_logs, flip_bit, one_error_line, truncate, write_frame


def _part(folder: Path) -> Path:
    return logs.parts(folder)[0]


def _retyped(column: str, convert: Callable[[pd.Series], pd.Series]) -> Callable[[Path], object]:
    def damage(folder: Path) -> object:
        frame = pd.read_parquet(_part(folder))
        frame[column] = convert(frame[column])
        return write_frame(_part(folder), frame)

    return damage


DAMAGE: dict[str, Callable[[Path], object]] = {
    "empty": lambda folder: _part(folder).write_bytes(b""),
    "truncated": lambda folder: truncate(_part(folder)),
    "garbage": lambda folder: _part(folder).write_bytes(np.random.default_rng(0).bytes(4096)),
    "bit_flip_footer": lambda folder: flip_bit(_part(folder), len(_part(folder).read_bytes()) - 6, 3),
    "bit_flip_length": lambda folder: flip_bit(_part(folder), len(_part(folder).read_bytes()) - 7, 6),
    "other_table": lambda folder: write_frame(_part(folder), pd.DataFrame({"movieId": [1, 2], "rating": [4.0, 3.5]})),
    "missing_column": lambda folder: write_frame(_part(folder), pd.read_parquet(_part(folder)).drop(columns="scores")),
    "scores_as_text": _retyped("scores", lambda s: s.map(lambda v: [str(x) for x in v])),
    "user_as_text": _retyped("user_id", lambda s: s.astype(str)),
    "rating_as_text": _retyped("rating", lambda s: s.astype(str)),
    "unknown_action": _retyped("action", lambda s: s.replace("next", "skip")),
    "misaligned_scores": _retyped("scores", lambda s: s.map(lambda v: list(v)[:2])),
    "collect_json_truncated": lambda folder: truncate(folder / "collect.json"),
    "collect_json_wrong_type": lambda folder: (folder / "collect.json").write_text('{"page_size": "five"}'),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.slow
def test_distill_on_damaged_logs_is_one_line_and_writes_nothing(tmp_path, capsys, damage):
    folder = bundled_logs(tmp_path / "logs")
    DAMAGE[damage](folder)
    line = one_error_line(capsys, "users", "distill", "--logs", str(folder), "--out", str(tmp_path / "model"))
    assert line.startswith("recagent-gym: distill error: ") and str(folder) in line
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.slow
def test_fidelity_on_damaged_logs_is_one_line_and_writes_no_report(tmp_path, capsys, damage):
    """Parts of another schema used to give a report (a rating written as text, a user id as text)."""
    folder = bundled_logs(tmp_path / "logs")
    DAMAGE[damage](folder)
    out = tmp_path / "report"
    argv = ["users", "fidelity", "--logs", str(folder), "--model", str(BUNDLED_DIR), "--out", str(out)]
    line = one_error_line(capsys, *argv, "--replays", "1", "--bootstrap", "10")
    assert line.startswith("recagent-gym: distill error: ") and str(folder) in line
    assert not out.exists()


def test_a_second_damaged_part_is_named(tmp_path):
    folder = bundled_logs(tmp_path / "logs")
    second = logs.write_part(folder, [])  # a part with no columns at all
    with pytest.raises(DistillError, match=r"part-00001\.parquet.*no column"):
        logs.read_logs(folder)
    second.unlink()
    assert len(logs.read_logs(folder)) > 0


def test_valid_logs_read_back_as_written(tmp_path):
    folder = bundled_logs(tmp_path / "logs")
    frame = logs.read_logs(folder)
    assert len(frame) == 24 and frame["user_id"].dtype == np.int64
    assert all(len(s) == len(p) == 5 for s, p in zip(frame["shown"], frame["scores"], strict=True))
    assert logs.read_meta(folder)["page_size"] == 5


def test_all_missing_scores_read_as_nan(tmp_path):
    """Logs of the direct strategy (remote backends) have no item scores: Parquet stores the lists as
    ``list<null>``; they read back as NaN, as any missing score."""
    folder = bundled_logs(tmp_path / "logs")
    frame = pd.read_parquet(_part(folder))
    for column in ("scores", "llm_scores", "embedding_scores"):
        frame[column] = [[None] * len(s) for s in frame["shown"]]
    frame["p_watch"] = float("nan")
    write_frame(_part(folder), frame)
    read = logs.read_logs(folder)
    assert all(math.isnan(v) for s in read["scores"] for v in s)


def test_collect_refuses_to_resume_on_a_damaged_part(tmp_path):
    from recagent_gym.runs.distill.collect import collect
    from tests._agent_fixtures import make_model, tiny_dataset

    out = tmp_path / "logs"
    collect(make_model(), tiny_dataset(), out, sessions=2, batch=2, max_pages=2, progress=False)
    meta_before = (out / "collect.json").read_bytes()
    truncate(_part(out))
    with pytest.raises(DistillError, match=r"part-00000\.parquet"):
        collect(make_model(), tiny_dataset(), out, sessions=4, batch=2, max_pages=2, progress=False)
    assert (out / "collect.json").read_bytes() == meta_before and len(logs.parts(out)) == 1
