"""The run's event log: one JSON object per line (``events.jsonl``) and the same events as readable lines
(``events.log``, in the paper's style: "Sarah Miller enters the recommender system").

Events of a round are buffered and appended together at the end of the round, before its checkpoint; the checkpoint
records both files' sizes, so a resume cuts off whatever a killed process appended after it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from recagent_gym.simulator.checkpoint import CheckpointError

EVENT_KINDS: tuple[str, ...] = (
    "enter",
    "page",
    "watch",
    "search",
    "next",
    "leave",
    "feeling",
    "chat",
    "post",
    "idle",
    "social_none",
    "interview",
    "intervention",
)


@dataclass
class Event:
    """Who did what, when, with which items and text, at what LLM cost."""

    round: int
    time_h: float
    kind: str
    agent: int | None = None
    """Dense user id of the acting agent."""
    name: str = ""
    items: list[int] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    text: str = ""
    tokens: int = 0
    latency_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {self.kind!r}; expected one of {EVENT_KINDS}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=False)


def human_line(event: Event) -> str:
    """The event as one readable line, e.g. ``[round 3, day 1, 10:00] Sarah Miller watches <Casper>``.

    Rounds are counted from 1 here (``round`` in the JSON log counts from 0).
    """
    who = event.name or f"user {event.agent}"
    titles = ", ".join(f"<{t}>" for t in event.titles)
    text = " ".join(event.text.split())
    kind = event.kind
    if kind == "enter":
        body = f"{who} enters the recommender system"
    elif kind == "page":
        body = f"{who} is recommended {titles}"
    elif kind == "watch":
        body = f"{who} watches {titles}"
    elif kind == "search":
        body = f'{who} searches for "{text}"' + (f" and finds {titles}" if titles else " and finds nothing")
    elif kind == "next":
        body = f"{who} looks at the next page"
    elif kind == "leave":
        body = f"{who} leaves the recommender system"
    elif kind == "feeling":
        body = f"{who} feels about {titles}: {text}"
    elif kind == "chat":
        body = f"{who} chats with {event.extra.get('with_name', 'a friend')}: {text}"
    elif kind == "post":
        body = f"{who} posts: {text}"
    elif kind == "idle":
        body = f"{who} does nothing"
    elif kind == "social_none":
        body = f"{who} wants to socialise but has no friends"
    elif kind == "interview":
        body = f"{who} is interviewed: {text}"
    else:
        body = f"intervention: {text}"
    day, hour = int(event.time_h // 24) + 1, int(event.time_h % 24)
    return f"[round {event.round + 1}, day {day}, {hour:02d}:00] {body}"


class EventLog:
    """Appends a round's events to ``events.jsonl`` and ``events.log`` in one go (flushed and synced)."""

    def __init__(self, folder: Path) -> None:
        self.jsonl = folder / "events.jsonl"
        self.text = folder / "events.log"

    def append(self, events: list[Event]) -> None:
        if not events:
            return
        for path, lines in ((self.jsonl, [e.to_json() for e in events]), (self.text, [human_line(e) for e in events])):
            with path.open("a", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")
                handle.flush()
                os.fsync(handle.fileno())

    def offsets(self) -> dict[str, int]:
        """Current sizes in bytes: the checkpoint's record of what belongs to the completed rounds."""
        return {"jsonl": _size(self.jsonl), "text": _size(self.text)}

    def restore(self, offsets: dict[str, int], source: EventLog | None = None) -> None:
        """Make both files hold exactly the first ``offsets`` bytes (of ``source``'s files when given).

        A file shorter than its offset (deleted or cut) raises :class:`CheckpointError` before anything is changed.
        """
        origins = source if source is not None else self
        pairs = [("jsonl", self.jsonl, origins.jsonl), ("text", self.text, origins.text)]
        for key, _, origin in pairs:
            size, have = int(offsets.get(key, 0)), _size(origin)
            if have < size:
                state = "is missing" if not origin.exists() else f"holds {have} bytes"
                raise CheckpointError(
                    f"{origin} {state} but the checkpoint expects {size} bytes of events: the run's event log was "
                    "deleted or cut, so it cannot continue from this checkpoint"
                )
        for key, path, origin in pairs:
            size = int(offsets.get(key, 0))
            if source is None or origin.resolve() == path.resolve():
                if path.exists():
                    with path.open("r+b") as handle:
                        handle.truncate(size)
                continue
            data = origin.read_bytes()[:size] if size else b""
            path.write_bytes(data)

    def read(self) -> list[dict[str, Any]]:
        if not self.jsonl.exists():
            return []
        with self.jsonl.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0
