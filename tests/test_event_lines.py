"""The event log's readable lines: one sentence per event kind, shared by the simulator and env ``info``."""

from __future__ import annotations

from recagent_gym.session.events import EVENT_KINDS, HUMAN_LINES, Event, human_line


def test_every_kind_but_intervention_has_its_own_sentence() -> None:
    assert set(HUMAN_LINES) == set(EVENT_KINDS) - {"intervention"}


def test_lines_name_the_agent_items_and_text() -> None:
    def line(kind: str, **fields) -> str:
        return human_line(Event(round=2, time_h=10.0, kind=kind, agent=4, name="Sarah Miller", **fields))

    assert line("watch", titles=["Casper"]) == "[round 3, day 1, 10:00] Sarah Miller watches <Casper>"
    found = line("search", text="space  films", titles=["Alien"])
    assert found.endswith('searches for "space films" and finds <Alien>')
    assert line("search", text="x").endswith('searches for "x" and finds nothing')
    assert line("chat", text="hi", extra={"with_name": "Tom"}).endswith("Sarah Miller chats with Tom: hi")
    assert line("chat", text="hi").endswith("chats with a friend: hi")
    assert line("take_action", text="enter the recommender").endswith("Sarah Miller chooses to enter the recommender")
    assert line("intervention", text="profile edited").endswith("] intervention: profile edited")
    assert human_line(Event(round=0, time_h=0.0, kind="idle", agent=7)).endswith("user 7 does nothing")
