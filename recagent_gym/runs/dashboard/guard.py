"""The dashboard's boundary against other web pages: one ASGI middleware in front of every route.

A dashboard bound to loopback is still reachable from every page the user's browser opens: a page on another
origin can auto-submit a form to it, and DNS rebinding points a foreign name at 127.0.0.1 so that the page becomes
"same origin" with it. So :class:`Guard` refuses

- every request whose ``Host`` is not the bound address with its port (loopback names when bound to loopback or
  to all addresses, plus ``--allow-host`` names), and every request whose ``Origin``, when sent, is not one of them;
- every state-changing request (any method but GET, HEAD, OPTIONS) without a JSON content type (415: forms and
  ``text/plain`` are what another origin can send without asking first) or without this server's token in the
  ``X-Dashboard-Token`` header (403).

The token is random per server start and reaches the page in a ``<meta name="dashboard-token">`` tag of ``/``: only
a same-origin reader gets it. Every response carries a strict Content-Security-Policy (no inline script, no
framing), ``X-Frame-Options: DENY``, ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer``.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

TOKEN_HEADER = "x-dashboard-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = tuple(
    (k.encode(), v.encode())
    for k, v in (
        ("content-security-policy", CONTENT_SECURITY_POLICY),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
    )
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def new_token() -> str:
    """A fresh per-run token (256 random bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_authority(value: str, default_port: int) -> tuple[str, int] | None:
    """``host[:port]`` (``[v6]:port`` for IPv6) as a lower-case host and a port; ``None`` when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else ""
    else:
        host, _, port_text = value.partition(":")
        if ":" in port_text:
            return None
    if not host or (port_text and not port_text.isascii()) or (port_text and not port_text.isdigit()):
        return None
    port = int(port_text) if port_text else default_port
    return (host, port) if 0 < port < 65536 else None


def allowed_hosts(bind: str, port: int, extra: Iterable[str] = ()) -> frozenset[tuple[str, int]]:
    """The ``(host, port)`` pairs a request may name: the bound address (loopback names too when it is loopback or
    all addresses) with ``port``, and each of ``extra`` (``name`` or ``name:port``)."""
    bind = bind.strip("[]").lower()
    names = set() if bind in WILDCARD_BINDS else {bind}
    if bind in WILDCARD_BINDS or is_loopback(bind):
        names.update(LOOPBACK_NAMES)
    pairs = {(name, port) for name in names}
    for item in extra:
        pair = split_authority(item, port)
        if pair is None:
            raise ValueError(f"--allow-host: not a host name or host:port: {item!r}")
        pairs.add(pair)
    return frozenset(pairs)


def origin_pair(origin: str) -> tuple[str, int] | None:
    """The ``(host, port)`` of an ``Origin`` header (http or https), ``None`` for ``null`` or anything else."""
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or parts.path or parts.query or parts.fragment:
        return None
    return split_authority(parts.netloc, 443 if parts.scheme == "https" else 80)


def is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class Guard:
    """ASGI middleware: the checks of the module docstring on every HTTP request, security headers on every reply."""

    def __init__(self, app: ASGIApp, *, hosts: frozenset[tuple[str, int]], token: str) -> None:
        if not hosts or not token:
            raise ValueError("the dashboard's guard needs allowed hosts and a token")
        self.app, self.hosts, self.token = app, hosts, token

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why ``scope`` is refused (status, one-line message), or ``None`` when it may pass."""
        headers: dict[str, str] = {}
        for key, value in scope.get("headers", ()):
            headers.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
        host = split_authority(headers.get("host", ""), 80)
        if host not in self.hosts:
            return 403, f"host {headers.get('host', '(none)')!r} is not this dashboard's address"
        if "origin" in headers and origin_pair(headers["origin"]) not in self.hosts:
            return 403, f"cross-origin request from {headers['origin']!r} refused"
        if scope.get("method", "GET").upper() in SAFE_METHODS:
            return None
        if not is_json(headers.get("content-type", "")):
            return 415, "state-changing requests must have Content-Type: application/json"
        if not hmac.compare_digest(headers.get(TOKEN_HEADER, "").encode(), self.token.encode()):
            return 403, "missing or wrong X-Dashboard-Token (read it from the page's dashboard-token meta tag)"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refused = self.refusal(scope)
        if scope["type"] == "websocket":  # none are served; still, a refused one is closed before the app sees it
            if refused is None:
                await self.app(scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 1008})
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", ())}
                message["headers"] = [
                    *message.get("headers", ()),
                    *((k, v) for k, v in SECURITY_HEADERS if k not in present),
                ]
            await send(message)

        if refused is None:
            await self.app(scope, receive, send_secured)
            return
        status, text = refused
        body = json.dumps({"error": text}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send_secured({"type": "http.response.start", "status": status, "headers": headers})
        await send_secured({"type": "http.response.body", "body": body})
