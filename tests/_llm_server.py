"""The package's local OpenAI-compatible server (:mod:`recagent_gym.llm.local_server`) with fault injection.

Faults are planned per prompt: a prompt containing ``<<tag>>`` gets the faults ``plan[tag]`` on its first attempts,
one per attempt, then a normal answer. Faults: ``429`` (with ``Retry-After``), ``500``, ``slow`` (answers after
``slow_s``), ``drop`` (closes the connection without answering), ``badjson`` (200 with a broken body), ``refuse``
(a refusal message), ``nonsense`` (an answer that names no option), ``no_schema`` (400 naming response_format),
``trickle`` (a normal answer whose body arrives a byte at a time over ``trickle_s``), ``surrogate`` (content holding
a lone UTF-16 surrogate), ``no_usage`` (a normal answer without ``usage``), and each key of :data:`MALFORMED` (a 200
reply whose body is not a chat completion).
``always`` is a fault given to every request without a plan (e.g. ``nonsense`` for a whole simulation).

Normal answers are the base server's: ``generate`` gets ``"reply <<tag>>"``; a choice request gets the option named
by ``PICK:<label>`` in the prompt, else the first option (as ``{"choice": ...}`` under a JSON schema, else text).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from recagent_gym.llm.local_server import LocalServer

HTTP_CLIENT = ["aiohttp"]
"""The HTTP client of the backends a test module builds; importing :func:`http_client` into the module runs each of
its tests with both clients."""


@pytest.fixture(autouse=True, params=["aiohttp", "openai"])
def http_client(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    HTTP_CLIENT[0] = request.param
    yield request.param
    HTTP_CLIENT[0] = "aiohttp"


TAG = re.compile(r"<<([^>]+)>>")

_GOOD = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}
MALFORMED: dict[str, bytes] = {
    "empty_choice": json.dumps({"choices": [{}]}).encode(),
    "null_message": json.dumps({"choices": [{"message": None}]}).encode(),
    "int_content": json.dumps({"choices": [{"message": {"content": 123}}]}).encode(),
    "bad_usage": json.dumps({**_GOOD, "usage": {"prompt_tokens": "many", "completion_tokens": 1}}).encode(),
    "str_choices": json.dumps({"choices": "abc"}).encode(),
    "empty_choices": json.dumps({"choices": []}).encode(),
    "list_body": b"[1, 2]",
    "not_json": b"<html>Bad gateway</html>",
    "bad_utf8": b'{"choices": "\xff\xfe"}',
}
"""200 bodies that are not chat completions, by fault name (each must be retried, then raised as LLMError)."""


class FaultServer(LocalServer):
    def __init__(
        self, *, latency_s: float = 0.0, slow_s: float = 2.0, retry_after: str = "1", trickle_s: float = 12.0
    ) -> None:
        super().__init__(latency_s=latency_s)
        self.slow_s = slow_s
        self.trickle_s = trickle_s
        self.always: str | None = None
        self.retry_after = retry_after
        self.plan: dict[str, list[str]] = {}
        self.schema_supported = True
        self.requests: list[dict[str, Any]] = []
        self.attempts: dict[str, int] = defaultdict(int)
        self.auth_headers: list[str] = []
        self._fault_lock = threading.Lock()

    def __enter__(self) -> FaultServer:
        super().__enter__()
        return self

    def no_options_reply(self, prompt: str) -> str:
        match = TAG.search(prompt)
        return f"reply <<{match.group(1) if match else ''}>>"

    @staticmethod
    def completion(content: str | None, refusal: str | None = None) -> dict[str, Any]:
        payload = LocalServer.completion(content, refusal)
        payload["usage"] = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
        return payload

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        prompt = body["messages"][-1]["content"]
        match = TAG.search(prompt)
        tag = match.group(1) if match else ""
        with self._fault_lock:
            attempt = self.attempts[tag]
            self.attempts[tag] += 1
            faults = self.plan.get(tag, [])
            fault = faults[attempt] if attempt < len(faults) else (None if faults else self.always)
            self.requests.append({"tag": tag, "attempt": attempt, "fault": fault, "body": body})
            self.auth_headers.append(handler.headers.get("authorization", ""))
        if self.latency_s:
            time.sleep(self.latency_s)
        wants_schema = body.get("response_format", {}).get("type") == "json_schema"
        if fault == "429":
            return self.send_json(handler, 429, {"error": {"message": "slow down"}}, {"Retry-After": self.retry_after})
        if fault == "500":
            return self.send_json(handler, 500, {"error": {"message": "boom"}})
        if fault == "drop":
            handler.close_connection = True
            handler.connection.shutdown(2)  # RST/EOF before any response byte
            return None
        if fault == "slow":
            time.sleep(self.slow_s)
        if fault == "badjson":
            return self.send_raw(handler, 200, b'{"id": "x", "choices": [ {"message": ')
        if fault in MALFORMED:
            return self.send_raw(handler, 200, MALFORMED[fault])
        if fault == "no_usage":
            payload = self.completion(self.answer(body))
            del payload["usage"]
            return self.send_json(handler, 200, payload)
        if fault == "surrogate":
            return self.send_json(handler, 200, self.completion("half an emoji: \ud83d, then more"))
        if fault == "trickle":
            return self._trickle(handler, json.dumps(self.completion(self.answer(body))).encode())
        if (fault == "no_schema" or not self.schema_supported) and wants_schema:
            message = "response_format json_schema is not supported by this server"
            return self.send_json(handler, 400, {"error": {"message": message, "type": "invalid_request_error"}})
        if fault == "refuse":
            return self.send_json(handler, 200, self.completion(None, refusal="I can't help with that."))
        if fault == "nonsense":
            content = "banana" if not wants_schema else '{"choice": "banana"}'
            return self.send_json(handler, 200, self.completion(content))
        return self.send_json(handler, 200, self.completion(self.answer(body)))

    def _trickle(self, handler: BaseHTTPRequestHandler, data: bytes) -> None:
        """Headers at once, then the body a byte at a time over ``trickle_s`` (each read sees progress)."""
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.flush()
        pause = self.trickle_s / len(data)
        for i in range(len(data)):
            handler.wfile.write(data[i : i + 1])
            handler.wfile.flush()
            time.sleep(pause)
