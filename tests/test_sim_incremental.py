"""Incremental checkpoints: float arrays stored once in ``checkpoints/vectors.f64``, interaction files appended.
A checkpoint must load to exactly the state that was saved, the appended tables must equal a full rewrite, and a
run resumed from them must equal an uninterrupted one (the bit-for-bit resume tests in ``test_sim_runner.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from recagent_gym.runs.simulator import checkpoint as ckpt
from recagent_gym.runs.simulator import runner
from recagent_gym.runs.simulator.checkpoint_vectors import FILE_NAME, MARK, VectorStore, expand_vectors
from recagent_gym.runs.simulator.export import export_interactions
from tests._sim_fixtures import events_bytes, make_config, make_embedder, make_llm


def test_vectors_round_trip_exactly_and_are_stored_once(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    emb32 = rng.normal(size=40).astype(np.float32)
    payload = {
        "memory": [{"content": "a", "embedding": emb32.tolist()}, {"content": "b", "embedding": emb32.tolist()}],
        "weights": rng.normal(size=(5, 7)).tolist(),  # a matrix of float64: one reference
        "short": [0.5, 1.5],  # fewer than MIN_VALUES floats: stays inline
        "ids": list(range(50)),  # ints: stays inline
        "odd": [float("nan"), -0.0, float("inf")] * 10,
    }
    store = VectorStore(tmp_path)
    plain = store.externalise(payload)
    store.sync()
    assert set(plain["weights"]) == {MARK} and plain["short"] == [0.5, 1.5] and plain["ids"] == list(range(50))
    assert plain["memory"][0]["embedding"] == plain["memory"][1]["embedding"], "the same vector is stored once"
    assert store.appended == 40 + 35 + 30
    back = expand_vectors(json.loads(json.dumps(plain)), tmp_path)
    assert back["weights"] == payload["weights"] and back["memory"] == payload["memory"]
    assert np.array_equal(np.float32(back["memory"][0]["embedding"]), emb32)
    assert json.dumps(back["odd"]) == json.dumps(payload["odd"])  # NaN, -0.0, inf kept
    size = (tmp_path / FILE_NAME).stat().st_size
    store.externalise(payload)
    store.sync()
    assert (tmp_path / FILE_NAME).stat().st_size == size, "nothing new: nothing appended"


def test_a_torn_tail_is_cut_and_missing_vectors_are_an_error(tmp_path: Path) -> None:
    store = VectorStore(tmp_path)
    plain = store.externalise({"v": [float(i) for i in range(20)]})
    store.sync()
    with (tmp_path / FILE_NAME).open("ab") as handle:
        handle.write(b"\x01\x02\x03")  # a write cut by a kill
    fresh = VectorStore(tmp_path)
    later = fresh.externalise({"w": [float(-i) for i in range(20)]})
    fresh.sync()
    assert (tmp_path / FILE_NAME).stat().st_size == 40 * 8
    assert expand_vectors(plain, tmp_path)["v"] == [float(i) for i in range(20)]
    assert expand_vectors(later, tmp_path)["w"] == [float(-i) for i in range(20)]
    with pytest.raises(ValueError, match="holds"):
        expand_vectors({"x": {MARK: [35, 10]}}, tmp_path)
    with pytest.raises(ValueError, match="missing"):
        expand_vectors(plain, tmp_path / "elsewhere")


@pytest.mark.slow
def test_checkpoints_load_to_the_saved_state_and_tables_equal_a_full_export(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sim = runner.start(make_config("simulation.active_prob=1.0"), out, llm=make_llm(), embedder=make_embedder())
    sim.run()
    path, payload = ckpt.load_checkpoint(out)
    assert payload["state"] == ckpt.to_plain(sim.get_state()), "the saved state, vectors put back, is the state"
    text = path.read_text()
    assert '"embedding":[' not in text and MARK in text, "embeddings live in the vector file, not in the JSON"
    assert path.stat().st_size < len(json.dumps(payload, separators=(",", ":")))
    full = tmp_path / "full"
    export_interactions(full, sim.dataset, sim.interactions)
    for name in ("interactions.csv", "recbole/simulation/simulation.inter", "recbole/simulation/simulation.item"):
        assert (out / name).read_bytes() == (full / name).read_bytes(), name
    assert len(sim.interactions) > 0


@pytest.mark.slow
def test_a_round_appends_only_its_new_vectors(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sim = runner.start(make_config("simulation.active_prob=1.0"), out, llm=make_llm(), embedder=make_embedder())
    sim.run(1)
    first = (out / "checkpoints" / FILE_NAME).stat().st_size
    sim.run(1)
    grown = (out / "checkpoints" / FILE_NAME).stat().st_size - first
    whole = len(json.dumps(sim.get_state()))  # what a full rewrite would serialise (inline lists)
    # its new records only (none at all when, as with the scripted model, their texts were all stored before)
    assert 0 <= grown < first, "the second round does not store the state again"
    assert grown < whole


@pytest.mark.slow
def test_resume_in_place_after_incremental_checkpoints_equals_a_full_run(tmp_path: Path) -> None:
    full, paused = tmp_path / "full", tmp_path / "paused"
    runner.start(make_config(), full, llm=make_llm(), embedder=make_embedder()).run()
    runner.start(make_config(), paused, llm=make_llm(), embedder=make_embedder()).run(1)
    again = runner.resume(paused, None, [], llm=make_llm(), embedder=make_embedder())
    again.run(1)
    runner.resume(paused, None, [], llm=make_llm(), embedder=make_embedder()).run()
    assert events_bytes(paused) == events_bytes(full)
    for name in ("interactions.csv", "recbole/simulation/simulation.inter"):
        assert (paused / name).read_bytes() == (full / name).read_bytes(), name
    resumed, whole = ckpt.load_checkpoint(paused)[1]["state"], ckpt.load_checkpoint(full)[1]["state"]
    for state in (resumed, whole):  # wall seconds differ from run to run; nothing else may
        state["rounds"] = [{k: v for k, v in r.items() if k != "seconds"} for r in state["rounds"]]
    assert resumed == whole
