"""JSON POSTs to OpenAI-compatible servers over ``aiohttp`` (``llm.http_client: aiohttp``, the default).

Why: the ``openai`` client spends about 3-6 ms of CPU per chat request (request models, pydantic, ``httpx``'s
connection pool), more than ten times what the request needs; at several hundred requests per simulated round that
was most of the simulator's CPU floor. ``aiohttp`` sends the same JSON body over keep-alive connections for about
0.5 ms (measured against a loopback server). Proxies come from the environment (``HTTPS_PROXY``, ``NO_PROXY``, ...)
as with the ``openai`` client, looked up ONCE per client when its session opens: ``aiohttp``'s own ``trust_env``
looks them up again for every request (the environment and ``~/.netrc``), which doubled the CPU per request
(``python benchmarks/bench_llm_openai.py --n 512 --latency 0 --concurrency 32``: 1.10 ms with it, 0.55 ms without,
client and loopback server together). ``llm.http_client: openai`` uses that client instead (e.g. for a custom
``httpx`` client).

Timeouts are the caller's (``asyncio.wait_for`` over the whole attempt); a cancelled request's connection is closed
by ``aiohttp``, never reused. Failures reach the caller as :class:`HTTPStatusError` (a non-2xx reply, with its
headers for ``Retry-After``) or :class:`ConnectionError` (no complete reply).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

import aiohttp

MAX_BODY_BYTES = 64 * 1024 * 1024
"""A reply larger than this is a failure (a hostile or broken server must not fill the memory)."""


class HTTPStatusError(Exception):
    """A non-2xx reply: ``status``, lower-cased ``headers``, and the server's error message (from the body)."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = dict(headers)
        self.message = error_message(body)
        super().__init__(f"HTTP {status}: {self.message}")


def error_message(body: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body's first 300 characters."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return str(data["error"].get("message", ""))[:300] or text[:300]
    return text[:300]


class JSONClient:
    """POSTs JSON to one server (``base_url``) with one API key over ``aiohttp``'s pool of keep-alive connections.

    The pool has no size limit of its own: the backend's per-endpoint semaphore bounds the requests in flight, and
    so the connections. The session is opened on first use, inside the backend's event loop.
    """

    def __init__(self, base_url: str, api_key: str, *, user_agent: str = "recagent-gym") -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL must be http:// or https:// with a host, got scheme {parts.scheme!r}")
        # Credentials written into the URL are not sent (the key goes as a bearer token), nor shown in errors.
        netloc = parts.netloc.rpartition("@")[2]
        self.base_url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), parts.query, ""))
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "User-Agent": user_agent,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        self._session: aiohttp.ClientSession | None = None
        self._proxy: dict[str, Any] = {}

    async def post_json(self, path: str, payload: Mapping[str, Any]) -> bytes:
        """The body of a 2xx reply to POST ``base_url + path``; :class:`HTTPStatusError` for other statuses,
        :class:`ConnectionError` when no complete reply arrives."""
        if self._session is None:
            self._proxy = env_proxy(self.base_url)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=None),
            )
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        try:
            async with self._session.post(self.base_url + path, data=body, **self._proxy) as reply:
                if reply.content_length is not None and reply.content_length > MAX_BODY_BYTES:
                    raise ConnectionError(f"reply of {reply.content_length} bytes is over {MAX_BODY_BYTES}")
                data = await _read_capped(reply)
                if not 200 <= reply.status < 300:
                    raise HTTPStatusError(reply.status, {k.lower(): v for k, v in reply.headers.items()}, data)
                return data
        except aiohttp.ClientError as exc:  # refused, reset, closed early, not HTTP: no usable reply
            raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def env_proxy(base_url: str) -> dict[str, Any]:
    """The environment's proxy for ``base_url`` (``proxy`` and ``proxy_auth`` for ``post``), or ``{}`` for none or
    where ``NO_PROXY`` exempts the host: what ``aiohttp``'s ``trust_env`` would find, looked up once."""
    from aiohttp.helpers import get_env_proxy_for_url
    from yarl import URL

    try:
        proxy, auth = get_env_proxy_for_url(URL(base_url))
    except LookupError:
        return {}
    return {"proxy": proxy, "proxy_auth": auth}


async def _read_capped(reply: aiohttp.ClientResponse) -> bytes:
    chunks, total = [], 0
    async for chunk in reply.content.iter_any():
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            raise ConnectionError(f"reply body over {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
