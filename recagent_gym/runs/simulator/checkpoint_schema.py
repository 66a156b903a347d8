"""The shape of a simulation checkpoint, checked once where it is read (:func:`~.checkpoint.load_checkpoint`).

A checkpoint is the user's file: it can be edited by hand, cut, or written by another build. Without a schema a
wrong value surfaces rounds later as a traceback deep in the resume (``int('abc')`` on a log offset, ``.items()``
on a list of profile edits, ``truncate(-5)`` on the event log). Here every part the simulator itself reads is
typed strictly (no ``"5"`` for ``5``, no ``true`` for ``1``); the components' own states (user model, graph,
recommender, random generator) are checked for their outer shape only, and their ``set_state`` turns anything deeper
into a checkpoint error. :data:`EVENT_LINE` is also the schema of one line of ``events.jsonl``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from recagent_gym.session.events import EVENT_KINDS

_STRICT = ConfigDict(strict=True, extra="forbid")
_OPEN = ConfigDict(strict=True, extra="allow")  # the parts that later builds may extend

EventKind = Literal[EVENT_KINDS]  # type: ignore[valid-type]


class EventLine(BaseModel):
    """One event as ``events.jsonl`` and ``pending_events`` hold it (:class:`~recagent_gym.session.events.Event`)."""

    model_config = _STRICT
    round: int = Field(ge=0)
    time_h: float
    kind: EventKind
    agent: int | None = None
    name: str = ""
    items: list[int] = []
    titles: list[str] = []
    text: str = ""
    tokens: int = 0
    latency_s: float = 0.0
    extra: dict[str, Any] = {}


EVENT_LINE = TypeAdapter(EventLine)


class LogOffsets(BaseModel):
    """Bytes of ``events.jsonl`` and ``events.log`` that belong to the completed rounds."""

    model_config = _STRICT
    jsonl: int = Field(ge=0)
    text: int = Field(ge=0)


class ClockState(BaseModel):
    model_config = _STRICT
    interval_hours: float = Field(gt=0)
    round: int = Field(ge=0)


class ProfileEdit(BaseModel):
    """The profile fields an intervention may edit (:data:`~.runner.PROFILE_FIELDS`), with their types."""

    model_config = _STRICT
    name: str | None = None
    gender: str | None = None
    age: int | None = None
    traits: str | None = None
    career: str | None = None
    interests: list[str] | None = None
    features: list[str] | None = None


class RecommenderState(BaseModel):
    model_config = _OPEN
    model: str
    state: Any


class UsageState(BaseModel):
    model_config = _STRICT
    calls: int = Field(ge=0)
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    latency_s: float = Field(default=0.0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0)
    cached_calls: int = Field(default=0, ge=0)


class InteractionRow(BaseModel):
    """One simulated watch (a row of ``interactions.csv``)."""

    model_config = _OPEN
    user_id: int = Field(ge=0)
    item_id: int = Field(ge=0)
    rating: float | None
    timestamp: int | float
    round: int = Field(ge=0)
    source: str


class State(BaseModel):
    model_config = _OPEN
    rng: dict[str, Any]
    activation: dict[str, Any]
    clock: ClockState
    user_model: dict[str, Any]
    profile_edits: dict[str, ProfileEdit]
    graph: dict[str, Any] | None
    recommender: RecommenderState
    interactions: list[InteractionRow]
    rounds: list[dict[str, Any]]
    usage: UsageState
    log_offsets: LogOffsets
    pending_events: list[EventLine] = []

    @model_validator(mode="after")
    def _edit_keys_are_agent_ids(self) -> State:
        bad = [key for key in self.profile_edits if not (key.isascii() and key.isdigit())]
        if bad:
            raise ValueError(f"profile_edits keys must be agent ids such as '3', got {bad[:3]}")
        return self


class DatasetIdentity(BaseModel):
    model_config = _OPEN
    name: str
    n_users: int = Field(ge=1)
    n_items: int = Field(ge=1)
    n_interactions: int = Field(ge=0)


class LLMCache(BaseModel):
    model_config = _OPEN
    path: str | None
    mode: str


class Checkpoint(BaseModel):
    """The whole file (``format`` and ``version`` are checked before this, with their own messages)."""

    model_config = _OPEN
    round: int = Field(ge=0)
    config: dict[str, Any]
    dataset: DatasetIdentity
    llm_cache: LLMCache
    state: State
    paths: Literal["run-folder"] | None = None
    """``run-folder``: relative run files (``llm.cache_path``, ``llm.record_path``) are relative to the run's folder;
    absent in checkpoints of earlier builds, whose relative paths were relative to where the run was started."""

    @model_validator(mode="after")
    def _consistent(self) -> Checkpoint:
        if self.state.clock.round != self.round:
            raise ValueError(f"round is {self.round} but state.clock.round is {self.state.clock.round}")
        users, items = self.dataset.n_users, self.dataset.n_items
        for i, row in enumerate(self.state.interactions):
            if row.user_id >= users or row.item_id >= items:
                raise ValueError(
                    f"state.interactions[{i}] names user {row.user_id} / item {row.item_id}, outside the dataset's "
                    f"{users} users / {items} items"
                )
        for key in self.state.profile_edits:
            if int(key) >= users:
                raise ValueError(f"state.profile_edits names agent {key}, but the run has {users} agents")
        return self


def problem(err: ValidationError) -> str:
    """The first problem of ``err`` as ``where: what (got value)``, for a one-line message."""
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "<top level>"
    if first["type"] == "value_error":  # a validator's own check: its message says what is wrong
        message = first["msg"].removeprefix("Value error, ")
        return f"{where}: {message}" if first["loc"] else message
    if first["type"] == "extra_forbidden":
        return f"{where}: unknown key"
    if first["type"] == "missing":
        return f"{where}: missing"
    if first["type"] == "json_invalid":  # the input is the whole line: not worth repeating
        return first["msg"] if not first["loc"] else f"{where}: {first['msg']}"
    given = repr(first.get("input"))
    given = given if len(given) <= 60 else given[:57] + "..."
    more = f" (and {len(err.errors()) - 1} more problems)" if len(err.errors()) > 1 else ""
    return f"{where}: {first['msg']} (got {given}){more}"


def validate_checkpoint(payload: dict[str, Any]) -> Checkpoint:
    """``payload`` checked against :class:`Checkpoint`; :class:`ValueError` with :func:`problem`'s text if not."""
    try:
        return Checkpoint.model_validate(payload)
    except ValidationError as exc:
        raise ValueError(problem(exc)) from None
