"""The run's event log: one JSON object per line (``events.jsonl``) and the same events as readable lines
(``events.log``, in the paper's style: "Sarah Miller enters the recommender system"). The events are the
package's one schema (:mod:`recagent_gym.session.events`), which the env's reset ``info`` uses too.

Events of a round are buffered and appended together at the end of the round, before its checkpoint; the checkpoint
records both files' sizes, so a resume cuts off whatever a killed process appended after it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from recagent_gym.session.events import EVENT_KINDS, Event, human_line
from recagent_gym.simulator.checkpoint import CheckpointError

__all__ = ["EVENT_KINDS", "Event", "EventLog", "human_line"]


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
