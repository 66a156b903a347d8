"""Issue 28: a 200 reply that quotes the API key must not hand it to the caller. The OpenAI-compatible backend
redacts the configured key from every reply's text (answers, refusals, off-list choices) and from error text, with
both HTTP clients, against a local server that echoes the key it was sent."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.openai_backend import OpenAIBackend
from recagent_gym.llm.protocol import LLMError
from tests._llm_server import HTTP_CLIENT, FaultServer, http_client  # noqa: F401  (autouse: both clients)

KEY = "vllm-serve-secret-0123456789"
"""Not shaped like a provider key (no ``sk-``): only its registration as the configured key can scrub it."""


class EchoServer(FaultServer):
    """Answers every request with text that quotes the bearer token it was sent (``mode`` says where)."""

    mode = "content"

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        self.auth_headers.append(handler.headers.get("authorization", ""))
        token = self.auth_headers[-1].removeprefix("Bearer ")
        said = f"the key is {token}, see?"
        if self.mode == "content":
            return self.send_json(handler, 200, self.completion(said))
        if self.mode == "refusal":
            return self.send_json(handler, 200, self.completion(None, refusal=said))
        return self.send_json(handler, 400, {"error": {"message": said}})


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    with EchoServer() as srv:
        yield srv


def _backend(server: EchoServer) -> OpenAIBackend:
    config = LLMConfig(
        backend="openai",
        http_client=HTTP_CLIENT[0],
        base_url=server.base_url,
        model="test-model",
        api_keys=[KEY],
        structured_output="text",
        max_retries=0,
    )
    return OpenAIBackend(config)


@pytest.mark.slow
def test_a_reply_quoting_the_key_reaches_the_caller_redacted(server: EchoServer, caplog) -> None:  # type: ignore[no-untyped-def]
    backend = _backend(server)
    try:
        (answer,) = backend.generate(["hello"])
        (choice,) = backend.choose(["pick one"], [["yes", "no"]])
        server.mode = "refusal"
        with caplog.at_level(logging.DEBUG):
            (refused,) = backend.generate(["hello again"])
    finally:
        backend.close()
    assert server.auth_headers[0] == f"Bearer {KEY}"  # the server did get (and echo) the key
    assert answer.text == "the key is ***, see?"
    assert choice.index == -1 and choice.extra["answer"] == "the key is ***, see?" and KEY not in repr(choice)
    assert refused.finish_reason == "refusal" and KEY not in repr(refused)
    assert KEY not in caplog.text


def test_an_error_quoting_the_key_is_redacted(server: EchoServer) -> None:
    server.mode = "error"
    backend = _backend(server)
    try:
        with pytest.raises(LLMError) as info:
            backend.generate(["hello"])
    finally:
        backend.close()
    assert "the key is ***" in str(info.value) and KEY not in str(info.value)
