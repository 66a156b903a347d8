"""The dashboard against hostile web pages (issue 13): cross-site forms, foreign origins, DNS rebinding (a foreign
``Host``), requests without the per-run token, framing. Every refusal must leave the simulation and its files as
they were; the page's own requests (token from its meta tag, JSON) must work."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from recagent_gym.runs.dashboard.app import create_app
from recagent_gym.runs.dashboard.controller import Dashboard
from recagent_gym.runs.dashboard.guard import allowed_hosts, origin_pair, split_authority
from recagent_gym.runs.simulator.checkpoint import to_plain
from tests._dashboard_fixtures import make_dashboard

BASE = "http://127.0.0.1:8000"
TOKEN = "per-run-token-for-tests"
EVIL = "http://evil.example"
PAGE_TOKEN = re.compile(r'<meta name="dashboard-token" content="([^"]+)">')


@pytest.fixture
def dash(tmp_path: Path) -> Iterator[Dashboard]:
    dashboard = make_dashboard(tmp_path / "runs")
    yield dashboard
    dashboard.close()


@pytest.fixture
def app(dash: Dashboard) -> FastAPI:
    return create_app(dash, token=TOKEN)


@pytest.fixture
def client(app: FastAPI) -> TestClient:
    return TestClient(app, base_url=BASE)


def changing_routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every (method, path) of the app that is not GET/HEAD/OPTIONS, with path parameters filled in."""
    found = []
    for route in app.routes:
        for method in sorted(set(getattr(route, "methods", None) or ()) - {"GET", "HEAD", "OPTIONS"}):
            found.append((method, route.path.replace("{who}", "%231")))  # type: ignore[attr-defined]
    return found


def reading_routes(app: FastAPI) -> list[str]:
    paths = [r.path.replace("{who}", "%231") for r in app.routes if "GET" in (getattr(r, "methods", None) or ())]
    return [*paths, "/static/app.js", "/static/style.css", "/no/such/page"]


def world(dash: Dashboard) -> str:
    """Everything a request could change: the simulation's state, the controller's flags, the files of the runs."""
    assert dash.sim is not None
    files = sorted((str(p.relative_to(dash.root)), p.stat().st_size) for p in dash.root.rglob("*") if p.is_file())
    flags = {"running": dash.running, "epoch": dash.epoch, "played": dash.human.view()["agent"]}
    return json.dumps({"sim": to_plain(dash.sim.get_state()), "flags": flags, "files": files}, sort_keys=True)


def own(**extra: str) -> dict[str, str]:
    """Headers of the page's own state-changing request."""
    return {"Content-Type": "application/json", "X-Dashboard-Token": TOKEN, "Origin": BASE, **extra}


@pytest.mark.slow
def test_every_state_changing_route_is_covered(app: FastAPI) -> None:
    routes = changing_routes(app)
    named = {"/api/reset", "/api/start", "/api/step", "/api/pause", "/api/checkpoints/save"}
    assert named <= {path for _, path in routes} and len(routes) >= 14


@pytest.mark.parametrize(
    "body",
    [
        {"data": {"rounds": "3", "execution": "serial"}},  # an auto-submitted <form> (urlencoded)
        {"content": b'{"rounds": 3}', "headers": {"Content-Type": "text/plain"}},  # <form enctype="text/plain">
        {"files": {"f": ("x.json", b"{}")}},  # multipart
    ],
    ids=["urlencoded", "text-plain", "multipart"],
)
@pytest.mark.slow
def test_a_cross_site_form_changes_nothing(app: FastAPI, client: TestClient, dash: Dashboard, body: Any) -> None:
    before = world(dash)
    for method, path in changing_routes(app):
        headers = {"Origin": EVIL, **body.get("headers", {})}
        kwargs = {k: v for k, v in body.items() if k != "headers"}
        response = client.request(method, path, headers=headers, **kwargs)
        assert response.status_code in (403, 415), (path, response.status_code, response.text)
        assert response.json()["error"]
    assert world(dash) == before


@pytest.mark.slow
def test_each_check_refuses_on_its_own(app: FastAPI, client: TestClient, dash: Dashboard) -> None:
    """Each condition alone is enough: everything else of the request is the page's own."""
    before = world(dash)
    cases = {
        "foreign origin": (own(Origin=EVIL), 403, "cross-origin"),
        "same host, other port": (own(Origin="http://127.0.0.1:9999"), 403, "cross-origin"),
        "opaque origin": (own(Origin="null"), 403, "cross-origin"),
        "form content type": (own(**{"Content-Type": "application/x-www-form-urlencoded"}), 415, "application/json"),
        "no content type": ({"X-Dashboard-Token": TOKEN, "Origin": BASE}, 415, "application/json"),
        "no token": ({"Content-Type": "application/json", "Origin": BASE}, 403, "X-Dashboard-Token"),
        "wrong token": (own(**{"X-Dashboard-Token": TOKEN + "x"}), 403, "X-Dashboard-Token"),
        "empty token": (own(**{"X-Dashboard-Token": ""}), 403, "X-Dashboard-Token"),
    }
    for method, path in changing_routes(app):
        for why, (headers, status, says) in cases.items():
            response = client.request(method, path, headers=headers, content=b"{}")
            assert response.status_code == status, (why, path, response.text)
            assert says in response.json()["error"], (why, path)
    assert world(dash) == before


@pytest.mark.slow
def test_the_token_of_another_run_is_refused(dash: Dashboard) -> None:
    first, second = create_app(dash), create_app(dash)
    assert first.state.token != second.state.token and len(first.state.token) >= 32
    response = TestClient(second, base_url=BASE).post(
        "/api/pause", json={}, headers={"X-Dashboard-Token": first.state.token}
    )
    assert response.status_code == 403


@pytest.mark.parametrize(
    "host", ["attacker.example", "attacker.example:8000", "127.0.0.1:9999", "localhost.attacker.example:8000", ""]
)
@pytest.mark.slow
def test_a_foreign_host_is_refused_on_every_route(app: FastAPI, client: TestClient, dash: Dashboard, host: str) -> None:
    """DNS rebinding: the browser sends the attacker's name as Host; nothing is served, not even the page."""
    before = world(dash)
    for path in reading_routes(app):
        response = client.get(path, headers={"Host": host})
        assert response.status_code == 403 and "host" in response.json()["error"], (path, response.text)
        assert TOKEN not in response.text
    for method, path in changing_routes(app):
        response = client.request(method, path, headers=own(Host=host), content=b"{}")
        assert response.status_code == 403, (path, response.text)
    assert world(dash) == before


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LOCALHOST:8000"])
@pytest.mark.slow
def test_loopback_names_are_served(client: TestClient, host: str) -> None:
    assert client.get("/api/state", headers={"Host": host}).status_code == 200


@pytest.mark.slow
def test_the_pages_own_calls_work(client: TestClient, dash: Dashboard) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    match = PAGE_TOKEN.search(page.text)
    assert match and match.group(1) == TOKEN, "the page carries the token"
    token = match.group(1)
    headers = {"X-Dashboard-Token": token, "Origin": BASE}
    assert client.post("/api/mode", json={"execution": "serial"}, headers=headers).json()["ok"]
    assert client.post("/api/step", json={}, headers=headers).json()["ok"]  # a body-less action sends {}
    assert dash.wait(120) and dash.sim is not None and dash.sim.clock.round == 1
    assert client.post("/api/checkpoints/save", json={}, headers=headers).json()["ok"]
    # Scripts send no Origin (not a browser), and a JSON type with a charset is JSON.
    headers = {"X-Dashboard-Token": token, "Content-Type": "application/json; charset=utf-8"}
    epoch = dash.epoch
    assert client.post("/api/reset", headers=headers).json()["ok"] and dash.epoch == epoch + 1


def test_security_headers_on_every_reply(client: TestClient) -> None:
    replies = [
        client.get("/"),
        client.get("/static/app.js"),
        client.get("/api/state"),
        client.get("/no/such/page"),  # 404
        client.get("/api/state", params={"since": -1}),  # 422
        client.post("/api/reset", json={}),  # refused by the guard: no token
        client.get("/", headers={"Host": "attacker.example"}),  # refused by the guard: foreign host
    ]
    assert [r.status_code for r in replies] == [200, 200, 200, 404, 422, 403, 403]
    for reply in replies:
        csp = reply.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert reply.headers["x-frame-options"] == "DENY"
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["referrer-policy"] == "no-referrer"


def test_the_page_needs_no_inline_script_or_style(client: TestClient) -> None:
    """The CSP forbids inline script and style, so the page must not rely on any."""
    page = client.get("/").text
    assert all("src=" in tag for tag in re.findall(r"<script[^>]*>", page))
    assert not re.search(r"<style|\sstyle=|\son[a-z]+=", page)
    script = client.get("/static/app.js").text
    assert "innerHTML" not in script and ".style." not in script and 'setAttribute("style"' not in script


def test_hosts_and_origins_are_parsed_strictly() -> None:
    assert split_authority("LocalHost:8000", 80) == ("localhost", 8000)
    assert split_authority("[::1]:8000", 80) == ("::1", 8000)
    assert split_authority("127.0.0.1", 80) == ("127.0.0.1", 80)
    for bad in ["", ":8000", "a:b", "a:1:2", "[::1", "[::1]x", "a:99999", "a:٣"]:
        assert split_authority(bad, 80) is None, bad
    assert origin_pair("http://127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert origin_pair("https://dash.lan") == ("dash.lan", 443)
    for bad in ["null", "file://", "ftp://127.0.0.1:8000", "http://127.0.0.1:8000/path"]:
        assert origin_pair(bad) is None, bad
    loopback = allowed_hosts("127.0.0.1", 8000)
    assert loopback == {("127.0.0.1", 8000), ("localhost", 8000), ("::1", 8000)}
    assert ("0.0.0.0", 8000) not in allowed_hosts("0.0.0.0", 8000) and ("localhost", 8000) in allowed_hosts("::", 8000)
    assert allowed_hosts("192.168.1.5", 80) == {("192.168.1.5", 80)}
    assert ("dash.lan", 8000) in allowed_hosts("0.0.0.0", 8000, ["dash.lan"])
    assert ("proxy.lan", 443) in allowed_hosts("127.0.0.1", 8000, ["proxy.lan:443"])
    with pytest.raises(ValueError, match="allow-host"):
        allowed_hosts("127.0.0.1", 8000, ["a:b"])


@pytest.mark.slow
def test_an_allowed_host_is_served(dash: Dashboard) -> None:
    client = TestClient(create_app(dash, host="0.0.0.0", port=8080, allow_hosts=["dash.lan"]), base_url=BASE)
    assert client.get("/", headers={"Host": "dash.lan:8080"}).status_code == 200
    assert client.get("/", headers={"Host": "localhost:8080"}).status_code == 200
    assert client.get("/", headers={"Host": "0.0.0.0:8080"}).status_code == 403
    assert client.get("/", headers={"Host": "dash.lan:8000"}).status_code == 403
