"""The page's log: the run's events as the simulator wrote them, and one readable line for each (dashboard notices
among them), numbered so that the page asks only for the lines it has not shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recagent_gym.runs.simulator.events import Event, human_line


class EventFeed:
    """The events read so far from one run's ``events.jsonl`` and the page's lines."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.lines: list[dict[str, Any]] = []
        self._offset = 0

    def clear(self) -> None:
        """Start over (another simulation: its log is read from its start)."""
        self.events, self.lines, self._offset = [], [], 0

    def notice(self, text: str, kind: str = "notice") -> None:
        """A dashboard message in the page's log (``notice`` or ``error``)."""
        self.lines.append({"seq": len(self.lines), "kind": kind, "round": None, "agent": None, "text": text})

    def read(self, path: Path) -> None:
        """Append what ``path`` (the run's ``events.jsonl``) gained since the last read."""
        if not path.exists():
            return
        with path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        self._offset += end
        for raw in data[:end].decode("utf-8").splitlines():
            if not raw.strip():
                continue
            event = json.loads(raw)
            self.events.append(event)
            try:
                text = human_line(Event(**event))
            except (TypeError, ValueError):
                text = raw
            self.lines.append(
                {
                    "seq": len(self.lines),
                    "kind": event.get("kind"),
                    "round": event.get("round"),
                    "agent": event.get("agent"),
                    "text": text,
                }
            )
