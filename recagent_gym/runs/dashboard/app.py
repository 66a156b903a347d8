"""The web API and page of the dashboard (FastAPI). Every error answers ``{"error": "<message>"}``:
400 refused, 403 foreign host or origin or a missing token, 404 unknown agent or checkpoint, 409 busy or not asked,
415 not JSON, 422 invalid body, 500 restored after a failure.

Every request passes :class:`.guard.Guard` first (host, origin, JSON content type and the per-run token of
state-changing requests, security headers); the page gets the token in its ``dashboard-token`` meta tag.

Routes are plain ``def`` functions: FastAPI runs them in its thread pool, and the controller's lock and the worker
thread keep the simulation consistent.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from importlib import resources
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from recagent_gym.runs.dashboard.controller import Dashboard
from recagent_gym.runs.dashboard.guard import Guard, allowed_hosts, new_token
from recagent_gym.runs.dashboard.refusals import DashboardError
from recagent_gym.runs.dashboard.requests import (
    HumanAction,
    InterviewRequest,
    LoadRequest,
    ModeRequest,
    PlayRequest,
    PostRequest,
    ProfileEdit,
    RecommenderRequest,
    StartRequest,
)

STATIC = resources.files("recagent_gym.runs.dashboard") / "static"
TOKEN_SLOT = 'name="dashboard-token" content=""'


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts)


def create_app(
    dashboard: Dashboard,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    allow_hosts: Iterable[str] = (),
    token: str | None = None,
) -> FastAPI:
    """The app serving ``dashboard`` (the caller owns it and closes it after the server stops).

    ``host``/``port``: the address the server binds, which requests must name in ``Host`` (and ``Origin``);
    ``allow_hosts``: more names (``name`` or ``name:port``), e.g. behind a proxy; ``token``: the token of
    state-changing requests (default: a fresh random one, in ``app.state.token``).
    """
    # No Swagger page: it loads its scripts from a CDN, which the page's CSP (rightly) refuses.
    app = FastAPI(title="recagent-gym dashboard", docs_url=None, redoc_url=None, openapi_url="/api/openapi.json")
    app.state.dashboard = dashboard
    app.state.token = token or new_token()
    app.add_middleware(Guard, hosts=allowed_hosts(host, port, allow_hosts), token=app.state.token)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    if TOKEN_SLOT not in page:
        raise RuntimeError("static/index.html lost its dashboard-token meta tag")
    page = page.replace(TOKEN_SLOT, f'name="dashboard-token" content="{html.escape(app.state.token)}"')

    @app.exception_handler(DashboardError)
    def refused(request: Request, exc: DashboardError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _validation_message(exc)}, status_code=422)

    def done(message: str, **data: Any) -> dict[str, Any]:
        return {"ok": True, "message": message, **data}

    @app.get("/", include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse(page, headers={"cache-control": "no-store"})  # holds the token: never cached

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/api/state")
    def state(since: int = Query(0, ge=0)) -> dict[str, Any]:
        return dashboard.state(since)

    @app.get("/api/agents/{who}")
    def agent(who: str) -> dict[str, Any]:
        return dashboard.agent(who)

    @app.get("/api/checkpoints")
    def checkpoints() -> dict[str, Any]:
        return {"checkpoints": dashboard.checkpoints()}

    @app.post("/api/start")
    def start(body: StartRequest | None = None) -> dict[str, Any]:
        return done(dashboard.start(body.rounds if body is not None else None))

    @app.post("/api/step")
    def step() -> dict[str, Any]:
        return done(dashboard.start(1))

    @app.post("/api/pause")
    def pause() -> dict[str, Any]:
        return done(dashboard.pause())

    @app.post("/api/reset")
    def reset() -> dict[str, Any]:
        return done(dashboard.reset())

    @app.post("/api/mode")
    def mode(body: ModeRequest) -> dict[str, Any]:
        return done(dashboard.set_mode(body.execution))

    @app.post("/api/agents/{who}/profile")
    def edit_profile(who: str, body: ProfileEdit) -> dict[str, Any]:
        profile = dashboard.edit_profile(who, body.fields())
        return done(f"profile of {profile['name']} edited", agent=profile)

    @app.post("/api/agents/{who}/interview")
    def interview(who: str, body: InterviewRequest) -> dict[str, Any]:
        answer = dashboard.interview(who, body.question)
        return done(f"{answer['name']} answered", **answer)

    @app.post("/api/posts")
    def post(body: PostRequest) -> dict[str, Any]:
        return done(dashboard.inject_post(body.author, body.text))

    @app.post("/api/recommender")
    def recommender(body: RecommenderRequest) -> dict[str, Any]:
        return done(dashboard.swap_recommender(body.model))

    @app.post("/api/checkpoints/save")
    def save() -> dict[str, Any]:
        saved = dashboard.save()
        return done(f"saved {saved['id']}", **saved)

    @app.post("/api/checkpoints/load")
    def load(body: LoadRequest) -> dict[str, Any]:
        return done(dashboard.load(body.id))

    @app.post("/api/human/play")
    def play(body: PlayRequest) -> dict[str, Any]:
        return done(dashboard.play(body.agent))

    @app.post("/api/human/stop")
    def stop() -> dict[str, Any]:
        return done(dashboard.stop_playing())

    @app.post("/api/human/act")
    def act(body: HumanAction) -> dict[str, Any]:
        return done(dashboard.act(body))

    return app
