"""The aiohttp JSON client (``llm.http_client: aiohttp``) against raw asyncio servers on 127.0.0.1: body framings,
keep-alive reuse, connections the server closed while idle, cancelled requests, oversized replies, and which client
the backend uses."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Awaitable, Callable

import pytest

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.http_json import MAX_BODY_BYTES, HTTPStatusError, JSONClient
from recagent_gym.llm.openai_backend import OpenAIBackend, resolve_http_client

Reply = Callable[[int], bytes]


async def _serve(reply: Reply, run: Callable[[str, list[int]], Awaitable[None]]) -> list[int]:
    """A server answering the n-th request of each connection with ``reply(n)``; returns requests per connection."""
    counts: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts.append(0)
        me = len(counts) - 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length"))[15:])
                await reader.readexactly(length)
                counts[me] += 1
                data = reply(counts[me])
                if not data:
                    break
                writer.write(data)
                await writer.drain()
                if b"Connection: close" in data or b"X-Then-Close" in data or data.startswith(b"HTTP/1.0"):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        await run(f"http://127.0.0.1:{port}/v1", counts)
    return counts


def _ok(body: bytes, *headers: str) -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


def test_framings_chunked_gzip_close_delimited_and_keep_alive_reuse() -> None:
    body = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
    zipped = gzip.compress(body)
    replies = {
        1: _ok(body),
        2: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(f"{len(c):x}\r\n".encode() + c + b"\r\n" for c in (body[:7], body[7:]))
        + b"0\r\n\r\n",
        3: _ok(zipped, "Content-Encoding: gzip"),
        4: b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body,
    }
    got: list[bytes] = []

    async def run(url: str, counts: list[int]) -> None:
        client = JSONClient(url, "sk-test")
        for _ in range(4):
            got.append(await client.post_json("/chat/completions", {"model": "m"}))
        await client.close()

    counts = asyncio.run(_serve(lambda n: replies[n], run))
    assert got == [body] * 4
    assert counts == [4]  # one connection reused for all four; the fourth reply closed it


def test_error_statuses_carry_status_headers_and_the_servers_message() -> None:
    error = json.dumps({"error": {"message": "response_format is not supported"}}).encode()
    reply = f"HTTP/1.1 400 Bad Request\r\nContent-Length: {len(error)}\r\nRetry-After: 3\r\n\r\n".encode() + error

    async def run(url: str, counts: list[int]) -> None:
        client = JSONClient(url, "sk-test")
        with pytest.raises(HTTPStatusError) as info:
            await client.post_json("/chat/completions", {})
        assert info.value.status == 400 and info.value.headers["retry-after"] == "3"
        assert "response_format" in info.value.message
        await client.close()

    asyncio.run(_serve(lambda n: reply, run))


def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    body = b'{"ok": 1}'

    async def run(url: str, counts: list[int]) -> None:
        client = JSONClient(url, "sk-test")
        assert await client.post_json("/x", {}) == body
        await asyncio.sleep(0.05)  # the server closed it after answering (no Connection: close): the loop sees EOF
        assert await client.post_json("/x", {}) == body
        await client.close()

    counts = asyncio.run(_serve(lambda n: _ok(body, "X-Then-Close: 1"), run))
    assert counts == [1, 1]  # the second request went to a fresh connection, without an error


def test_a_cancelled_request_closes_its_connection() -> None:
    body = b'{"ok": 1}'
    slow = asyncio.Event()

    async def run(url: str, counts: list[int]) -> None:
        client = JSONClient(url, "sk-test")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(client.post_json("/x", {}), timeout=0.2)
        slow.set()
        assert await client.post_json("/x", {}) == body
        await client.close()

    def reply(n: int) -> bytes:
        return b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial" if not slow.is_set() else _ok(body)

    counts = asyncio.run(_serve(reply, run))
    assert len(counts) == 2  # the half-read connection was dropped, not handed to the next request


def test_oversized_replies_fail_as_connection_errors_without_reading_them_whole() -> None:
    too_big = f"HTTP/1.1 200 OK\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode() + b"x" * 1024

    async def run(url: str, counts: list[int]) -> None:
        client = JSONClient(url, "sk-test")
        with pytest.raises(ConnectionError, match="over"):
            await client.post_json("/x", {})
        await client.close()

    asyncio.run(_serve(lambda n: too_big, run))


def test_base_url_checks_and_which_client_the_backend_uses() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        JSONClient("ftp://host/v1", "k")
    assert resolve_http_client("aiohttp") == "aiohttp"
    assert resolve_http_client("aiohttp", custom=True) == "openai"  # a custom httpx client is the openai package's
    assert resolve_http_client("openai") == "openai"
    config = LLMConfig(backend="openai", base_url="http://127.0.0.1:9/v1", model="m")
    assert OpenAIBackend(config).http_client == "aiohttp"


@pytest.mark.slow
def test_the_aiohttp_client_never_imports_the_openai_package() -> None:
    """Importing ``openai`` costs seconds of CPU, which a simulator's first round would pay inside its timer."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from recagent_gym.llm.config import LLMConfig\n"
        "from recagent_gym.llm.local_server import LocalServer\n"
        "from recagent_gym.llm.openai_backend import OpenAIBackend\n"
        "with LocalServer() as s:\n"
        "    b = OpenAIBackend(LLMConfig(backend='openai', base_url=s.base_url, model='m', http_client='aiohttp'))\n"
        "    b.generate(['hi']); b.choose(['pick'], [['a', 'b']]); b.close()\n"
        "print('openai' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"


def test_the_environments_proxy_is_looked_up_once_per_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """``aiohttp``'s ``trust_env`` looked the proxy up again for every request (it doubled the CPU per request); the
    client now finds the same proxy once, and honours ``NO_PROXY``."""
    from recagent_gym.llm.http_json import env_proxy

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https://api.example.com/v1") == {}
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.example:3128")
    found = env_proxy("https://api.example.com/v1")
    assert str(found["proxy"]) == "http://proxy.example:3128" and found["proxy_auth"].login == "user"
    assert env_proxy("http://api.example.com/v1") == {}  # a proxy for https only
    monkeypatch.setenv("NO_PROXY", "api.example.com")
    assert env_proxy("https://api.example.com/v1") == {}


def test_the_client_sends_through_the_environments_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: a host that does not resolve is reached only through ``HTTP_PROXY`` (a local server here, which
    answers in the proxy's place)."""
    body = b'{"via": "proxy"}'
    for name in ("HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)

    async def run(url: str, counts: list[int]) -> None:
        monkeypatch.setenv("HTTP_PROXY", url.removesuffix("/v1"))
        monkeypatch.delenv("http_proxy", raising=False)
        client = JSONClient("http://api.example.invalid/v1", "sk-test")
        assert await client.post_json("/chat/completions", {}) == body
        await client.close()

    counts = asyncio.run(_serve(lambda n: _ok(body), run))
    assert counts == [1]
