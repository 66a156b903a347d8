"""Several OpenAI-compatible endpoints behind one backend (``llm.base_urls``): spread, per-endpoint concurrency,
failover.

Each endpoint (e.g. one vLLM replica) has its own clients (one per API key, round-robin) and its own limit of
``max_concurrency`` requests in flight. A request goes to the healthy endpoint with the fewest requests in flight or
waiting (ties: the first listed), so replicas fill evenly. An endpoint whose attempt failed in a retryable way
(connection refused, timeout, 5xx) rests for ``endpoint_cooldown_s`` and the request's retry goes to another one;
when every endpoint rests, the one that rested longest is tried (the request's retry budget bounds the attempts).
"""

from __future__ import annotations

import asyncio
import itertools
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from recagent_gym.llm.secrets import redact

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def server_label(base_url: str | None) -> str:
    """The server as error messages name it: scheme, host, port and path, without user info or query (where a key
    could hide), redacted."""
    parts = urllib.parse.urlsplit(base_url or DEFAULT_BASE_URL)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return redact(urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", "")))


@dataclass
class Endpoint:
    url: str | None
    """Base URL (None: api.openai.com)."""
    label: str
    """The server as logs and errors name it (no user info or query)."""
    clients: list[Any]
    semaphore: asyncio.Semaphore
    keys: Any = None
    """Round-robin over ``clients``."""
    load: int = 0
    """Requests in flight or waiting for a slot here."""
    resting_until: float = 0.0
    requests: int = 0
    failures: int = 0

    def __post_init__(self) -> None:
        self.keys = itertools.cycle(range(len(self.clients)))

    def next_client(self) -> Any:
        return self.clients[next(self.keys)]


@dataclass
class EndpointPool:
    """The endpoints of one backend, created inside the event loop that uses them (their clients belong to it)."""

    endpoints: list[Endpoint]
    cooldown_s: float
    clock: Callable[[], float] = field(default=time.monotonic)

    @classmethod
    def build(
        cls,
        urls: Sequence[str | None],
        labels: Sequence[str],
        make_clients: Callable[[str | None], list[Any]],
        *,
        max_concurrency: int,
        cooldown_s: float,
    ) -> EndpointPool:
        endpoints = [
            Endpoint(url, label, make_clients(url), asyncio.Semaphore(max_concurrency))
            for url, label in zip(urls, labels, strict=True)
        ]
        return cls(endpoints, cooldown_s)

    def pick(self, avoid: Endpoint | None = None) -> Endpoint:
        """The least loaded healthy endpoint, other than ``avoid`` (the one that just failed) when there is one."""
        now = self.clock()
        pool = [e for e in self.endpoints if e is not avoid] or self.endpoints
        healthy = [e for e in pool if e.resting_until <= now]
        if not healthy:
            return min(pool, key=lambda e: e.resting_until)
        return min(healthy, key=lambda e: e.load)  # min keeps the first of equals: the order listed

    def has_healthy(self, avoid: Endpoint | None = None) -> bool:
        now = self.clock()
        return any(e.resting_until <= now for e in self.endpoints if e is not avoid)

    def rest(self, endpoint: Endpoint) -> None:
        """``endpoint`` failed: send nothing there for ``cooldown_s``."""
        endpoint.failures += 1
        endpoint.resting_until = self.clock() + self.cooldown_s

    @property
    def requests(self) -> list[int]:
        return [e.requests for e in self.endpoints]
