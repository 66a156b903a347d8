"""The package's one event schema: who did what, when, with which items and text, at what LLM cost.

The simulator's log (``events.jsonl``) holds these events; the env's reset ``info['social_events']`` holds the
social round's as the same records (``dataclasses.asdict``), and the page events of the log are built from the
step record (:meth:`~recagent_gym.session.outcome.StepResult.info`) that is the env's step ``info``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from recagent_gym.users.agent.clock import clock_text

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
    "take_action",
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


HUMAN_LINES = {
    "enter": "{who} enters the recommender system",
    "page": "{who} is recommended {titles}",
    "watch": "{who} watches {titles}",
    "search": '{who} searches for "{text}"{found}',
    "next": "{who} looks at the next page",
    "leave": "{who} leaves the recommender system",
    "feeling": "{who} feels about {titles}: {text}",
    "chat": "{who} chats with {friend}: {text}",
    "post": "{who} posts: {text}",
    "idle": "{who} does nothing",
    "social_none": "{who} wants to socialise but has no friends",
    "take_action": "{who} chooses to {action}",
    "interview": "{who} is interviewed: {text}",
}
"""One readable sentence per event kind (any other kind is an intervention)."""


def human_line(event: Event) -> str:
    """The event as one readable line, e.g. ``[round 3, day 1, 10:00] Sarah Miller watches <Casper>``.

    Rounds are counted from 1 here (``round`` in the JSON log counts from 0).
    """
    who = event.name or f"user {event.agent}"
    titles = ", ".join(f"<{t}>" for t in event.titles)
    text = " ".join(event.text.split())
    found = f" and finds {titles}" if titles else " and finds nothing"
    friend = event.extra.get("with_name", "a friend")
    template = HUMAN_LINES.get(event.kind, "intervention: {text}")
    body = template.format(who=who, titles=titles, text=text, found=found, friend=friend, action=event.text)
    return f"[round {event.round + 1}, {clock_text(event.time_h)}] {body}"


ACTION_TEXT = {"recommender": "enter the recommender", "social": "enter the social media", "nothing": "do nothing"}


def social_events(
    raw: Sequence[dict[str, Any]],
    round_index: int,
    time_h: float,
    name: Callable[[int], str],
    title: Callable[[int], str],
) -> list[Event]:
    """The social round's records (``take_action``, ``chat``, ``post``, ``no_friends``) as events."""
    events: list[Event] = []
    for record in raw:
        kind = record.get("type")
        if kind == "take_action":
            u = record["user"]
            text = ACTION_TEXT.get(record["choice"], str(record["choice"]))
            events.append(
                Event(round_index, time_h, "take_action", u, name(u), text=text, extra={"choice": record["choice"]})
            )
        elif kind == "no_friends":
            u = record["user"]
            events.append(Event(round_index, time_h, "social_none", u, name(u)))
        elif kind == "chat":
            a, b = record["users"]
            heard_a, heard_b = record["heard"][str(a)], record["heard"][str(b)]
            items = heard_a + [i for i in heard_b if i not in heard_a]
            names = {a: name(a), b: name(b)}
            events.append(
                Event(
                    round_index,
                    time_h,
                    "chat",
                    a,
                    names[a],
                    items=items,
                    titles=[title(i) for i in items],
                    text=" | ".join(f"{names[w]}: {t}" for w, t in record["lines"]),
                    tokens=record["tokens"],
                    latency_s=record["latency_s"],
                    extra={"with": b, "with_name": names[b], "fallbacks": record["fallbacks"]},
                )
            )
        elif kind == "post":
            u = record["user"]
            events.append(
                Event(
                    round_index,
                    time_h,
                    "post",
                    u,
                    name(u),
                    items=record["items"],
                    titles=[title(i) for i in record["items"]],
                    text=record["text"],
                    tokens=record["tokens"],
                    latency_s=record["latency_s"],
                    extra={"recipients": record["recipients"], "fallback": record["fallback"]},
                )
            )
        else:
            raise ValueError(f"unknown social round record {kind!r}")
    return events
