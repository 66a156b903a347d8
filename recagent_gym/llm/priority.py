"""Which LLM requests take a backend's slots first when they are all in use.

A request's priority is :data:`REQUEST_PRIORITY` of the context that makes the call (higher first; 0 by default).
The OpenAI-compatible backend reads it where the request waits for a slot (:class:`~.endpoints.EndpointPool`); the
context follows the call into the backend's event loop. A simulator round uses it to put the requests that the
round's longest chains wait on ahead of work that has time to spare (see
:mod:`recagent_gym.runs.simulator.round_modes`). It changes when a request is sent, never what it asks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

REQUEST_PRIORITY: ContextVar[int] = ContextVar("recagent_gym_request_priority", default=0)


@contextmanager
def request_priority(level: int) -> Iterator[None]:
    """The LLM requests made inside (in this thread or task) wait with priority ``level``."""
    token = REQUEST_PRIORITY.set(level)
    try:
        yield
    finally:
        REQUEST_PRIORITY.reset(token)


def at_priority(level: int, job: Callable[[], T]) -> Callable[[], T]:
    """``job`` wrapped to run at priority ``level`` (for work handed to a thread pool, whose threads do not share
    the submitter's context)."""

    def run() -> T:
        with request_priority(level):
            return job()

    return run
