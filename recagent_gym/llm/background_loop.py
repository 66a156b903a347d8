"""An asyncio event loop in a daemon thread: the synchronous facade over an async backend.

Coroutines are submitted from any thread, a notebook's event-loop thread included (which then blocks while it
waits). While a loop runs, its owner is held here and closed at interpreter exit, while the loop's thread still runs
(its HTTP sessions would otherwise end in ``Unclosed client session`` lines on stderr).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Closable(Protocol):
    def close(self) -> None: ...


_OPEN: set[Closable] = set()
"""Owners whose loop runs (held here until closed, so none is collected with its sessions still open)."""
_open_lock = threading.Lock()


@atexit.register
def _close_open_owners() -> None:
    """Close what a command left open, while the loops' daemon threads still run (before interpreter teardown)."""
    with _open_lock:
        owners = list(_OPEN)
    for owner in owners:
        with contextlib.suppress(Exception):
            owner.close()


class BackgroundLoop:
    """One event loop in a daemon thread named ``thread_name``, started on the first :meth:`run`."""

    def __init__(self, owner: Closable, thread_name: str) -> None:
        self._owner = owner
        self._thread_name = thread_name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._loop is not None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop (started if need be) and wait for its result."""
        with self._start_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._thread_name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                with _open_lock:
                    _OPEN.add(self._owner)
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self, shutdown: Coroutine[Any, Any, None]) -> None:
        """Run ``shutdown`` on the loop (closing what belongs to it), then stop the loop and its thread."""
        if self._loop is None:
            shutdown.close()
            return
        asyncio.run_coroutine_threadsafe(shutdown, self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop.close()
        self._loop, self._thread = None, None
        with _open_lock:
            _OPEN.discard(self._owner)
