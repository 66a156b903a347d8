"""Every endpoint of the dashboard's API with the scripted model: results, bad input (422/400/404/409 with a
message) and that a refused or failed request leaves the simulation's state exactly as it was.

The client is the page's own: it names the bound address and sends JSON with the per-run token (the boundary
itself is tested in ``test_dashboard_guard.py``)."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from recagent_gym.llm.protocol import LLMError
from recagent_gym.runs.cli import build_parser
from recagent_gym.runs.commands import dashboard as commands
from recagent_gym.runs.config import ConfigError
from recagent_gym.runs.dashboard.app import create_app
from recagent_gym.runs.dashboard.controller import Dashboard
from recagent_gym.runs.dashboard.views import agent_statuses, genre_entropy
from recagent_gym.runs.simulator.checkpoint import to_plain
from tests._dashboard_fixtures import make_dashboard, wait_for
from tests._sim_fixtures import SlowScriptedLLM


class SwitchableLLM(SlowScriptedLLM):
    """The scripted model that fails on prompts matching ``fail_on`` (a substring) while it is set."""

    fail_on: str | None = None

    def _check(self, prompts: Sequence[str]) -> None:
        if self.fail_on is not None and any(self.fail_on in p for p in prompts):
            raise LLMError(f"scripted failure on {self.fail_on!r}")

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list:
        self._check(prompts)
        return super().generate(prompts, **kwargs)

    def choose(self, prompts: Sequence[str], options: Sequence[Sequence[str]], **kwargs: Any) -> list:
        self._check(prompts)
        return super().choose(prompts, options, **kwargs)


@pytest.fixture
def llm() -> SwitchableLLM:
    return SwitchableLLM()


@pytest.fixture
def dash(tmp_path: Path, llm: SwitchableLLM) -> Iterator[Dashboard]:
    dashboard = make_dashboard(tmp_path / "runs", llm=llm)
    yield dashboard
    dashboard.close()


BASE = "http://127.0.0.1:8000"


def own_client(app: Any) -> TestClient:
    """A client of ``app`` that sends what the page sends: JSON and the token from the page's meta tag."""
    client = TestClient(app, base_url=BASE)
    token = re.search(r'name="dashboard-token" content="([^"]+)"', client.get("/").text)
    assert token is not None
    client.headers.update({"Content-Type": "application/json", "X-Dashboard-Token": token.group(1)})
    return client


@pytest.fixture
def client(dash: Dashboard) -> TestClient:
    return own_client(create_app(dash))


def frozen(dash: Dashboard) -> str:
    """The simulation's complete state as canonical JSON (what a checkpoint would hold)."""
    assert dash.sim is not None
    return json.dumps(to_plain(dash.sim.get_state()), sort_keys=True)


def error_of(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    message = response.json()["error"]
    assert isinstance(message, str) and message
    return message


def run_rounds(client: TestClient, dash: Dashboard, rounds: int) -> None:
    assert client.post("/api/start", json={"rounds": rounds}).status_code == 200
    assert dash.wait(120)


# -- reading ------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_page_and_static_files(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text and '<script src="http' not in page.text
    assert "fetch(" in client.get("/static/app.js").text
    assert client.get("/static/style.css").status_code == 200
    assert client.get("/favicon.ico").status_code == 204


@pytest.mark.slow
def test_state_before_and_after_rounds(client: TestClient, dash: Dashboard) -> None:
    state = client.get("/api/state").json()
    assert state["status"] == "ready" and state["system"]["round"] == 0
    assert len(state["agents"]) == 6 and state["charts"]["round"] == []
    assert {"recommender", "social", "idle"} >= {a["status"] for a in state["agents"]}
    assert state["recommenders"] == ["random", "popularity", "mf"]
    run_rounds(client, dash, 2)
    state = client.get("/api/state").json()
    assert state["status"] == "paused" and state["system"]["round"] == 2
    assert state["charts"]["round"] == [1, 2]
    watches = sum(e["kind"] == "watch" for e in dash.feed.events)
    assert sum(state["charts"]["watches"]) == watches == state["system"]["interactions"]
    assert all(0 <= h <= 5 for h in state["charts"]["entropy"])
    assert state["usage"]["tokens"] > 0 and state["usage"]["tokens"] == dash.sim.world.llm.total.total_tokens
    texts = [line["text"] for line in state["log"]["lines"]]
    assert any("enters the recommender system" in t for t in texts)
    assert any(t.startswith("round 2 done") for t in texts)
    last = [e for e in dash.feed.events if e["round"] == 1]
    for agent in state["agents"]:
        kinds = {e["kind"] for e in last if e["agent"] == agent["id"] or e["extra"].get("with") == agent["id"]}
        expected = (
            "recommender" if "enter" in kinds else "social" if kinds & {"chat", "post", "social_none"} else "idle"
        )
        assert agent["status"] == expected
    tail = client.get("/api/state", params={"since": state["log"]["next"] - 1}).json()["log"]["lines"]
    assert [line["text"] for line in tail] == texts[-1:]
    assert error_of(client.get("/api/state", params={"since": -1}), 422).startswith("query.since")


def test_agent_statuses_of_a_round() -> None:
    events = [
        {"round": 3, "kind": "enter", "agent": 0},
        {"round": 3, "kind": "chat", "agent": 1, "extra": {"with": 2}},
        {"round": 3, "kind": "idle", "agent": 3},
        {"round": 2, "kind": "post", "agent": 4},
        {"round": 3, "kind": "intervention", "agent": 4},
    ]
    assert agent_statuses(6, events, 3) == ["recommender", "social", "social", "idle", "idle", "idle"]
    assert genre_entropy([("Drama",), ("Drama",)]) == 0.0
    assert genre_entropy([("Drama", "Comedy"), ("Horror", "Crime")]) == pytest.approx(2.0)
    assert genre_entropy([]) == 0.0


def test_agent_detail(client: TestClient, dash: Dashboard) -> None:
    run_rounds(client, dash, 1)
    assert dash.sim is not None
    watcher = next(e["agent"] for e in dash.feed.events if e["kind"] == "watch")
    by_name = client.get(f"/api/agents/{dash.sim.names[watcher]}").json()
    assert by_name["id"] == watcher and by_name["watches"] and by_name["log"]
    assert client.get(f"/api/agents/%23{watcher}").json() == by_name
    assert "unknown agent" in error_of(client.get("/api/agents/Nobody%20Atall"), 404)


# -- run control --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_start_pause_and_busy(client: TestClient, dash: Dashboard, llm: SwitchableLLM) -> None:
    llm.delay = 0.05  # slow enough to pause and to be busy
    assert client.post("/api/start", json={"rounds": 5}).json()["message"].startswith("running 5 round(s)")
    assert client.get("/api/state").json()["status"] in ("running", "pausing")
    before = dash.sim.profile_edits.copy()  # type: ignore[union-attr]
    assert "pause" in error_of(client.post("/api/agents/%230/profile", json={"traits": "x"}), 409)
    assert "pause" in error_of(client.post("/api/start"), 409)
    assert "pause" in error_of(client.post("/api/reset"), 409)
    assert client.post("/api/pause").json()["message"].startswith("pausing")
    assert dash.wait(120)
    assert dash.sim.profile_edits == before  # type: ignore[union-attr]
    done = dash.sim.clock.round  # type: ignore[union-attr]
    assert 1 <= done < 5, "paused before the fifth round"
    assert client.get("/api/state").json()["status"] == "paused"
    assert client.post("/api/pause").json()["message"] == "nothing is running"
    assert client.post("/api/step").json()["ok"]
    assert dash.wait(120) and dash.sim.clock.round == done + 1  # type: ignore[union-attr]


@pytest.mark.slow
def test_start_validation(client: TestClient, dash: Dashboard) -> None:
    before = frozen(dash)
    assert "rounds" in error_of(client.post("/api/start", json={"rounds": 0}), 422)
    assert "speed" in error_of(client.post("/api/start", json={"speed": 2}), 422)
    assert frozen(dash) == before and dash.sim.clock.round == 0  # type: ignore[union-attr]
    run_rounds(client, dash, 2)
    assert "rounds are done" in error_of(client.post("/api/start"), 400)  # simulation.rounds=2 reached
    run_rounds(client, dash, 1)  # asking for more extends simulation.rounds
    assert dash.sim.config.simulation.rounds == 3  # type: ignore[union-attr]


@pytest.mark.slow
def test_reset_starts_a_new_run(client: TestClient, dash: Dashboard) -> None:
    run_rounds(client, dash, 1)
    epoch = dash.epoch
    assert client.post("/api/reset").json()["ok"]
    state = client.get("/api/state").json()
    assert state["epoch"] == epoch + 1 and state["system"]["round"] == 0 and state["system"]["run"] == "run-002"
    assert state["system"]["interactions"] == 0
    assert {c["run"] for c in state["checkpoints"]} == {"run-001", "run-002"}


@pytest.mark.slow
def test_mode(client: TestClient, dash: Dashboard) -> None:
    assert client.post("/api/mode", json={"execution": "serial"}).json()["ok"]
    assert client.get("/api/state").json()["system"]["execution"] == "serial"
    before = frozen(dash)
    assert "execution" in error_of(client.post("/api/mode", json={"execution": "turbo"}), 422)
    assert frozen(dash) == before and dash.sim.config.simulation.execution == "serial"  # type: ignore[union-attr]
    run_rounds(client, dash, 1)
    assert dash.sim.rounds, "a serial round ran"  # type: ignore[union-attr]


# -- interventions ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_edit_profile(client: TestClient, dash: Dashboard) -> None:
    body = {"traits": "grumpy", "interests": ["Horror", " Film-Noir "], "age": 70, "features": ["Critic"]}
    answer = client.post("/api/agents/%231/profile", json=body).json()
    assert answer["agent"]["traits"] == "grumpy" and answer["agent"]["interests"] == ["Horror", "Film-Noir"]
    assert dash.sim.model.profiles[1].age == 70  # type: ignore[union-attr]
    saved = json.loads(next(iter(sorted((dash.sim.out / "checkpoints").glob("*.json")))).read_text())  # type: ignore[union-attr]
    assert saved["state"]["profile_edits"]["1"]["traits"] == "grumpy", "the edit is checkpointed at once"
    before = frozen(dash)
    assert "age" in error_of(client.post("/api/agents/%231/profile", json={"age": 500}), 422)
    assert "mood" in error_of(client.post("/api/agents/%231/profile", json={"mood": "sad"}), 422)
    assert "features" in error_of(client.post("/api/agents/%231/profile", json={"features": ["Sleeper"]}), 422)
    assert "at least one" in error_of(client.post("/api/agents/%231/profile", json={}), 422)
    assert "unknown agent" in error_of(client.post("/api/agents/%2399/profile", json={"traits": "x"}), 404)
    assert frozen(dash) == before


@pytest.mark.slow
def test_inject_post(client: TestClient, dash: Dashboard) -> None:
    assert dash.sim is not None
    friends = dash.sim.model.friends(0)
    message = client.post("/api/posts", json={"author": "#0", "text": "Everyone should see Toy Story"}).json()
    assert message["message"] == f"post delivered to {len(friends)} friend(s) of {dash.sim.names[0]}"
    run_rounds(client, dash, 1)
    injected = [e for e in dash.feed.events if e["kind"] == "intervention" and "injected post" in e["text"]]
    assert injected and injected[0]["agent"] == 0, "the intervention goes into the next round's log"
    before = frozen(dash)
    assert "text" in error_of(client.post("/api/posts", json={"author": "#0", "text": ""}), 422)
    assert "unknown agent" in error_of(client.post("/api/posts", json={"author": "Ghost", "text": "hi"}), 404)
    assert frozen(dash) == before


@pytest.mark.slow
def test_interview(client: TestClient, dash: Dashboard, llm: SwitchableLLM) -> None:
    answer = client.post("/api/agents/%232/interview", json={"question": "What do you like?"}).json()
    assert answer["agent"] == 2 and answer["answer"] and answer["question"] == "What do you like?"
    before = frozen(dash)
    assert "question" in error_of(client.post("/api/agents/%232/interview", json={"question": "  "}), 422)
    assert "unknown agent" in error_of(client.post("/api/agents/Ghost/interview", json={"question": "hi"}), 404)
    assert frozen(dash) == before
    llm.fail_on = "An interviewer asks"
    message = error_of(client.post("/api/agents/%232/interview", json={"question": "Still there?"}), 500)
    assert "scripted failure" in message and "restored" in client.get("/api/state").json()["log"]["lines"][-1]["text"]
    assert frozen(dash) == before, "the failed request left the state as it was"


@pytest.mark.slow
def test_swap_recommender(client: TestClient, dash: Dashboard) -> None:
    assert client.post("/api/recommender", json={"model": "random"}).json()["message"] == "recommender is now random"
    assert client.get("/api/state").json()["system"]["recommender"] == "random"
    before = frozen(dash)
    assert "unknown recommender" in error_of(client.post("/api/recommender", json={"model": "xgboost"}), 400)
    assert frozen(dash) == before


@pytest.mark.slow
def test_a_failed_round_restores_the_last_checkpoint(client: TestClient, dash: Dashboard, llm: SwitchableLLM) -> None:
    run_rounds(client, dash, 1)
    before = frozen(dash)
    llm.fail_on = ""  # every prompt fails
    run_rounds(client, dash, 1)
    state = client.get("/api/state").json()
    assert state["error"].startswith("round 2 failed") and "scripted failure" in state["error"]
    assert any(line["kind"] == "error" for line in state["log"]["lines"])
    assert state["system"]["round"] == 1 and frozen(dash) == before
    llm.fail_on = None
    run_rounds(client, dash, 1)
    assert client.get("/api/state").json()["error"] is None and dash.sim.clock.round == 2  # type: ignore[union-attr]


# -- checkpoints --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_save_and_load(client: TestClient, dash: Dashboard) -> None:
    run_rounds(client, dash, 2)
    saved = client.post("/api/checkpoints/save").json()
    assert saved["id"] == "run-001/round_0002" and Path(saved["path"]).is_file()
    listed = client.get("/api/checkpoints").json()["checkpoints"]
    assert [c["id"] for c in listed] == [f"run-001/round_{i:04d}" for i in range(3)]
    assert [c["latest"] for c in listed] == [False, False, True]
    state_at_2 = frozen(dash)
    # The latest checkpoint continues the same run; an earlier one branches into a new run folder.
    assert "continued" in client.post("/api/checkpoints/load", json={"id": "run-001/round_0002"}).json()["message"]
    assert frozen(dash) == state_at_2 and dash.sim.out.name == "run-001"  # type: ignore[union-attr]
    assert "branched" in client.post("/api/checkpoints/load", json={"id": "run-001/round_0001"}).json()["message"]
    assert dash.sim.out.name == "run-002" and dash.sim.clock.round == 1  # type: ignore[union-attr]
    lines = client.get("/api/state").json()["log"]["lines"]
    assert any(line["round"] == 0 for line in lines) and not any(line["round"] == 1 for line in lines)
    before = frozen(dash)
    assert "bad checkpoint id" in error_of(client.post("/api/checkpoints/load", json={"id": "../etc/passwd"}), 400)
    assert "no checkpoint" in error_of(client.post("/api/checkpoints/load", json={"id": "run-001/round_0009"}), 404)
    (dash.root / "run-001" / "checkpoints" / "round_0000.json").write_text("{broken")
    assert "corrupt" in error_of(client.post("/api/checkpoints/load", json={"id": "run-001/round_0000"}), 400)
    assert frozen(dash) == before and dash.sim.out.name == "run-002"  # type: ignore[union-attr]


# -- human play ---------------------------------------------------------------------------------------------------


def ask(dash: Dashboard, after: int) -> dict[str, Any]:
    return wait_for(lambda: (q := dash.human.question) is not None and q["seq"] > after and q, what="a question")


@pytest.mark.slow
def test_human_plays_a_page_and_the_social_media(client: TestClient, dash: Dashboard) -> None:
    assert dash.sim is not None
    assert "not being asked" in error_of(client.post("/api/human/act", json={"kind": "next"}), 409)
    assert "unknown agent" in error_of(client.post("/api/human/play", json={"agent": "Ghost"}), 404)
    assert "nobody" in error_of(client.post("/api/human/stop"), 400)
    user = next(u for u in range(6) if dash.sim.model.friends(u))
    assert client.post("/api/human/play", json={"agent": f"#{user}"}).json()["ok"]
    assert client.post("/api/step").json()["ok"]
    question = ask(dash, 0)
    assert question["kind"] == "action" and question["agent"] == user
    assert "fit" in error_of(client.post("/api/human/act", json={"kind": "watch", "n": 1}), 409)
    client.post("/api/human/act", json={"kind": "recommender"})
    question = ask(dash, question["seq"])
    assert question["kind"] == "page" and len(question["items"]) == 5
    assert "needs n" in error_of(client.post("/api/human/act", json={"kind": "watch"}), 422)
    assert "not on the page" in error_of(client.post("/api/human/act", json={"kind": "watch", "n": 6}), 400)
    assert "rating" in error_of(client.post("/api/human/act", json={"kind": "watch", "n": 1, "rating": 9}), 422)
    client.post("/api/human/act", json={"kind": "watch", "n": 2, "rating": 4})
    question = ask(dash, question["seq"])
    client.post("/api/human/act", json={"kind": "search", "query": "toy story"})
    question = ask(dash, question["seq"])
    assert question["kind"] == "page" and any("Toy Story" in item["title"] for item in question["items"])
    client.post("/api/human/act", json={"kind": "leave"})
    assert dash.wait(60)
    round_events = [e for e in dash.feed.events if e["round"] == 0 and e["agent"] == user]
    watch = next(e for e in round_events if e["kind"] == "watch")
    assert watch["text"] == "w 2 4" and watch["extra"]["rating"] == 4.0
    assert any(e["kind"] == "search" and e["text"] == "toy story" for e in round_events)
    # The social media: chat with a friend, whose agent answers in character.
    friend = dash.sim.model.friends(user)[0]
    client.post("/api/step")
    question = ask(dash, question["seq"])
    client.post("/api/human/act", json={"kind": "social"})
    question = ask(dash, question["seq"])
    assert question["kind"] == "social" and {f["id"] for f in question["friends"]} == set(dash.sim.model.friends(user))
    stranger = next(u for u in range(6) if u != user and u not in dash.sim.model.friends(user))
    message = error_of(
        client.post("/api/human/act", json={"kind": "chat", "friend": f"#{stranger}", "text": "hi"}), 400
    )
    assert "not a friend" in message
    client.post("/api/human/act", json={"kind": "chat", "friend": dash.sim.names[friend], "text": "Seen Fargo?"})
    assert dash.wait(60)
    chat = next(e for e in dash.feed.events if e["round"] == 1 and e["agent"] == user and e["kind"] == "chat")
    assert chat["extra"] == {"with": friend, "with_name": dash.sim.names[friend], "human": True}
    assert any("Seen Fargo?" in line for line in dash.human.view()["transcript"])
    # Giving up ends the human's turn; stopping hands the agent back to the LLM.
    client.post("/api/step")
    ask(dash, question["seq"])
    assert client.post("/api/human/act", json={"kind": "give_up"}).json()["message"] == "gave up"
    assert dash.wait(60)
    assert client.post("/api/human/stop").json()["ok"] and dash.sim.human is None
    assert client.get("/api/state").json()["human"]["agent"] is None


# -- the command --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_serve_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import uvicorn

    from tests._sim_fixtures import make_embedder, make_llm, settings

    overrides = [part for s in settings("simulation.agents=4") for part in ("--set", s)]
    args = build_parser().parse_args(["serve", *overrides])
    assert (args.host, args.port, args.func is not None) == ("127.0.0.1", 8000, True)
    args.out = str(tmp_path / "runs")
    seen: dict[str, Any] = {}

    def fake_run(app: Any, host: str, port: int, log_level: str) -> None:
        client = own_client(app)
        seen.update(host=host, port=port, state=client.get("/api/state").json())
        seen["mode"] = client.post("/api/mode", json={"execution": "serial"}).status_code
        seen["foreign"] = client.get("/api/state", headers={"Host": "attacker.example:8000"}).status_code
        seen["other_port"] = client.get("/api/state", headers={"Host": "127.0.0.1:8001"}).status_code

    monkeypatch.setattr(uvicorn, "run", fake_run)
    monkeypatch.setattr(commands, "check_address", lambda host, port: None)  # port 8000 may be taken here
    assert commands.run_serve(args, llm=make_llm(), embedder=make_embedder()) == 0
    assert seen["host"] == "127.0.0.1" and seen["port"] == 8000 and len(seen["state"]["agents"]) == 4
    assert (seen["mode"], seen["foreign"], seen["other_port"]) == (200, 403, 403), "the app guards the bound address"
    bad = argparse.Namespace(**{**vars(args), "port": 0})
    with pytest.raises(ConfigError, match="--port"):
        commands.run_serve(bad)
    bad = argparse.Namespace(**{**vars(args), "allow_host": ["dash.lan:http"]})
    with pytest.raises(ConfigError, match="allow-host"):
        commands.run_serve(bad)
