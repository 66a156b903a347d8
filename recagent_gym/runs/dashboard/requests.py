"""Bodies of the dashboard's POST requests (validated by FastAPI: a bad field answers 422 naming it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from recagent_gym.data.schema import BEHAVIOUR_FEATURES

Feature = Literal["Watcher", "Explorer", "Critic", "Chatter", "Poster"]
assert set(BEHAVIOUR_FEATURES) == set(Feature.__args__), "keep Feature in step with data.schema.BEHAVIOUR_FEATURES"

Text = Field(min_length=1, max_length=500)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class StartRequest(Body):
    rounds: int | None = Field(None, ge=1, le=1000)
    """Rounds to run from now; none: up to ``simulation.rounds``."""


class ModeRequest(Body):
    execution: Literal["serial", "parallel"]


class ProfileEdit(Body):
    """Profile fields to change (only those given)."""

    name: str | None = Field(None, min_length=1, max_length=80)
    gender: str | None = Field(None, max_length=40)
    age: int | None = Field(None, ge=1, le=120)
    traits: str | None = Field(None, max_length=300)
    career: str | None = Field(None, max_length=120)
    interests: list[str] | None = Field(None, max_length=20)
    features: list[Feature] | None = Field(None, max_length=5)

    @model_validator(mode="after")
    def _not_empty(self) -> ProfileEdit:
        if not self.fields():
            raise ValueError("give at least one profile field to change")
        return self

    def fields(self) -> dict[str, object]:
        data = self.model_dump(exclude_none=True)
        if "interests" in data:
            data["interests"] = [s.strip() for s in data["interests"] if s.strip()]
        return data


class InterviewRequest(Body):
    question: str = Text


class PostRequest(Body):
    author: str = Field(min_length=1, max_length=80)
    """The author's name or ``#id``."""
    text: str = Text


class RecommenderRequest(Body):
    model: str = Field(min_length=1)


class LoadRequest(Body):
    id: str = Field(min_length=1, max_length=100)
    """A checkpoint id from ``GET /api/checkpoints`` (``run-NNN/round_NNNN``)."""


class PlayRequest(Body):
    agent: str = Field(min_length=1, max_length=80)


class HumanAction(Body):
    """One answer of the human player, turned into the role-play command of ``simulator/human.py``."""

    kind: Literal[
        "recommender", "social", "nothing", "watch", "next", "search", "leave", "chat", "post", "skip", "give_up"
    ]
    n: int | None = Field(None, ge=1, le=100)
    """Watch: the item's position on the page (1-based)."""
    rating: int | None = Field(None, ge=1, le=5)
    query: str | None = Field(None, min_length=1, max_length=200)
    friend: str | None = Field(None, min_length=1, max_length=80)
    text: str | None = Field(None, min_length=1, max_length=500)

    @model_validator(mode="after")
    def _complete(self) -> HumanAction:
        need = {"watch": ("n",), "search": ("query",), "chat": ("friend", "text"), "post": ("text",)}
        missing = [f for f in need.get(self.kind, ()) if getattr(self, f) is None]
        if missing:
            raise ValueError(f"{self.kind!r} needs {', '.join(missing)}")
        return self

    def line(self) -> str | None:
        """The role-play command line (``None``: give up, i.e. end of input)."""
        one_line = {
            k: " ".join(str(v).split())
            for k, v in (("q", self.query), ("t", self.text), ("f", self.friend))
            if v is not None
        }
        if self.kind == "give_up":
            return None
        if self.kind == "watch":
            return f"w {self.n}" + (f" {self.rating}" if self.rating is not None else "")
        if self.kind == "search":
            return f"s {one_line['q']}"
        if self.kind == "chat":
            return f"chat {one_line['f']}: {one_line['t']}"
        if self.kind == "post":
            return f"post: {one_line['t']}"
        return {"next": "n", "leave": "l"}.get(self.kind, self.kind)

    def question_kinds(self) -> tuple[str, ...]:
        """The pending questions this answer fits."""
        if self.kind in ("recommender", "social", "nothing"):
            return ("action",)
        if self.kind in ("watch", "next", "search", "leave"):
            return ("page",)
        if self.kind in ("chat", "post", "skip"):
            return ("social",)
        return ()
