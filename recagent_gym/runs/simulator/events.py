"""The run's event log: one JSON object per line (``events.jsonl``) and the same events as readable lines
(``events.log``, in the paper's style: "Sarah Miller enters the recommender system"). The events are the
package's one schema (:mod:`recagent_gym.session.events`), which the env's reset ``info`` uses too.

Events of a round are buffered and appended together at the end of the round, before its checkpoint; the checkpoint
records both files' sizes, so a resume cuts off whatever a killed process appended after it. Before it continues, a
resume checks what it keeps (:meth:`EventLog.verify`): every line before the offset must be an event line, so a log
garbled or replaced behind the checkpoint's back is refused instead of being continued.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from recagent_gym.runs.simulator.checkpoint import CheckpointError
from recagent_gym.runs.simulator.checkpoint_schema import EVENT_LINE, problem
from recagent_gym.session.events import EVENT_KINDS, Event, human_line

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
        origins.check_sizes(offsets)
        pairs = [("jsonl", self.jsonl, origins.jsonl), ("text", self.text, origins.text)]
        for key, path, origin in pairs:
            size = int(offsets.get(key, 0))
            if source is None or origin.resolve() == path.resolve():
                if path.exists():
                    with path.open("r+b") as handle:
                        handle.truncate(size)
                continue
            data = origin.read_bytes()[:size] if size else b""
            path.write_bytes(data)

    def check_sizes(self, offsets: dict[str, int]) -> None:
        """Both files are plain files (or absent where the offset is 0) holding at least their offsets' bytes."""
        for key, origin in (("jsonl", self.jsonl), ("text", self.text)):
            size = int(offsets.get(key, 0))
            if origin.exists() and not origin.is_file():
                raise CheckpointError(
                    f"{origin} is not a file: the run's event log was replaced, so it cannot continue"
                )
            have = _size(origin)
            if have < size:
                state = "is missing" if not origin.exists() else f"holds {have} bytes"
                raise CheckpointError(
                    f"{origin} {state} but the checkpoint expects {size} bytes of events: the run's event log was "
                    "deleted or cut, so it cannot continue from this checkpoint"
                )

    def verify(self, offsets: dict[str, int]) -> None:
        """:meth:`check_sizes`, then what the checkpoint keeps must be whole: every line of ``events.jsonl`` before
        its offset an event line, and both offsets at the end of a line (else :class:`CheckpointError`, naming the
        line). Streams the file: a long run's log is not held in memory."""
        self.check_sizes(offsets)
        size = int(offsets.get("jsonl", 0))
        if size:
            with self.jsonl.open("rb") as handle:
                done, number = 0, 0
                while done < size:
                    line = handle.readline(size - done)
                    done, number = done + len(line), number + 1
                    if not line.endswith(b"\n"):
                        raise self._broken(number, "the checkpoint's offset falls inside this line")
                    try:
                        EVENT_LINE.validate_json(line)
                    except ValidationError as exc:
                        raise self._broken(number, problem(exc)) from None
        text = int(offsets.get("text", 0))
        if text:
            with self.text.open("rb") as handle:
                handle.seek(text - 1)
                if handle.read(1) != b"\n":
                    raise CheckpointError(f"{self.text}: the checkpoint's offset {text} falls inside a line")

    def _broken(self, number: int, why: str) -> CheckpointError:
        return CheckpointError(
            f"{self.jsonl} line {number} is not an event line ({why}): the log before the checkpoint's offset was "
            "changed, so the run cannot continue from this checkpoint"
        )

    def read(self) -> list[dict[str, Any]]:
        if not self.jsonl.exists():
            return []
        with self.jsonl.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0
