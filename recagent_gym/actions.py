"""What a user can do with a page: the four actions that prompts, users, the session kernel and the envs share."""

from __future__ import annotations

import enum


class Action(enum.IntEnum):
    """What a user does with a page."""

    WATCH = 0
    NEXT = 1
    SEARCH = 2
    LEAVE = 3
