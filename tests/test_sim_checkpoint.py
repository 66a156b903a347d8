"""Checkpoints: plain data only, atomic writes, clear errors, and a full state round trip."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from recagent_gym.runs.simulator import checkpoint as ckpt
from recagent_gym.runs.simulator import runner
from tests._sim_fixtures import make_config, make_embedder, make_llm

MINIMAL_STATE = {
    "rng": {}, "activation": {}, "clock": {"interval_hours": 1.0, "round": 2}, "user_model": {},
    "profile_edits": {}, "graph": None, "recommender": {"model": "random", "state": None}, "interactions": [],
    "rounds": [], "usage": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0},
    "log_offsets": {"jsonl": 0, "text": 0},
}  # fmt: skip
"""The least state the checkpoint schema accepts (checkpoint_schema.py); tests add their own keys."""


def payload(**state: object) -> dict:
    return {
        "format": ckpt.FORMAT, "version": ckpt.VERSION, "round": 2, "config": {},
        "dataset": {"name": "t", "n_users": 3, "n_items": 5, "n_interactions": 0},
        "llm_cache": {"path": None, "mode": "off"}, "state": {**MINIMAL_STATE, **state},
    }  # fmt: skip


def test_round_trip_converts_numpy_and_keeps_floats_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    values = rng.random(7)
    path = tmp_path / "c.json"
    ckpt.save_checkpoint(path, payload(x=values, n=np.int64(3), rng=rng.bit_generator.state, nan=float("nan")))
    _, loaded = ckpt.load_checkpoint(path)
    assert loaded["state"]["x"] == values.tolist()
    assert loaded["state"]["n"] == 3
    restored = np.random.default_rng()
    restored.bit_generator.state = loaded["state"]["rng"]
    assert restored.random() == rng.random()


def test_non_plain_state_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ckpt.CheckpointError, match=r"state\.m: key 1 is not a string"):
        ckpt.save_checkpoint(tmp_path / "c.json", payload(m={1: "a"}))
    with pytest.raises(ckpt.CheckpointError, match="object is not plain data"):
        ckpt.save_checkpoint(tmp_path / "c.json", payload(client=object()))
    assert not (tmp_path / "c.json").exists()


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.json"
    ckpt.save_checkpoint(path, payload(v=1))
    before = path.read_bytes()

    def broken(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        ckpt.save_checkpoint(path, payload(v=2))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ckpt.CheckpointError, match="checkpoint not found"):
        ckpt.load_checkpoint(tmp_path / "nope.json")
    with pytest.raises(ckpt.CheckpointError, match="no checkpoint in"):
        ckpt.load_checkpoint(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "recagent-gym-simulation-checkpoint", "vers')
    with pytest.raises(ckpt.CheckpointError, match=r"bad\.json is corrupt \(line 1"):
        ckpt.load_checkpoint(bad)
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ckpt.CheckpointError, match="not a simulation checkpoint"):
        ckpt.load_checkpoint(bad)
    data = payload()
    del data["state"]
    bad.write_text(json.dumps(data))
    with pytest.raises(ckpt.CheckpointError, match=r"misses keys \['state'\]"):
        ckpt.load_checkpoint(bad)


@pytest.mark.slow
def test_simulation_state_round_trip(tmp_path: Path) -> None:
    sim = runner.start(make_config(), tmp_path / "run", llm=make_llm(), embedder=make_embedder())
    sim.run(2)
    saved = json.loads(json.dumps(ckpt.to_plain(sim.get_state())))
    assert saved["user_model"]["memories"], "agents' memories are part of the state"
    assert saved["graph"]["links"], "the social graph is part of the state"
    fresh = runner.resume(tmp_path / "run", llm=make_llm(), embedder=make_embedder(), dry=True)
    assert ckpt.to_plain(fresh.get_state()) == saved


@pytest.mark.slow
def test_corrupt_state_gives_a_checkpoint_error(tmp_path: Path) -> None:
    sim = runner.start(make_config(), tmp_path / "run", llm=make_llm(), embedder=make_embedder())
    sim.run(1)
    path = ckpt.checkpoint_path(tmp_path / "run", 1)
    data = json.loads(path.read_text())
    del data["state"]["clock"]
    path.write_text(json.dumps(data))
    with pytest.raises(ckpt.CheckpointError, match=r"state\.clock: missing"):
        runner.resume(path, llm=make_llm(), embedder=make_embedder())


@pytest.mark.parametrize("name", ["simulate_small", "simulate_paper"])
def test_shipped_simulation_configs_load(name: str) -> None:
    from recagent_gym.runs.config import load_config

    config = load_config(name)
    assert config.user.model == "llm" and config.simulation.agents >= 20
