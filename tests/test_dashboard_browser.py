"""End to end in headless Chromium (Debian's package, driven by Playwright): the issue's flow through the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recagent_gym.dashboard.controller import Dashboard
from tests._dashboard_fixtures import browser_page, chromium_missing, make_dashboard, play_flow, serve

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
    human = [e for e in dashboard._events if e.get("agent") == 2 and e["kind"] == "watch"]
    assert human and human[-1]["text"].startswith("w 1"), "the human's watch went through the simulator's role play"
    assert dashboard.sim.profile_edits["1"]["traits"] == "grumpy, nostalgic"  # type: ignore[union-attr]
    assert [e for e in errors if not e.startswith("422 ")] == [], "only the bad form input failed"
