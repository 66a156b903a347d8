"""Shared pieces of the dashboard tests: a small scripted dashboard, a live uvicorn server on loopback, headless
Chromium, and the script that takes the README screenshot.

``python -m tests._dashboard_fixtures screenshot docs/assets/dashboard.png`` runs a scripted simulation in the
dashboard, plays a page as a human, and screenshots the page (needs ``/usr/bin/chromium`` and ``playwright``).
``python -m tests._dashboard_fixtures serve [--port N]`` serves a scripted dashboard for trying the page by hand.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from recagent_gym.runs.dashboard.app import create_app
from recagent_gym.runs.dashboard.controller import Dashboard
from tests._sim_fixtures import make_config, make_embedder, make_llm

SETTINGS: tuple[str, ...] = ("simulation.agents=6", "simulation.rounds=2", "simulation.max_pages=2")
"""On top of the simulator tests' scripted settings: 6 agents, 2 rounds, 2 pages per session."""
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def make_dashboard(root: Path, *extra: str, llm: Any = None) -> Dashboard:
    """A dashboard over a fresh scripted simulation in ``root``."""
    config = make_config(*SETTINGS, *extra)
    return Dashboard(config, root, llm=llm if llm is not None else make_llm(), embedder=make_embedder())


def wait_for(check: Callable[[], Any], timeout: float = 60.0, every: float = 0.05, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(dashboard: Dashboard) -> Iterator[str]:
    """Serve ``dashboard`` with uvicorn on a free loopback port in a thread; yields the base URL."""
    import uvicorn

    port = free_port()
    app = create_app(dashboard, host="127.0.0.1", port=port)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="dashboard-test-server", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=30, what="the server to start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if shutil.which(CHROMIUM) is None:
        return f"{CHROMIUM} is absent (CI installs Debian's chromium package: apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    return None


@contextmanager
def browser_page(
    width: int = 1500, height: int = 1000, scale: float = 1.0, extra_args: Sequence[str] = ()
) -> Iterator[Any]:
    """A Playwright page in headless Debian Chromium (Playwright's own browsers cannot be downloaded here);
    ``scale``: the device pixel ratio; ``extra_args``: more Chromium switches."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *extra_args], headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=scale)
            yield page
        finally:
            browser.close()


LAYOUT_PROBE = """() => {
  const clipped = [...document.querySelectorAll('.panel')]
    .filter((p) => p.scrollWidth > p.clientWidth + 1)
    .map((p) => `${p.querySelector('h2').textContent}: ${p.scrollWidth} px of content in ${p.clientWidth} px`);
  const charts = [...document.querySelectorAll('canvas')].map((c) => ({
    id: c.id, shown_px: c.clientWidth,
    label_px: Number(c.dataset.fontPx || 0) * c.clientWidth * devicePixelRatio / c.width,
  }));
  return {page_width: document.documentElement.scrollWidth, window: window.innerWidth, clipped, charts};
}"""
"""What the layout test reads in the page: horizontal overflow of the page and of each panel, and each chart's
label size in CSS pixels as shown (its font size times how much the canvas bitmap is scaled on screen)."""


def play_flow(
    page: Any, base: str, dashboard: Dashboard, shots: Path | None = None, wait_s: float = 60.0
) -> dict[str, Any]:
    """The issue's flow in the browser: start 2 rounds, see log lines, pause, edit a profile, interview, play a
    page as a human. Returns what it saw; a screenshot goes to ``shots`` when given."""
    from playwright.sync_api import expect

    seen: dict[str, Any] = {}
    wait_ms = wait_s * 1000
    page.goto(base + "/")
    expect(page.locator("#status")).to_have_attribute("data-status", "ready")
    expect(page.locator("#agents tbody tr")).to_have_count(dashboard.sim.dataset.n_users)  # type: ignore[union-attr]

    page.fill("#rounds", "2")
    page.click("#start")
    expect(page.locator("#log li.event").first).to_be_visible(timeout=wait_ms)
    seen["log_lines_while_running"] = page.locator("#log li.event").count()
    page.click("#pause")
    expect(page.locator("#status")).to_have_attribute("data-status", "paused", timeout=wait_ms)

    page.select_option("#edit-agent", "#1")
    page.fill("#edit-traits", "grumpy, nostalgic")
    page.fill("#edit-interests", "Horror, Film-Noir")
    page.click("#edit-save")
    expect(page.locator("#message")).to_contain_text("profile of")
    expect(page.locator('#agents tr[data-agent="1"] td.profile')).to_contain_text("grumpy, nostalgic")

    page.select_option("#interview-agent", "#1")
    page.fill("#interview-question", "Which movie did you like most?")
    page.click("#interview-ask")
    expect(page.locator("#interview-answer")).not_to_have_text("asking...", timeout=wait_ms)
    seen["interview"] = page.locator("#interview-answer").inner_text()

    page.select_option("#play-agent", "#2")
    page.click("#play-start")
    expect(page.locator("#play-who")).to_contain_text("you play")
    page.click("#step")
    expect(page.locator("#play-question button.act-recommender")).to_be_visible(timeout=wait_ms)
    page.click("#play-question button.act-recommender")
    watch = page.locator("#play-question button.watch").first
    expect(watch).to_be_visible(timeout=wait_ms)
    seen["page_items"] = page.locator("#play-question ol.items li").count()
    asked = page.locator("#play-question").get_attribute("data-seq")
    watch.click()
    page.wait_for_function(  # the next question (page 2), not the one just answered
        "s => { const q = document.getElementById('play-question').dataset.seq; return q && q !== s; }",
        arg=asked,
        timeout=wait_ms,
    )
    if shots is not None:
        shots.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots), full_page=True)
    page.click("#play-question button.act-leave")
    expect(page.locator("#status")).to_have_attribute("data-status", "paused", timeout=wait_ms)
    name = dashboard.sim.names[2]  # type: ignore[union-attr]
    expect(page.locator("#log")).to_contain_text(f"{name} watches", timeout=10_000)
    seen["human_name"] = name
    return seen


def compact_png(path: Path) -> None:
    """Rewrite a screenshot with a 256-colour palette (no dithering, so text stays crisp): a third of the size."""
    from PIL import Image  # matplotlib's dependency

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests._dashboard_fixtures")
    sub = parser.add_subparsers(dest="command", required=True)
    shot = sub.add_parser("screenshot")
    shot.add_argument("path", type=Path)
    shot.add_argument("--embedded", action="store_true", help="the embedded Gemma model (minutes) instead of scripted")
    shot.add_argument("--width", type=int, default=1440, help="window width in CSS pixels (default: 1440)")
    shot.add_argument("--height", type=int, default=900, help="window height in CSS pixels (default: 900)")
    manual = sub.add_parser("serve")
    manual.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if getattr(args, "embedded", False):
            from recagent_gym.runs.config import load_config

            cache = f"llm.cache_path={Path(tmp) / 'llm_cache.sqlite'}"
            overrides = [*SETTINGS, "simulation.agents=8", "simulation.progress=false", cache]
            dashboard = Dashboard(load_config("simulate_small", overrides), Path(tmp))
        else:
            dashboard = make_dashboard(Path(tmp), "simulation.agents=12")
        try:
            if args.command == "serve":
                import uvicorn

                app = create_app(dashboard, host="127.0.0.1", port=args.port)
                uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
                return 0
            missing = chromium_missing()
            if missing:
                print(missing, file=sys.stderr)
                return 1
            with serve(dashboard) as base, browser_page(args.width, args.height) as page:
                play_flow(page, base, dashboard, shots=args.path, wait_s=900 if args.embedded else 60)
            compact_png(args.path)
            print(f"screenshot: {args.path} ({args.path.stat().st_size // 1024} KB)")
        finally:
            dashboard.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
