"""The root of the project's typed errors: the command line turns any of them into one line and exit status 2.

Subclasses carry a message written for the user (what is wrong and where); anything else escaping a command is a
bug and keeps its traceback.
"""

from __future__ import annotations

from typing import ClassVar


class RecAgentError(Exception):
    """An error whose message is meant for the user: bad configuration, bad data, a failed backend, a broken run."""

    label: ClassVar[str] = "error"
    """What kind of error, as the command line prints it (``recagent-gym: <label>: <message>``)."""
