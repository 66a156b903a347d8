"""A lean HTTP/1.1 client for JSON POSTs to OpenAI-compatible servers (``llm.http_client: lean``).

Why: the ``openai`` client spends about 6 ms of CPU per chat request (request models, pydantic transforms, the
httpx connection pool scanning every connection for expiry on each request), more than ten times what the request
needs; at a few hundred requests per simulated round that was most of the simulator's CPU floor. This client sends
the same JSON body over keep-alive connections on asyncio streams (``http://`` and ``https://`` with the system's
certificates), about 0.5 ms per request including a loopback server's side.

What it does not do (the backend uses the ``openai`` client for those: ``llm.http_client: auto``): proxies from the
environment, HTTP/2. Bodies may be sized by ``Content-Length``, chunked, or delimited by the server closing the
connection; gzip/deflate bodies are decoded. Timeouts are the caller's (``asyncio.wait_for`` over the whole
attempt): a cancelled request's connection is closed, never reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import urllib.parse
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")
"""Environment variables that route requests through a proxy, which only the ``openai`` client honours."""


class HTTPStatusError(Exception):
    """A non-2xx reply: ``status``, lower-cased ``headers``, and the server's error message (from the body)."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = {str(k).lower(): str(v) for k, v in headers.items()}
        self.message = error_message(body)
        super().__init__(f"HTTP {status}: {self.message}")


class ProtocolError(ConnectionError):
    """The server's reply is not HTTP/1.x as this client reads it (a connection failure for the retry logic)."""


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


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str
    """The base path without a trailing slash (``/v1``)."""

    @classmethod
    def parse(cls, base_url: str) -> Target:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL must be http:// or https:// with a host, got scheme {parts.scheme!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @property
    def usable(self) -> bool:
        """Still open at both ends: the loop has not seen the server close it while it sat idle."""
        return not self.reader.at_eof() and not self.writer.is_closing()

    def close(self) -> None:
        self.writer.close()


class LeanClient:
    """POSTs JSON to one server (``base_url``) with one API key over a pool of keep-alive connections.

    The pool has no size limit of its own: the backend's per-endpoint semaphore bounds requests in flight, and so
    the connections.
    """

    def __init__(self, base_url: str, api_key: str, *, user_agent: str = "recagent-gym") -> None:
        self.target = Target.parse(base_url)
        self._ssl = ssl.create_default_context() if self.target.scheme == "https" else None
        self._idle: list[_Connection] = []
        self._head = (
            f"Host: {self.target.host_header}\r\nAuthorization: Bearer {api_key}\r\n"
            f"User-Agent: {user_agent}\r\nAccept: application/json\r\nContent-Type: application/json\r\n"
        ).encode("latin-1")

    async def post_json(self, path: str, payload: Mapping[str, Any]) -> bytes:
        """The body of a 2xx reply to POST ``base path + path``; :class:`HTTPStatusError` for other statuses,
        ``OSError``/``ConnectionError``/``asyncio.IncompleteReadError`` when the connection fails."""
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        request = (
            f"POST {self.target.path}{path} HTTP/1.1\r\n".encode("latin-1")
            + self._head
            + f"Content-Length: {len(body)}\r\n\r\n".encode("latin-1")
            + body
        )
        conn = await self._connection()
        try:
            conn.writer.write(request)
            status, headers, data, keep = await self._read_reply(conn.reader)
        except BaseException:  # cancelled (timeout) or failed half-way: the connection's state is unknown
            conn.close()
            raise
        if keep:
            self._idle.append(conn)
        else:
            conn.close()
        if not 200 <= status < 300:
            raise HTTPStatusError(status, headers, data)
        return data

    async def _connection(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable:
                return conn
            conn.close()
        reader, writer = await asyncio.open_connection(
            self.target.host,
            self.target.port,
            ssl=self._ssl,
            server_hostname=self.target.host if self._ssl is not None else None,
            limit=MAX_HEADER_BYTES,
        )
        return _Connection(reader, writer)

    async def _read_reply(self, reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes, bool]:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError as exc:
                raise ProtocolError("reply headers too long") from exc
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
                raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:60]!r}")
            status = int(parts[1])
            if status >= 200 or status == 101:
                break  # 1xx interim replies (100 Continue) are skipped
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        keep = parts[0] != "HTTP/1.0" and "close" not in headers.get("connection", "").lower()
        if status in (204, 304):
            return status, headers, b"", keep
        if "chunked" in headers.get("transfer-encoding", "").lower():
            data = await _read_chunked(reader)
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError as exc:
                raise ProtocolError("bad Content-Length") from exc
            if not 0 <= length <= MAX_BODY_BYTES:
                raise ProtocolError(f"Content-Length {length} out of range")
            data = await reader.readexactly(length)
        else:  # delimited by the server closing the connection
            data = await reader.read(MAX_BODY_BYTES + 1)
            while len(data) <= MAX_BODY_BYTES and not reader.at_eof():
                more = await reader.read(MAX_BODY_BYTES + 1 - len(data))
                if not more:
                    break
                data += more
            keep = False
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding in ("gzip", "deflate"):
            try:
                data = zlib.decompress(data, 47)  # 32 + 15: gzip or zlib header, detected
            except zlib.error as exc:
                raise ProtocolError(f"bad {encoding} body") from exc
        return status, headers, data, keep

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        for conn in idle:
            with contextlib.suppress(OSError):  # already reset by the server: nothing left to close
                await conn.writer.wait_closed()


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise ProtocolError("bad chunk size") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(chunks)
        total += size
        if total > MAX_BODY_BYTES:
            raise ProtocolError("chunked body too large")
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)
