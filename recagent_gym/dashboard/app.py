"""The web API and page of the dashboard (FastAPI). Every error answers ``{"error": "<message>"}``:
400 refused, 404 unknown agent or checkpoint, 409 busy or not asked, 422 invalid body, 500 restored after a failure.

Routes are plain ``def`` functions: FastAPI runs them in its thread pool, and the controller's lock and the worker
thread keep the simulation consistent.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from recagent_gym.dashboard.controller import Dashboard, DashboardError
from recagent_gym.dashboard.requests import (
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

STATIC = resources.files("recagent_gym.dashboard") / "static"


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts)


def create_app(dashboard: Dashboard) -> FastAPI:
    """The app serving ``dashboard`` (the caller owns it and closes it after the server stops)."""
    app = FastAPI(title="recagent-gym dashboard", docs_url="/api/docs", redoc_url=None)
    app.state.dashboard = dashboard
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    @app.exception_handler(DashboardError)
    def refused(request: Request, exc: DashboardError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _validation_message(exc)}, status_code=422)

    def done(message: str, **data: Any) -> dict[str, Any]:
        return {"ok": True, "message": message, **data}

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"))

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
