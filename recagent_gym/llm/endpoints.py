"""Several OpenAI-compatible endpoints behind one backend (``llm.base_urls``): a pool spread by in-flight load, with
per-endpoint concurrency and rate limits, and failed endpoints taken out and tried again later.

Each endpoint (e.g. one vLLM replica) has its own clients (one per API key, round-robin), its own limit of
``max_concurrency`` requests in flight and, with ``endpoint_rpm``, its own pace of request starts (evenly spaced,
``60 / endpoint_rpm`` seconds apart). Requests wait in one queue for the pool and each takes a free slot at the
available endpoint with the fewest requests in flight (ties: the first listed), so replicas fill evenly and a slow
one, whose slots free up later, serves fewer. The queue is ordered by each request's priority
(:data:`~recagent_gym.llm.priority.REQUEST_PRIORITY` of the calling context; higher first), first come first
served within one priority; a freed slot wakes only the request that takes it.

An endpoint whose attempt failed in a retryable way (connection refused, timeout, 5xx) rests: no new request goes
there for ``endpoint_cooldown_s``, doubled for each failure in a row (at most :data:`MAX_BACKOFF` times). When the
rest is over it is *probing*: it takes one request at a time until one succeeds, which puts it back in full
service; a failed probe rests it again, longer. Requests still waiting are never sent to an endpoint that failed
meanwhile (they wait for the pool, not for one endpoint); the request whose attempt failed is retried on another
endpoint at once. When no endpoint is available, the one whose rest ends first is tried (the
request's retry budget, ``max_retries``, bounds the attempts). Nothing is dropped: every request ends in an answer
or, once its retries are spent, in a typed error.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from recagent_gym.llm.secrets import redact

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_BACKOFF = 8
"""An endpoint failing again and again rests at most this many times ``endpoint_cooldown_s``."""


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
    capacity: int
    """Most requests in flight here (``max_concurrency``)."""
    keys: Any = None
    """Round-robin over ``clients``."""
    load: int = 0
    """Requests in flight here."""
    resting_until: float = 0.0
    streak: int = 0
    """Failures in a row (0: in full service; more: resting, then probing)."""
    next_start: float = 0.0
    """With a rate limit: the earliest time the next request may start."""
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
    rpm: float | None = None
    """Most request starts per minute at each endpoint (None: no limit)."""
    waiting: int = 0
    """Requests waiting for a free slot anywhere."""
    queue: list[list[Any]] = field(default_factory=list)
    """The waiting requests as a heap of ``[-priority, arrival, future, avoid]``: the head takes the next free slot."""
    arrivals: Iterator[int] = field(default_factory=itertools.count)

    @classmethod
    def build(
        cls,
        urls: Sequence[str | None],
        labels: Sequence[str],
        make_clients: Callable[[str | None], list[Any]],
        *,
        max_concurrency: int,
        cooldown_s: float,
        rpm: float | None = None,
    ) -> EndpointPool:
        endpoints = [
            Endpoint(url, label, make_clients(url), max_concurrency) for url, label in zip(urls, labels, strict=True)
        ]
        return cls(endpoints, cooldown_s, rpm=rpm)

    def available(self, endpoint: Endpoint, now: float) -> bool:
        """Not resting, and (if probing after a failure) with no request there yet."""
        return endpoint.resting_until <= now and (endpoint.streak == 0 or endpoint.load == 0)

    def pick(self, avoid: Endpoint | None = None) -> Endpoint | None:
        """The available endpoint with a free slot and the fewest requests in flight, other than ``avoid`` (the one
        that just failed) when another will do; when none is available and no probe is out, the resting one with a
        free slot whose rest ends first (the caller's retry budget bounds such attempts); else None (wait)."""
        now = self.clock()
        free = [e for e in self.endpoints if e.load < e.capacity]
        ready = [e for e in free if self.available(e, now)]
        others = [e for e in ready if e is not avoid]
        if others or ready:
            return min(others or ready, key=lambda e: e.load)  # min keeps the first of equals: the order listed
        resting = [e for e in free if e.resting_until > now]
        probing = any(e.resting_until <= now and e.streak > 0 and e.load > 0 for e in self.endpoints)
        if resting and not probing and not any(self.available(e, now) for e in self.endpoints):
            return min(resting, key=lambda e: (e.resting_until, e.load))
        return None  # every slot taken, or a probe is out: wait for it

    def has_healthy(self, avoid: Endpoint | None = None) -> bool:
        now = self.clock()
        return any(self.available(e, now) or (e.streak == 0 and e.resting_until <= now)
                   for e in self.endpoints if e is not avoid)  # fmt: skip

    def rest(self, endpoint: Endpoint) -> None:
        """``endpoint`` failed: send nothing there for ``cooldown_s``, doubled per failure in a row (failures of
        requests sent before its rest began do not lengthen it)."""
        endpoint.failures += 1
        now = self.clock()
        if endpoint.resting_until > now:
            return
        endpoint.streak += 1
        factor = min(2 ** (endpoint.streak - 1), MAX_BACKOFF)
        endpoint.resting_until = now + self.cooldown_s * factor

    def succeeded(self, endpoint: Endpoint) -> None:
        """An answer came back: the endpoint is in full service."""
        endpoint.streak = 0

    async def _pace(self, endpoint: Endpoint) -> None:
        """Wait for the endpoint's next start under ``rpm`` (starts evenly spaced)."""
        if self.rpm is None:
            return
        now = self.clock()
        start = max(now, endpoint.next_start)
        endpoint.next_start = start + 60.0 / self.rpm
        if start > now:
            await asyncio.sleep(start - now)

    def _grant(self) -> None:
        """Hand the free slots to the waiting requests, highest priority first (the first come within one)."""
        while self.queue:
            future, avoid = self.queue[0][2], self.queue[0][3]
            if future.done():  # its request was cancelled while waiting
                heapq.heappop(self.queue)
                continue
            endpoint = self.pick(avoid)
            if endpoint is None:
                return
            heapq.heappop(self.queue)
            endpoint.load += 1
            future.set_result(endpoint)

    async def _take(self, avoid: Endpoint | None, priority: int) -> Endpoint:
        """Wait in the pool's one queue, in order of priority, for a slot (so a fast endpoint serves more)."""
        future: asyncio.Future[Endpoint] = asyncio.get_running_loop().create_future()
        heapq.heappush(self.queue, [-priority, next(self.arrivals), future, avoid])
        self.waiting += 1
        try:
            while True:
                self._grant()
                if future.done():
                    return future.result()
                now = self.clock()
                ends = [e.resting_until - now for e in self.endpoints if e.resting_until > now]
                with contextlib.suppress(TimeoutError):  # a slot is granted, or a rest ends
                    return await asyncio.wait_for(asyncio.shield(future), timeout=min(ends) if ends else None)
        except BaseException:
            if future.done() and not future.cancelled():  # granted just as its request was cancelled: give it back
                future.result().load -= 1
                self._grant()
            future.cancel()
            raise
        finally:
            self.waiting -= 1

    async def _release(self, endpoint: Endpoint) -> None:
        endpoint.load -= 1
        self._grant()

    @asynccontextmanager
    async def slot(self, avoid: Endpoint | None = None, priority: int = 0) -> AsyncIterator[Endpoint]:
        """A slot at the least loaded available endpoint, held while the request is sent and answered; requests of
        a higher ``priority`` take the slots first."""
        endpoint = await self._take(avoid, priority)
        try:
            await self._pace(endpoint)
            endpoint.requests += 1
            yield endpoint
        finally:
            await asyncio.shield(self._release(endpoint))

    @property
    def requests(self) -> list[int]:
        return [e.requests for e in self.endpoints]

    def stats(self) -> list[dict[str, Any]]:
        """Per endpoint (in ``base_urls`` order): its label, attempts sent, failures, and whether it is resting."""
        now = self.clock()
        return [
            {"endpoint": e.label, "requests": e.requests, "failures": e.failures, "resting": e.resting_until > now}
            for e in self.endpoints
        ]
