"""``llm.base_urls``: requests spread over several OpenAI-compatible endpoints (two real HTTP servers on 127.0.0.1),
each with its own concurrency limit, and fail over when one of them goes down mid-run."""

from __future__ import annotations

import pytest

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.local_server import LocalServer
from recagent_gym.llm.openai_backend import OpenAIBackend
from recagent_gym.llm.protocol import LLMError


class Replica(LocalServer):
    """A local server that can go down mid-run: from then on every request gets HTTP 503."""

    down = False
    refused = 0

    def respond(self, handler, body) -> None:  # type: ignore[no-untyped-def]
        if self.down:
            self.refused += 1
            self.send_json(handler, 503, {"error": {"message": "replica down"}})
            return
        super().respond(handler, body)


def _backend(urls: list[str], **extra: object) -> OpenAIBackend:
    values: dict[str, object] = {
        "backend": "openai", "base_urls": urls, "model": "replica", "timeout_s": 2.0, "backoff_base_s": 0.02,
        "max_retries": 3, "max_concurrency": 4, "structured_output": "text",
    }  # fmt: skip
    values.update(extra)
    return OpenAIBackend(LLMConfig(**values))


def test_requests_spread_over_endpoints_and_fail_over_when_one_goes_down() -> None:
    with Replica(latency_s=0.05) as first, Replica(latency_s=0.05) as second:
        backend = _backend([first.base_url, second.base_url])
        prompts = [f"say something {i}" for i in range(16)]
        assert all(g.text for g in backend.generate(prompts, seed=1))
        # spread, with per-endpoint concurrency (4 each)
        assert first.request_count == second.request_count == 8
        assert first.max_in_flight <= 4 and second.max_in_flight <= 4
        assert backend.endpoint_requests == [8, 8]
        first.down = True  # mid-run: every request still gets its answer, from the second
        before = second.request_count
        answers = backend.generate([f"again {i}" for i in range(16)], seed=2)
        assert len(answers) == 16 and all(g.text for g in answers)
        assert second.request_count - before == 16
        assert 1 <= first.refused <= 8  # the batch was spread before the first failure came back
        refused = first.refused
        assert all(g.text for g in backend.generate([f"later {i}" for i in range(8)], seed=4))
        assert first.refused == refused  # resting: later requests go straight to the healthy endpoint
        choices = backend.choose(["pick one\n- a\n- b"] * 4, [["a", "b"]] * 4, seed=3)
        assert all(c.answered for c in choices)
        backend.close()


def test_every_endpoint_down_is_a_typed_error_naming_them() -> None:
    with LocalServer() as a, LocalServer() as b:
        urls = [a.base_url, b.base_url]
    backend = _backend(urls, max_retries=2, endpoint_cooldown_s=0.01)
    with pytest.raises(LLMError, match=r"127\.0\.0\.1") as info:
        backend.generate(["hello"], seed=0)
    assert "3 attempts" in str(info.value)
    backend.close()


def test_base_url_and_base_urls_are_exclusive() -> None:
    with pytest.raises(ValueError, match="not both"):
        LLMConfig(backend="openai", model="m", base_url="http://a/v1", base_urls=["http://b/v1"])
