"""A damaged or foreign distilled model (``model.json``, ``weights.npz``): one ``distill error`` naming the file
wherever the model is loaded (``users fidelity``, ``users transfer``, the distilled users), never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from recagent_gym.users.distilled.errors import DistillError
from recagent_gym.users.distilled.saved_model import Artefact
from tests._hardening_files import bundled_logs, flip_bit, model_copy, one_error_line, truncate


def _edit_meta(change: Callable[[dict], object]) -> Callable[[Path], object]:
    def damage(folder: Path) -> object:
        meta = json.loads((folder / "model.json").read_text())
        change(meta)
        return (folder / "model.json").write_text(json.dumps(meta))

    return damage


def _edit_arrays(change: Callable[[dict], object]) -> Callable[[Path], object]:
    def damage(folder: Path) -> object:
        with np.load(folder / "weights.npz") as data:
            arrays = {k: data[k] for k in data.files}
        change(arrays)
        np.savez(folder / "weights.npz", **arrays)
        return None

    return damage


def _set(mapping: dict, key: str, value: object) -> None:
    mapping[key] = value


META_DAMAGE: dict[str, Callable[[Path], object]] = {
    "json_garbage": lambda f: (f / "model.json").write_bytes(b"\x00\xff garbage \x8f"),
    "json_truncated": lambda f: truncate(f / "model.json", 0.3),
    "json_empty": lambda f: (f / "model.json").write_bytes(b""),
    "json_list": lambda f: (f / "model.json").write_text("[1, 2, 3]"),
    "no_rule": _edit_meta(lambda m: m.pop("rule")),
    "rule_text": _edit_meta(lambda m: _set(m["rule"], "temperature", "warm")),
    "no_queries": _edit_meta(lambda m: m.pop("interest_queries")),
    "queries_short": _edit_meta(lambda m: _set(m, "interest_queries", m["interest_queries"][:3])),
    "test_users_out_of_range": _edit_meta(lambda m: _set(m, "test_users", [10**6])),
    "n_items_text": _edit_meta(lambda m: _set(m, "n_items", "many")),
}
WEIGHT_DAMAGE: dict[str, Callable[[Path], object]] = {
    "npz_garbage": lambda f: (f / "weights.npz").write_bytes(np.random.default_rng(1).bytes(2048)),
    "npz_empty": lambda f: (f / "weights.npz").write_bytes(b""),
    "npz_truncated": lambda f: truncate(f / "weights.npz", 0.5),
    "npz_bit_flip": lambda f: flip_bit(f / "weights.npz", 4_000_000, 2),
    "npz_wrong_keys": lambda f: np.savez(f / "weights.npz", something=np.zeros(3)),
    "npz_missing_table": _edit_arrays(lambda a: a.pop("item_offset")),
    "npz_wrong_shape": _edit_arrays(lambda a: _set(a, "user_table", a["user_table"][:100])),
    "npz_item_rows": _edit_arrays(lambda a: _set(a, "item_table", a["item_table"][:-1])),
    "npz_text_table": _edit_arrays(lambda a: _set(a, "threshold", np.array(["x"] * len(a["threshold"])))),
    "npz_nan": _edit_arrays(lambda a: a["item_offset"].__setitem__(0, np.nan)),
}
DAMAGE = {**META_DAMAGE, **WEIGHT_DAMAGE}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.slow
def test_fidelity_with_a_damaged_model_is_one_line(tmp_path, capsys, damage):
    model = model_copy(tmp_path / "model")
    DAMAGE[damage](model)
    logs = bundled_logs(tmp_path / "logs")
    out = tmp_path / "report"
    argv = ["users", "fidelity", "--logs", str(logs), "--model", str(model), "--out", str(out), "--replays", "1"]
    line = one_error_line(capsys, *argv)
    assert line.startswith("recagent-gym: distill error: ") and str(model) in line
    assert not out.exists()


@pytest.mark.parametrize("damage", ["json_truncated", "npz_bit_flip", "npz_wrong_shape"])
@pytest.mark.slow
def test_transfer_with_a_damaged_distilled_model_is_one_line(tmp_path, capsys, damage):
    model = model_copy(tmp_path / "model")
    DAMAGE[damage](model)
    out = tmp_path / "transfer"
    argv = ["users", "transfer", "--config", "quickstart", "--out", str(out), "--users", "2", "--no-progress",
            "--user-models", "distilled", "--set", f"user.distilled_path={model}"]  # fmt: skip
    line = one_error_line(capsys, *argv)
    assert line.startswith("recagent-gym: distill error: ") and str(model) in line
    assert not out.exists()


def test_the_bundled_model_loads_and_a_damaged_one_is_a_typed_error(tmp_path):
    assert Artefact.load(model_copy(tmp_path / "good")).meta["n_items"] == 9742
    bad = model_copy(tmp_path / "bad")
    WEIGHT_DAMAGE["npz_wrong_shape"](bad)
    with pytest.raises(DistillError, match=r"user_table has shape \(100, 424\)"):
        Artefact.load(bad)
