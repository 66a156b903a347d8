"""The round loop with a scripted model: outputs, determinism of resume and branch, interventions, interview."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from recagent_gym.runs.simulator import runner
from recagent_gym.runs.simulator.checkpoint import CheckpointError, checkpoint_path, load_checkpoint
from recagent_gym.runs.simulator.errors import SimulationError
from tests._sim_fixtures import events_bytes, make_config, make_embedder, make_llm


def run(out: Path, *extra: str, rounds: int | None = None) -> runner.Simulation:
    sim = runner.start(make_config(*extra), out, llm=make_llm(), embedder=make_embedder())
    sim.run(rounds)
    return sim


def resume(spec: Path, out: Path | None = None, *overrides: str, dry: bool = False) -> runner.Simulation:
    return runner.resume(spec, out, list(overrides), llm=make_llm(), embedder=make_embedder(), dry=dry)


def tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted 3-round run."""
    out = tmp_path_factory.mktemp("sim") / "reference"
    run(out)
    return out


@pytest.mark.slow
def test_outputs_of_a_run(reference: Path) -> None:
    events = [json.loads(line) for line in (reference / "events.jsonl").read_text().splitlines()]
    kinds = {e["kind"] for e in events}
    assert {"enter", "page", "watch", "leave"} <= kinds
    assert {e["round"] for e in events} == {0, 1, 2}
    lines = (reference / "events.log").read_text().splitlines()
    assert len(lines) == len(events)
    assert any(line.endswith("enters the recommender system") for line in lines)
    watch = next(e for e in events if e["kind"] == "watch")
    assert any(f"{watch['name']} watches <{watch['titles'][0]}>" in line for line in lines)
    with (reference / "interactions.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == sum(e["kind"] == "watch" for e in events)
    assert all(r["rating"] for r in rows), "deferred ratings are filled in when the session ends"
    inter = (reference / "recbole" / "simulation" / "simulation.inter").read_text().splitlines()
    assert inter[0] == "user_id:token\titem_id:token\trating:float\ttimestamp:float"
    assert len(inter) == len(rows) + 1
    assert (reference / "recbole" / "simulation" / "simulation.item").read_text().startswith("item_id:token\t")
    summary = json.loads((reference / "summary.json").read_text())
    assert summary["rounds"] == 3 and summary["interactions"] == len(rows)
    assert summary["events"]["watch"] == len(rows)
    assert all(t > 0 for t in summary["tokens_per_round"])
    assert summary["llm"]["prompt_tokens"] + summary["llm"]["completion_tokens"] == sum(summary["tokens_per_round"])
    checkpoints = sorted(p.name for p in (reference / "checkpoints").iterdir())
    assert checkpoints == [f"round_{i:04d}.json" for i in range(4)] + ["vectors.f64"]  # their arrays, stored once


@pytest.mark.slow
def test_resume_reproduces_the_same_rounds_bit_for_bit(reference: Path, tmp_path: Path) -> None:
    paused = tmp_path / "paused"
    run(paused, rounds=1)
    assert load_checkpoint(paused)[1]["round"] == 1
    sim = resume(paused)
    sim.run()
    assert events_bytes(paused) == events_bytes(reference)
    assert (paused / "interactions.csv").read_bytes() == (reference / "interactions.csv").read_bytes()


@pytest.mark.slow
def test_branch_from_an_earlier_round_leaves_the_source_untouched(reference: Path, tmp_path: Path) -> None:
    before = tree_digest(reference)
    plain, edited = tmp_path / "plain", tmp_path / "edited"
    resume(checkpoint_path(reference, 1), plain).run()
    sim = resume(checkpoint_path(reference, 1), dry=True)
    sim.edit_profile("#0", traits="hates every movie", interests=["Horror"])
    runner.save_intervention(sim, checkpoint_path(reference, 1), edited)
    branch = resume(edited)
    branch.run()
    assert tree_digest(reference) == before
    assert events_bytes(plain) == events_bytes(reference)
    assert events_bytes(edited) != events_bytes(reference)
    assert branch.model.profiles[0].traits == "hates every movie"
    assert branch.model.profiles[0].interests == ("Horror",)
    assert "hates every movie" in branch.model.profile_text(0, "interview")
    log = (edited / "events.log").read_text()
    assert "intervention: profile of" in log or "edited" in log


@pytest.mark.slow
def test_in_place_resume_cuts_what_a_killed_round_appended(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(out, rounds=1)
    good = events_bytes(out)
    with (out / "events.jsonl").open("a") as handle:
        handle.write('{"round": 1, "partial": tru')  # a round killed while writing
    sim = resume(out)
    assert events_bytes(out) == good
    sim.run(1)
    assert events_bytes(out).startswith(good) and len(events_bytes(out)) > len(good)


@pytest.mark.slow
def test_injected_post_and_message_reach_memories(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sim = run(out, rounds=1)
    author = next(u for u in sim.agents if sim.model.friends(u))
    friend = sim.model.friends(author)[0]
    from recagent_gym.runs.simulator.social_step import deliver_message, deliver_post

    deliver_post(sim.model, author, "Everyone must watch Pulp Fiction tonight", sim.clock.time_h)
    deliver_message(sim.model, friend, author, "Have you seen Casino?", sim.clock.time_h)
    texts = [r.content for r in sim.model.memory(friend).records()]
    assert any("Pulp Fiction" in t for t in texts)
    heard = [h["item"] for h in sim.model.agent(friend).heard]
    titles = {sim.dataset.items["title"].iat[i] for i in heard}
    assert "Pulp Fiction" in titles
    assert any("Casino" in r.content for r in sim.model.memory(author).records())


@pytest.mark.slow
def test_swap_recommender_is_saved_and_used(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(out, rounds=1)
    sim = resume(out, None, "recommender.model=random", dry=True)
    assert type(sim.recommender).__name__ == "RandomRecommender"
    runner.save_intervention(sim, out, None)
    again = resume(out)
    assert again.config.recommender.model == "random"
    again.run(1)
    assert "recommender swapped to random" in (out / "events.log").read_text()


@pytest.mark.slow
def test_interview_answers_in_character(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(out, rounds=1)
    sim = resume(out, dry=True)
    user = sim.find_agent(sim.names[3].upper())
    answer = sim.model.interview(user, "What did you watch?", np.random.default_rng(0), sim.clock.time_h)
    assert "Toy Story" in answer
    prompt = sim.model.llm.inner.history[-1]["prompt"]
    assert sim.names[3] in prompt and "What did you watch?" in prompt


def test_serial_execution_and_random_items(tmp_path: Path) -> None:
    sim = run(tmp_path / "serial", "simulation.execution=serial", "recommender.rec_random_k=2", rounds=1)
    events = [json.loads(x) for x in (tmp_path / "serial" / "events.jsonl").read_text().splitlines()]
    pages = [e for e in events if e["kind"] == "page"]
    assert pages and all(len(e["extra"]["random_items"]) == 2 for e in pages)
    assert all(set(e["extra"]["random_items"]) <= set(e["items"]) for e in pages)
    assert sim.clock.round == 1


@pytest.mark.slow
def test_errors_leave_outputs_untouched(reference: Path, tmp_path: Path) -> None:
    before = tree_digest(reference)
    with pytest.raises(SimulationError, match="already holds a simulation"):
        runner.start(make_config(), reference, llm=make_llm(), embedder=make_embedder())
    with pytest.raises(SimulationError, match="not the latest checkpoint"):
        resume(checkpoint_path(reference, 1))
    with pytest.raises(SimulationError, match="cannot change on resume"):
        resume(reference, tmp_path / "x", "simulation.agents=5")
    with pytest.raises(SimulationError, match="unknown agent 'Nobody Here'"):
        resume(reference, dry=True).find_agent("Nobody Here")
    with pytest.raises(CheckpointError, match="not found"):
        resume(tmp_path / "missing.json")
    assert tree_digest(reference) == before
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_replay_from_the_response_cache_reproduces_the_rounds(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    recorded = tmp_path / "recorded"
    run(recorded, "llm.cache_mode=read_write", f"llm.cache_path={cache}")
    # The replay backend answers nothing itself: every answer must come from the cache (a miss raises CacheMiss).
    from recagent_gym.llm.testing import ScriptedLLM

    sim = runner.resume(
        checkpoint_path(recorded, 1),
        tmp_path / "replayed",
        ["llm.cache_mode=replay"],
        llm=ScriptedLLM(),
        embedder=make_embedder(),
    )
    sim.run()
    assert sim.world.llm.total.cached_calls > 0
    assert events_bytes(tmp_path / "replayed") == events_bytes(recorded)


@pytest.mark.slow
def test_prior_action_choice_asks_no_take_action_prompt(tmp_path: Path) -> None:
    sim = run(tmp_path / "prior", "simulation.action_choice=prior", "simulation.active_prob=1.0", rounds=1)
    prompts = [h["prompt"] for h in sim.world.llm.inner.history if h["kind"] == "choose"]
    assert not any("decides to:" in p for p in prompts)
    kinds = sim.rounds[0]["counts"]
    assert sim.rounds[0]["active"] == 12
    assert kinds.get("enter", 0) + kinds.get("idle", 0) + kinds.get("chat", 0) + kinds.get("post", 0) > 0
    llm_mode = run(tmp_path / "llm", "simulation.active_prob=1.0", rounds=1)
    assert any("decides to:" in h["prompt"] for h in llm_mode.world.llm.inner.history if h["kind"] == "choose")
