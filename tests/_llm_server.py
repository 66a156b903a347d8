"""A small OpenAI-compatible chat server on 127.0.0.1 with fault injection, for tests and benchmarks.

Faults are planned per prompt: a prompt containing ``<<tag>>`` gets the faults ``plan[tag]`` on its first attempts,
one per attempt, then a normal answer. Faults: ``429`` (with ``Retry-After``), ``500``, ``slow`` (answers after
``slow_s``), ``drop`` (closes the connection without answering), ``badjson`` (200 with a broken body), ``refuse``
(a refusal message), ``nonsense`` (an answer that names no option), ``no_schema`` (400 naming response_format).

Normal answers: ``generate`` gets ``"reply <<tag>>"``; a choice request gets the option named by ``PICK:<label>``
in the prompt, else the first option (as ``{"choice": ...}`` under a JSON schema, else as plain text).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TAG = re.compile(r"<<([^>]+)>>")
PICK = re.compile(r"PICK:(\S+)")
OPTION_LINE = re.compile(r"^- (.+)$", re.MULTILINE)


class FaultServer:
    def __init__(self, *, latency_s: float = 0.0, slow_s: float = 2.0, retry_after: str = "1") -> None:
        self.latency_s = latency_s
        self.slow_s = slow_s
        self.retry_after = retry_after
        self.plan: dict[str, list[str]] = {}
        self.schema_supported = True
        self.requests: list[dict[str, Any]] = []
        self.attempts: dict[str, int] = defaultdict(int)
        self.auth_headers: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    server._handle(self, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with server._lock:
                        server.in_flight -= 1

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- behaviour ------------------------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        prompt = body["messages"][-1]["content"]
        match = TAG.search(prompt)
        tag = match.group(1) if match else ""
        with self._lock:
            attempt = self.attempts[tag]
            self.attempts[tag] += 1
            faults = self.plan.get(tag, [])
            fault = faults[attempt] if attempt < len(faults) else None
            self.requests.append({"tag": tag, "attempt": attempt, "fault": fault, "body": body})
            self.auth_headers.append(handler.headers.get("authorization", ""))
        if self.latency_s:
            time.sleep(self.latency_s)
        wants_schema = body.get("response_format", {}).get("type") == "json_schema"
        if fault == "429":
            return self._send(handler, 429, {"error": {"message": "slow down"}}, {"Retry-After": self.retry_after})
        if fault == "500":
            return self._send(handler, 500, {"error": {"message": "boom"}})
        if fault == "drop":
            handler.close_connection = True
            handler.connection.shutdown(2)  # RST/EOF before any response byte
            return None
        if fault == "slow":
            time.sleep(self.slow_s)
        if fault == "badjson":
            return self._send_raw(handler, 200, b'{"id": "x", "choices": [ {"message": ')
        if (fault == "no_schema" or not self.schema_supported) and wants_schema:
            message = "response_format json_schema is not supported by this server"
            return self._send(handler, 400, {"error": {"message": message, "type": "invalid_request_error"}})
        if fault == "refuse":
            return self._send(handler, 200, self._completion(None, refusal="I can't help with that."))
        if fault == "nonsense":
            return self._send(handler, 200, self._completion("banana" if not wants_schema else '{"choice": "banana"}'))
        return self._send(handler, 200, self._completion(self._answer(prompt, tag, body, wants_schema)))

    @staticmethod
    def _answer(prompt: str, tag: str, body: dict[str, Any], wants_schema: bool) -> str:
        if wants_schema:
            labels = body["response_format"]["json_schema"]["schema"]["properties"]["choice"]["enum"]
        else:
            labels = OPTION_LINE.findall(prompt)
        if not labels:
            return f"reply <<{tag}>>"
        pick = PICK.search(prompt)
        label = pick.group(1) if pick and pick.group(1) in labels else labels[0]
        return json.dumps({"choice": label}) if wants_schema else label

    @staticmethod
    def _completion(content: str | None, refusal: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": "fault-server",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": refusal},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        }

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        FaultServer._send_raw(handler, status, json.dumps(payload).encode(), headers)

    @staticmethod
    def _send_raw(
        handler: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str] | None = None
    ) -> None:
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)
