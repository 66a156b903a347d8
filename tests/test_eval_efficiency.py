"""The efficiency evaluation: the local latency server (latency, per-key limit, key counting, answers), the behaviour
times, and the evaluation end to end against the server (and with the embedded model, marked)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.local_server import LocalServer
from recagent_gym.llm.openai_backend import OpenAIBackend
from recagent_gym.runs.evaluation.efficiency import behaviour_times, run_efficiency
from tests._sim_fixtures import make_config


def _backend(server: LocalServer, keys: int, concurrency: int) -> OpenAIBackend:
    config = LLMConfig(
        backend="openai",
        model="latency-server",
        base_url=server.base_url,
        api_keys=[f"key-{k}" for k in range(keys)],  # type: ignore[list-item]  # pydantic coerces to SecretStr
        max_concurrency=concurrency,
        max_retries=0,
    )
    return OpenAIBackend(config)


def _timed(backend: OpenAIBackend, n: int) -> float:
    backend.generate([f"warm up {k}" for k in range(len(backend._keys))], max_tokens=8)  # start-up is not timed
    started = time.perf_counter()
    out = backend.generate([f"hello {k}" for k in range(n)], max_tokens=8)
    assert len(out) == n
    return time.perf_counter() - started


@pytest.mark.slow
def test_latency_and_per_key_limit_set_the_wall_time() -> None:
    with LocalServer(latency_s=0.2, per_key_concurrency=1) as server:
        backend = _backend(server, keys=2, concurrency=4)
        wall = _timed(backend, 4)
        # two requests per key, one at a time per key: two latencies, not one and not four
        assert 0.38 <= wall < 0.75, wall
        assert server.key_counts == [3, 3]  # one warm-up request each
        assert server.request_count == 6
        assert server.max_in_flight == 2
        assert server.max_waiting >= 2  # the second request of each key waited in line
    with LocalServer(latency_s=0.2, per_key_concurrency=1) as server:
        wall_one_key = _timed(_backend(server, keys=1, concurrency=4), 4)
        assert wall_one_key >= 0.78, wall_one_key  # one key serves them one after another
        assert server.key_counts == [5]
    with LocalServer(latency_s=0.2) as server:  # no per-key limit: all four at once
        assert _timed(_backend(server, keys=1, concurrency=4), 4) < 0.6
        assert server.max_in_flight == 4


def test_answers_choices_and_completions() -> None:
    with LocalServer(reply="A canned sentence.", choice="random", seed=3) as server:
        backend = _backend(server, keys=1, concurrency=2)
        text = backend.generate(["Say something."])[0].text
        assert text == "A canned sentence."
        options = ["watch", "next page", "leave"]
        picks = [c.option for c in backend.choose([f"Pick {k}" for k in range(30)], [options] * 30)]
        assert set(picks) <= set(options) and len(set(picks)) > 1, "a seeded random option, not always the first"
    with LocalServer(choice="first") as server:
        backend = _backend(server, keys=1, concurrency=2)
        assert {c.option for c in backend.choose(["a", "b PICK:leave"], [options] * 2)} == {"watch", "leave"}


@pytest.mark.slow
def test_random_answers_follow_the_request_seed_not_the_arrival_order() -> None:
    """A benchmark's workload must not depend on which concurrent request reached the server first: with a seed in
    the request (the client derives one per prompt), the random option is a function of prompt and seed."""
    options = ["watch", "next page", "search", "leave"]
    prompts = [f"Pick for agent {k}" for k in range(12)]
    with LocalServer(choice="random", seed=5) as server:
        backend = _backend(server, keys=1, concurrency=1)
        forward = [c.option for c in backend.choose(prompts, [options] * 12, seed=9)]
        backward = [c.option for c in backend.choose(prompts[::-1], [options] * 12, seed=9)][::-1]
    assert forward == backward and len(set(forward)) > 1
    with LocalServer(choice="random", seed=6) as server:
        other = [c.option for c in _backend(server, keys=1, concurrency=1).choose(prompts, [options] * 12, seed=9)]
    assert other != forward  # the server's own seed still matters


def test_server_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="latency_s"):
        LocalServer(latency_s=-1)
    with pytest.raises(ValueError, match="per_key_concurrency"):
        LocalServer(per_key_concurrency=0)


def test_behaviour_times_hand_computed() -> None:
    events = [
        {"kind": "watch", "latency_s": 0.5},
        {"kind": "next", "latency_s": 0.25},
        {"kind": "search", "latency_s": 0.25},
        {"kind": "chat", "latency_s": 2.0},
        {"kind": "enter", "latency_s": 9.0},  # not a behaviour type
    ]
    times = behaviour_times(events)
    assert times["page decision"] == {"events": 3.0, "latency_s": 1.0}
    assert times["chat"] == {"events": 1.0, "latency_s": 2.0}
    assert times["post"] == {"events": 0.0, "latency_s": 0.0}


@pytest.mark.slow
def test_efficiency_end_to_end_against_the_local_server(tmp_path: Path) -> None:
    # behaviour priors pick the actions (no take-action call), so some agents surely open the recommender
    config = make_config("simulation.activation=uniform", "simulation.active_prob=1.0", "recommender.model=popularity",
                         "simulation.action_choice=prior")  # fmt: skip
    evaluation = config.evaluation.model_copy(
        update={"efficiency_agents": [1, 3], "efficiency_keys": [1, 2], "efficiency_rounds": 2,
                "efficiency_latency_ms": 20.0, "efficiency_per_key_concurrency": 1}
    )  # fmt: skip
    result = run_efficiency(config, evaluation, out=tmp_path, progress=False)
    paths = result.write(tmp_path, config, evaluation)
    assert [(r.agents, r.keys) for r in result.runs] == [(1, 1), (3, 1), (1, 2), (3, 2)]
    for run in result.runs:
        assert len(run.rounds) == 2 and all(s >= 0 for s in run.seconds) and sum(run.seconds) > 0
        calls = sum(r["calls"] for r in run.rounds)
        assert run.requests == calls > 0, "every LLM call is one request to the server (no retries)"
        assert len(run.key_counts) == run.keys and max(run.key_counts) - min(run.key_counts) <= 1
        # each call waits at least the server latency
        assert run.behaviour["all LLM calls"]["latency_s"] >= 0.02 * calls * 0.9
    assert sum(run.behaviour["page decision"]["events"] for run in result.runs) > 0
    table = pd.read_csv(paths["table.csv"])
    assert list(table["agents"]) == [1, 3, 1, 3]
    # MiniLM (the default, as `simulate` runs) counts what each simulation embedded and the CPU it took
    assert all(run.texts_embedded > 0 and run.embed_cpu_s > 0 for run in result.runs)
    assert (table["texts_embedded_per_round"] > 0).all() and (table["embed_cpu_s_per_round"] > 0).all()
    assert len(pd.read_csv(paths["rounds.csv"])) == 8
    assert set(pd.read_csv(paths["behaviour.csv"])["behaviour"]) >= {"page decision", "chat", "post"}
    assert paths["plot.png"].stat().st_size > 1000
    assert "local-key" not in paths["config.yaml"].read_text(), "fake keys are redacted like real ones"
    summary = json.loads((tmp_path / "runs" / "agents3_keys2" / "summary.json").read_text())
    assert summary["agents"] == 3


@pytest.mark.slow
def test_efficiency_command_runs(tmp_path: Path) -> None:
    out = tmp_path / "eff"
    cmd = [sys.executable, "-m", "recagent_gym.runs.cli", "evaluate", "efficiency", "--agents", "2", "--keys", "1,2",
           "--rounds", "1", "--latency-ms", "5", "--out", str(out), "--no-progress",
           "--set", "recommender.model=popularity"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "seconds_per_round" in done.stdout
    table = pd.read_csv(out / "table.csv")
    assert len(table) == 2
    # the paper's simulator by default, named in every table
    assert set(table["config"]) == {"simulate_paper"} and set(pd.read_csv(out / "rounds.csv")["config"]) == {
        "simulate_paper"
    }
    assert set(pd.read_csv(out / "behaviour.csv")["config"]) == {"simulate_paper"}
    assert "configuration `simulate_paper`" in (out / "table.md").read_text()
    assert (table["active_per_round"] == 2).all(), "every agent active in every round"


@pytest.mark.embedded_llm
@pytest.mark.slow
def test_efficiency_with_the_embedded_model(tmp_path: Path, embedded_llm) -> None:
    # The agents decide pages and act with the embedded model; memory notes and feelings (two thirds of the calls,
    # and of the test's time) are off: what is checked here is the efficiency run on that backend, not the memory.
    config = make_config("simulation.activation=uniform", "simulation.active_prob=1.0", "recommender.model=popularity",
                         "simulation.max_pages=2", "memory.implementation=none",
                         "user.write_feelings=false")  # fmt: skip
    evaluation = config.evaluation.model_copy(update={"efficiency_embedded_agents": [1, 2], "efficiency_rounds": 1})
    result = run_efficiency(
        config, evaluation, backend="embedded", out=tmp_path, progress=False, llm_factory=lambda: embedded_llm
    )
    assert [(r.agents, r.keys) for r in result.runs] == [(1, 0), (2, 0)]
    assert all(r.requests == 0 and r.mean_seconds > 0 for r in result.runs)
    assert all(sum(x["calls"] for x in r.rounds) > 0 for r in result.runs)
    assert result.rows()[0]["keys"] == "-"


def test_point_config_sets_backend_keys_and_single_agent_activation() -> None:
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.evaluation.efficiency import simulation_config

    base = load_config(None, [])
    point = simulation_config(base, agents=1, rounds=3, backend="local-server", base_url="http://x/v1", keys=3,
                              concurrency=12)  # fmt: skip
    assert point.llm.backend == "openai" and point.llm.base_url == "http://x/v1"
    assert len(point.llm.api_keys) == 3 and point.llm.max_concurrency == 12
    assert (point.simulation.agents, point.simulation.rounds) == (1, 3)
    assert not point.simulation.fit_activity, "a Pareto fit needs two agents"
    assert simulation_config(base, agents=5, rounds=1, backend="embedded").simulation.fit_activity
    assert base.llm.backend == "embedded" and base.simulation.agents != 1, "the base config is not modified"


@pytest.mark.slow
def test_efficiency_reports_chains_requests_tokens_and_the_cpu_floor(tmp_path: Path) -> None:
    import math

    config = make_config("simulation.activation=uniform", "simulation.active_prob=1.0", "recommender.model=popularity",
                         "simulation.action_choice=prior")  # fmt: skip
    evaluation = config.evaluation.model_copy(
        update={"efficiency_agents": [3], "efficiency_keys": [1], "efficiency_rounds": 1,
                "efficiency_latency_ms": 50.0, "efficiency_per_key_concurrency": 8, "efficiency_server_process": True}
    )  # fmt: skip
    result = run_efficiency(config, evaluation, out=tmp_path, progress=False, cpu_floor=True)
    (row,) = result.rows()
    (run,) = result.runs
    assert row["requests_per_agent_round"] == round(run.requests / 3, 2) > 0
    assert row["prompt_tokens_per_request"] > 10
    assert 1 <= row["waves_per_round"] <= row["requests_per_agent_round"] * 3
    assert row["agent_chain_max"] >= row["agent_chain_mean"] >= 1
    assert math.isfinite(row["cpu_floor_s_per_round"]) and row["cpu_floor_s_per_round"] > 0  # (timings: benchmarks)
    assert row["peak_rss_mb"] > 50 and row["checkpoint_s"] >= 0
    assert row["process_cpu_s_per_round"] > 0
    assert row["server_cpu_s_per_round"] > 0  # the server ran in a process of its own
    assert (tmp_path / "runs" / "agents3_keys1_latency0" / "events.jsonl").exists()


def test_the_server_process_answers_and_counts_as_the_server_in_process() -> None:
    import urllib.request

    from recagent_gym.runs.evaluation.efficiency_server import ServerProcess

    def post(url: str, key: str) -> dict:
        body = json.dumps({"messages": [{"content": "Pick:\n- watch A\n- next page"}], "seed": 3}).encode()
        request = urllib.request.Request(url + "/chat/completions", data=body, headers={"Authorization": key})
        with urllib.request.urlopen(request, timeout=30) as reply:
            return json.loads(reply.read())

    with ServerProcess(choice="random", seed=0, reply=None) as server:
        replies = [post(server.base_url, key) for key in ("Bearer a", "Bearer b", "Bearer a")]
        assert server.request_count == 3 and server.key_counts == [2, 1]
        assert server.cpu_s() > 0
    assert {r["choices"][0]["message"]["content"] for r in replies} <= {"watch A", "next page"}
    with pytest.raises(ValueError, match="latency_s"), ServerProcess(latency_s=-1.0):
        pass


def test_the_efficiency_server_makes_idle_agent_rounds_rare() -> None:
    from recagent_gym.prompts.take_action import OPTIONS
    from recagent_gym.runs.evaluation.efficiency_server import IDLE_LABEL, IDLE_ODDS, ActiveAgentServer

    labels = [o.strip() for o in OPTIONS]
    schema = {"type": "json_schema", "json_schema": {"schema": {"properties": {"choice": {"enum": labels}}}}}
    with ActiveAgentServer(choice="random", seed=0, reply=None) as server:
        picks = [json.loads(server.answer({"messages": [{"content": "free time?"}], "response_format": schema,
                                           "seed": s}))["choice"] for s in range(2000)]  # fmt: skip
        again = [json.loads(server.answer({"messages": [{"content": "other words"}], "response_format": schema,
                                           "seed": s}))["choice"] for s in range(50)]  # fmt: skip
        page = server.answer({"messages": [{"content": "Pick:\n- watch A\n- next page"}], "seed": 3})
    share = picks.count(IDLE_LABEL) / len(picks)
    assert abs(share - IDLE_ODDS) < 0.02, share  # the plain random server: a third
    assert min(picks.count(label) for label in labels if label != IDLE_LABEL) > 800
    assert again == picks[:50], "drawn from the request's seed alone"
    assert page in ("watch A", "next page")


def test_tables_name_the_embedder_and_the_concurrency() -> None:
    from recagent_gym.runs.config.evaluation_section import EvaluationConfig
    from recagent_gym.runs.evaluation.efficiency import EfficiencyResult, EfficiencyRun

    assert EvaluationConfig().efficiency_embedder == "minilm", "what `simulate` runs"
    run = EfficiencyRun(backend="local-server", agents=2, keys=2, rounds=[{"seconds": 1.0, "active": 2, "calls": 4,
                        "tokens": 10, "counts": {"idle": 1}, "round": 0}])  # fmt: skip
    result = EfficiencyResult(dataset="bundled", latency_ms=300, per_key_concurrency=64, runs=[run], embedder="hashing",
                              config_name="simulate_paper")  # fmt: skip
    (row,) = result.rows()
    assert (row["embedder"], row["concurrency"], row["idle_share"]) == ("hashing", 128, 0.5)
    assert "memory embedder: hashing" in result.markdown()
    assert row["config"] == result.round_rows()[0]["config"] == "simulate_paper"
    assert result.markdown().lower().count("configuration `simulate_paper`") >= 3


def test_point_config_can_make_every_agent_active() -> None:
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.evaluation.efficiency import simulation_config

    paper = load_config("simulate_paper", [])
    point = simulation_config(paper, agents=120, rounds=1, backend="embedded", all_active=True)
    sim = point.simulation
    assert (sim.activation, sim.active_prob, sim.active_threshold) == ("uniform", 1.0, 120)
    assert point.recommender.model == "mf" and point.recommender.rec_random_k == 2, "the rest is the paper's"
    assert point.llm.cache_mode == "off", "timed without the paper config's response cache"
    kept = simulation_config(paper, agents=120, rounds=1, backend="embedded").simulation
    assert (kept.activation, kept.active_threshold) == ("pareto", 50)


@pytest.mark.slow
def test_peak_memory_covers_the_cpu_floor_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from recagent_gym.runs.evaluation import efficiency

    peaks = iter([300.0, 900.0])  # the measured point, then its zero-latency run
    monkeypatch.setattr(efficiency, "peak_rss_mb", lambda: next(peaks))
    config = make_config("recommender.model=popularity", "simulation.action_choice=prior")
    evaluation = config.evaluation.model_copy(
        update={"efficiency_agents": [2], "efficiency_keys": [1], "efficiency_rounds": 1,
                "efficiency_latency_ms": 5.0, "efficiency_embedder": "hashing"}
    )  # fmt: skip
    (run,) = run_efficiency(config, evaluation, out=tmp_path, progress=False, cpu_floor=True).runs
    assert run.peak_rss_mb == 900.0
