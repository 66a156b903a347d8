"""Issue 17: per-agent pipelines (``simulation.pipelines``). Each active agent runs its round as its own chain, all
chains at once; the results do not depend on which chain's requests come back first (runs with random delays per
LLM call write the same events as runs without), a resumed run continues as the uninterrupted one, and the round's
chain is counted as the take-action call plus the longest agent chain."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from recagent_gym.llm.local_server import LocalServer
from recagent_gym.runs.simulator import runner
from recagent_gym.runs.simulator.runner import round_waves
from tests._sim_fixtures import SlowScriptedLLM, make_config, make_embedder, make_llm


class JitteryLLM(SlowScriptedLLM):
    """The scripted model sleeping a random 0-20 ms per call (an unseeded generator: a different completion order
    every run)."""

    def __init__(self) -> None:
        super().__init__(0.0)
        self._jitter = random.Random()

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list:
        time.sleep(self._jitter.uniform(0.0, 0.02))
        return super().generate(prompts, **kwargs)

    def choose(self, prompts: Sequence[str], options: Sequence[Sequence[str]], **kwargs: Any) -> list:
        time.sleep(self._jitter.uniform(0.0, 0.02))
        return super().choose(prompts, options, **kwargs)


class JitteryServer(LocalServer):
    """The local server answering each request after a random 0-30 ms (unseeded)."""

    def respond(self, handler: Any, body: dict[str, Any]) -> None:
        time.sleep(random.uniform(0.0, 0.03))
        super().respond(handler, body)


def _events(folder: Path) -> list[dict]:
    rows = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    for row in rows:
        row.pop("latency_s", None)  # wall-clock
    return rows


def _run(out: Path, *extra: str, llm: Any = None, rounds: int | None = None) -> runner.Simulation:
    config = make_config("simulation.rounds=2", "simulation.active_prob=1.0", "simulation.pipelines=on", *extra)
    sim = runner.start(config, out, llm=llm, embedder=make_embedder())
    sim.run(rounds)
    sim.close()
    return sim


@pytest.mark.slow
def test_pipelines_do_not_depend_on_completion_order(tmp_path: Path) -> None:
    _run(tmp_path / "calm", llm=make_llm())
    _run(tmp_path / "jittery", llm=JitteryLLM())
    events = _events(tmp_path / "calm")
    kinds = {e["kind"] for e in events}
    assert {"page", "watch", "feeling"} <= kinds and kinds & {"chat", "post"}
    assert events == _events(tmp_path / "jittery")
    assert _interactions(tmp_path / "calm") == _interactions(tmp_path / "jittery")


def _interactions(folder: Path) -> list[str]:
    return sorted((folder / "recbole" / "simulation" / "simulation.inter").read_text().splitlines())


@pytest.mark.slow
def test_pipelines_against_a_server_with_random_delays(tmp_path: Path) -> None:
    llm = ("llm.backend=openai", "llm.model=test", "llm.cache_mode=off", "simulation.agents=8")
    with LocalServer(reply=None, choice="first") as server:
        _run(tmp_path / "calm", *llm, f"llm.base_url={server.base_url}")
    with JitteryServer(reply=None, choice="first") as server:
        _run(tmp_path / "jittery", *llm, f"llm.base_url={server.base_url}")
    events = _events(tmp_path / "calm")
    assert any(e["kind"] == "watch" for e in events)
    assert events == _events(tmp_path / "jittery")


@pytest.mark.slow
def test_a_resumed_pipelined_run_continues_as_the_uninterrupted_one(tmp_path: Path) -> None:
    _run(tmp_path / "whole", llm=make_llm())
    _run(tmp_path / "part", llm=make_llm(), rounds=1)
    sim = runner.resume(tmp_path / "part", llm=make_llm(), embedder=make_embedder())
    sim.run()
    sim.close()
    assert _events(tmp_path / "part") == _events(tmp_path / "whole")


def test_the_round_chain_is_take_action_plus_the_longest_agent_chain() -> None:
    before = {"MainThread": 4, "agent_0": 2}
    after = {"MainThread": 5, "agent_0": 8, "agent_1": 3, "agent_2": 7}
    assert round_waves(before, after, pipelined=True) == 1 + 7  # agent_2: 7 calls this round
    assert round_waves(before, after, pipelined=False) == 7  # the busiest thread (the staged round)
    assert round_waves({}, {"sim": 2, "agent_0": 4}, pipelined=True, driver="sim") == 6
