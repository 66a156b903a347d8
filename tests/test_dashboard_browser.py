"""End to end in headless Chromium (Debian's package, driven by Playwright): the issue's flow through the page."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from recagent_gym.runs.dashboard.controller import Dashboard
from tests._dashboard_fixtures import LAYOUT_PROBE, browser_page, chromium_missing, make_dashboard, play_flow, serve

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing())),
]

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


def test_the_flow_in_a_real_browser(tmp_path: Path) -> None:
    dashboard: Dashboard = make_dashboard(tmp_path / "runs")
    errors: list[str] = []
    try:
        with serve(dashboard) as base, browser_page() as page:
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
            page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
            shot = tmp_path / "dashboard.png"
            seen = play_flow(page, base, dashboard, shots=shot)
            # Bad input in a form is shown in the page and changes nothing.
            before = json.dumps(dashboard.sim.get_state(), sort_keys=True, default=str)  # type: ignore[union-attr]
            page.fill("#edit-age", "500")
            page.fill("#edit-traits", "")
            page.fill("#edit-interests", "")
            page.click("#edit-save")
            page.locator("#message.error").wait_for()
            assert "age" in page.locator("#message").inner_text()
            after = json.dumps(dashboard.sim.get_state(), sort_keys=True, default=str)  # type: ignore[union-attr]
            assert after == before
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / "dashboard_e2e.png").write_bytes(shot.read_bytes())
    finally:
        dashboard.close()
    assert seen["log_lines_while_running"] > 0
    assert seen["interview"].startswith(dashboard.sim.names[1] + ":")  # type: ignore[union-attr]
    assert seen["page_items"] == dashboard.config.simulation.page_size
    assert shot.stat().st_size > 10_000
    human = [e for e in dashboard.feed.events if e.get("agent") == 2 and e["kind"] == "watch"]
    assert human and human[-1]["text"].startswith("w 1"), "the human's watch went through the simulator's role play"
    assert dashboard.sim.profile_edits["1"]["traits"] == "grumpy, nostalgic"  # type: ignore[union-attr]
    failed_422 = "the server responded with a status of 422"
    unexpected = [e for e in errors if not e.startswith("422 ") and failed_422 not in e]
    assert unexpected == [], "only the bad form input failed (no script error, no CSP violation)"


@pytest.mark.parametrize(("width", "height", "scale"), [(1024, 768, 1.0), (1440, 900, 1.0), (1024, 768, 2.0)])
def test_readable_at_laptop_widths(tmp_path: Path, width: int, height: int, scale: float) -> None:
    """No panel clips its content, the page needs no sideways scrolling, chart labels show at >= 11 px."""
    dashboard = make_dashboard(tmp_path / "runs", "simulation.agents=12")
    try:
        dashboard.start(2)
        assert dashboard.wait(120)
        with serve(dashboard) as base, browser_page(width, height, scale) as page:
            page.goto(base + "/")
            page.wait_for_function("() => document.getElementById('chart-entropy').dataset.fontPx")
            probe = page.evaluate(LAYOUT_PROBE)
    finally:
        dashboard.close()
    assert probe["window"] == width and probe["page_width"] <= width, probe
    assert probe["clipped"] == [], probe
    for chart in probe["charts"]:
        assert chart["label_px"] >= 11 and chart["shown_px"] >= 240, chart


EVIL_PAGE = """<!doctype html><html><body>
<iframe id="framed" src="{base}/"></iframe>
<form id="form" method="post" action="{base}/api/start"><input name="rounds" value="3"></form>
</body></html>"""


@contextmanager
def evil_site(base: str) -> Iterator[str]:
    """A page on another origin (same host, another port) that frames the dashboard and holds a form to it."""
    body = EVIL_PAGE.format(base=base).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_hostile_page_cannot_drive_or_frame_the_dashboard(tmp_path: Path) -> None:
    dashboard: Dashboard = make_dashboard(tmp_path / "runs")
    rebinding = "--host-resolver-rules=MAP attacker.example 127.0.0.1"  # DNS rebinding, as the browser sees it
    try:
        before = json.dumps(dashboard.sim.get_state(), sort_keys=True, default=str)  # type: ignore[union-attr]
        epoch = dashboard.epoch
        with serve(dashboard) as base, evil_site(base) as evil, browser_page(extra_args=[rebinding]) as page:
            page.goto(evil)  # "load": the iframe is done too
            framed = page.frame_locator("#framed")
            assert framed.locator("#status").count() == 0, "frame-ancestors 'none' keeps the page out of frames"
            tries = page.evaluate(
                """async (base) => {
                  const post = (path, init) => fetch(base + path, { method: "POST", ...init })
                    .then((r) => r.type === "opaque" ? "opaque" : r.status, () => "blocked");
                  return {
                    no_cors: await post("/api/reset", { mode: "no-cors", body: "{}" }),
                    json: await post("/api/reset", { headers: { "Content-Type": "application/json" }, body: "{}" }),
                    token_guess: await post("/api/step", { headers: { "X-Dashboard-Token": "guess" }, body: "{}" }),
                  };
                }""",
                base,
            )
            with page.expect_navigation(url=base + "/api/start") as submitted:
                page.evaluate("document.getElementById('form').submit()")
            assert submitted.value is not None and submitted.value.status == 403
            rebound = page.goto(base.replace("127.0.0.1", "attacker.example") + "/")
            assert rebound is not None and rebound.status == 403 and "host" in rebound.text()
        after = json.dumps(dashboard.sim.get_state(), sort_keys=True, default=str)  # type: ignore[union-attr]
    finally:
        dashboard.close()
    # The no-cors post reaches the server (which refuses it); Cross-Origin-Resource-Policy hides even its opaque reply.
    # The others need a CORS preflight, which the guard refuses.
    assert tries == {"no_cors": "blocked", "json": "blocked", "token_guess": "blocked"}
    assert after == before and dashboard.epoch == epoch and not dashboard.running
    assert dashboard.sim.clock.round == 0  # type: ignore[union-attr]
