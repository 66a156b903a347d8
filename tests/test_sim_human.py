"""Role play's command parser: ASCII numbers only, anything else is "not understood" (never a crash)."""

from __future__ import annotations

import pytest

from recagent_gym.runs.simulator.human import HumanPlayer
from recagent_gym.users.protocol import Action, Page

PAGE = Page(items=(10, 11, 12))


@pytest.mark.parametrize("line", ["w ²", "w 1 ²", "w ٣", "w 1 ٥", "w ①", "w 2 ³", "w 99999999999999999999", "w -1"])
def test_non_ascii_or_odd_numbers_are_not_understood(line: str) -> None:
    assert HumanPlayer._parse(line, PAGE) is None


def test_ascii_commands_still_parse() -> None:
    watch = HumanPlayer._parse("w 2 4", PAGE)
    assert watch is not None and watch.action == Action.WATCH and watch.item == 11 and watch.rating == 4.0
    assert HumanPlayer._parse("watch 3", PAGE).item == 12  # type: ignore[union-attr]
    assert HumanPlayer._parse("w 4", PAGE) is None  # outside the page
    assert HumanPlayer._parse("w 1 6", PAGE) is None  # rating outside 1-5
