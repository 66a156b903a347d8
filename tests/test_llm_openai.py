"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1 with injected faults."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter

import pytest

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.factory import build_llm
from recagent_gym.llm.openai_backend import OpenAIBackend
from recagent_gym.llm.protocol import LLMError
from recagent_gym.runs.config import load_config
from tests._llm_server import HTTP_CLIENT, FaultServer, http_client  # noqa: F401  (autouse: every test runs with both clients)

KEYS = ["sk-unit-test-key-number-one-0001", "sk-unit-test-key-number-two-0002"]


def _backend(server: FaultServer, **overrides: object) -> OpenAIBackend:
    values: dict[str, object] = {
        "http_client": HTTP_CLIENT[0],
        "backend": "openai",
        "base_url": server.base_url,
        "model": "test-model",
        "api_keys": KEYS,
        "timeout_s": 0.5,
        "backoff_base_s": 0.02,
        "max_retries": 3,
    }
    values.update(overrides)
    return OpenAIBackend(LLMConfig(**values))


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    with FaultServer(slow_s=1.2, retry_after="1") as srv:
        yield srv


@pytest.mark.slow
def test_every_fault_recovers_results_in_order_without_duplicates(server: FaultServer) -> None:
    faults = ["429", "500", "slow", "drop", "badjson", None, "500", None]
    tags = [f"t{i}" for i in range(24)]
    server.retry_after = "0"
    server.plan = {tag: [faults[i % len(faults)]] if faults[i % len(faults)] else [] for i, tag in enumerate(tags)}
    backend = _backend(server, max_concurrency=4)
    out = backend.generate([f"say <<{tag}>>" for tag in tags], max_tokens=5)
    backend.close()
    assert [g.text for g in out] == [f"reply <<{tag}>>" for tag in tags]
    successes = Counter(r["tag"] for r in server.requests if r["fault"] is None)
    assert all(successes[tag] == 1 for tag in tags)  # each prompt answered exactly once
    assert backend.retries == sum(1 for f in server.plan.values() if f)
    # The server still counts a "slow" request the client gave up on (timeout) while the retry runs: the client's
    # bound of 4 holds for the requests it waits on, the server may see one more per timed-out request.
    slow = sum(1 for f in server.plan.values() if f == ["slow"])
    assert server.max_in_flight <= 4 + slow
    assert all(g.usage.prompt_tokens == 7 and g.usage.calls == 1 for g in out)


@pytest.mark.slow
def test_retry_after_is_honoured(server: FaultServer) -> None:
    server.plan = {"r": ["429"]}
    backend = _backend(server)
    start = time.perf_counter()
    (g,) = backend.generate(["<<r>>"])
    elapsed = time.perf_counter() - start
    backend.close()
    assert g.text == "reply <<r>>"
    assert elapsed >= 1.0  # the server asked for one second; our own backoff would be 0.02 s


def test_keys_are_used_round_robin(server: FaultServer) -> None:
    backend = _backend(server, max_concurrency=1)
    backend.generate([f"<<k{i}>>" for i in range(4)])
    backend.close()
    assert [h.split()[-1] for h in server.auth_headers] == [KEYS[0], KEYS[1], KEYS[0], KEYS[1]]


@pytest.mark.slow
def test_persistent_failure_raises_a_typed_error(server: FaultServer) -> None:
    server.plan = {"bad": ["500"] * 10}
    backend = _backend(server, max_retries=2)
    with pytest.raises(LLMError, match="after 3 attempts"):
        backend.generate(["<<ok>>", "<<bad>>"])
    assert server.attempts["bad"] == 3
    server.plan = {"slow": ["slow"] * 10}
    with pytest.raises(LLMError, match="timed out"):
        backend.generate(["<<slow>>"])
    backend.close()


@pytest.mark.slow
def test_client_errors_are_not_retried(server: FaultServer) -> None:
    server.schema_supported = False
    backend = _backend(server, structured_output="json_schema")
    with pytest.raises(LLMError, match="HTTP 400"):
        backend.choose(["<<c>>"], [["a", "b"]])
    assert server.attempts["c"] == 1
    backend.close()


def test_refusal_is_an_unusable_answer_not_an_error(server: FaultServer) -> None:
    server.plan = {"f": ["refuse"], "g": ["refuse", "refuse", "refuse"]}
    backend = _backend(server, structured_output="text")
    (generation,) = backend.generate(["<<f>>"])
    assert generation.text == "" and generation.finish_reason == "refusal"  # validation fails: the fallback applies
    (choice,) = backend.choose(["<<g>>"], [["yes", "no"]])
    assert not choice.answered and "refused" in choice.extra["unanswered"]
    backend.close()


def test_choose_with_json_schema_and_fallback_to_text(server: FaultServer) -> None:
    backend = _backend(server)
    out = backend.choose(["<<a>> PICK:No", "<<b>> PICK:Yes"], [[" Yes", " No"], [" Yes", " No"]])
    assert [(c.index, c.option) for c in out] == [(1, " No"), (0, " Yes")]
    assert all(c.extra["method"] == "json_schema" for c in out)
    schema = server.requests[0]["body"]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["choice"]["enum"] == ["Yes", "No"]
    server.schema_supported = False  # a server without structured outputs: auto falls back to text
    out = backend.choose(["<<c>> PICK:b"], [["a", "b", "c"]])
    assert out[0].option == "b" and out[0].extra["method"] == "text"
    assert backend.schema_fallbacks == 1
    backend.close()


@pytest.mark.slow
def test_invalid_answer_gets_one_reask_then_comes_back_unanswered(server: FaultServer) -> None:
    server.plan = {"once": ["nonsense"], "twice": ["nonsense", "nonsense"]}
    backend = _backend(server, structured_output="text")
    (choice,) = backend.choose(["<<once>> PICK:b"], [["a", "b"]])
    assert choice.option == "b" and choice.extra["reasked"] is True
    ok, unanswered = backend.choose(["<<ok>>", "<<twice>>"], [["a", "b"], ["a", "b"]])
    assert ok.option == "a"  # the other prompt of the batch is not lost
    assert unanswered.index == -1 and unanswered.option == "" and not unanswered.answered  # never coerced
    assert "banana" in unanswered.extra["unanswered"] and unanswered.usage.calls == 2
    assert server.attempts["twice"] == 2  # exactly one re-ask
    backend.close()


@pytest.mark.slow
def test_sync_facade_works_inside_a_running_event_loop(server: FaultServer) -> None:
    backend = _backend(server)
    assert backend.generate(["<<s0>>"])[0].text == "reply <<s0>>"

    async def caller() -> list[str]:  # e.g. a notebook cell: a loop is already running in this thread
        return [g.text for g in backend.generate(["<<s1>>", "<<s2>>"])]

    assert asyncio.run(caller()) == ["reply <<s1>>", "reply <<s2>>"]
    backend.close()


def test_no_key_without_base_url_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(LLMError, match="NO_SUCH_KEY_VAR"):
        OpenAIBackend(LLMConfig(backend="openai", model="m", api_key_env="NO_SUCH_KEY_VAR"))


def test_keys_from_env_never_leak(server: FaultServer, monkeypatch: pytest.MonkeyPatch, caplog, tmp_path) -> None:  # type: ignore[no-untyped-def]
    env_keys = "sk-env-secret-aaaaaaaaaaaa1,sk-env-secret-bbbbbbbbbbbb2"
    monkeypatch.setenv("RG_TEST_KEYS", env_keys)
    cfg = load_config(
        None,
        [
            "llm.backend=openai",
            "llm.model=test-model",
            f"llm.base_url={server.base_url}",
            "llm.api_key_env=RG_TEST_KEYS",
            "llm.api_keys=[sk-config-secret-cccccccccccc3]",
            f"llm.record_path={tmp_path / 'rec.jsonl'}",
            "llm.timeout_s=0.5",
            "llm.backoff_base_s=0.01",
        ],
    )
    caplog.set_level(logging.DEBUG)
    server.plan = {"x": ["500"], "y": ["500"] * 10}
    llm = build_llm(cfg.llm)
    llm.generate(["<<x>>"])
    with pytest.raises(LLMError) as info:
        llm.generate(["<<y>>"])
    secrets = ["sk-env-secret-aaaaaaaaaaaa1", "sk-env-secret-bbbbbbbbbbbb2", "sk-config-secret-cccccccccccc3"]
    assert server.auth_headers[0].endswith(secrets[2])  # config keys win over the environment
    visible = [
        repr(llm),
        repr(llm.inner),
        repr(llm.inner.inner),
        str(cfg.llm),
        repr(cfg.llm),
        str(info.value),
        caplog.text,
        (tmp_path / "rec.jsonl").read_text(),
        str(cfg.redacted()),
    ]
    for text in visible:
        for secret in secrets:
            assert secret not in text
    llm.close()


def test_a_prompt_repeated_in_one_batch_is_sent_once(server: FaultServer) -> None:
    backend = _backend(server)
    prompts = ["say <<a>>", "say <<b>>", "say <<a>>", "say <<a>>"]
    out = backend.generate(prompts, seed=3)
    picks = backend.choose(["pick <<c>>", "pick <<c>>", "pick <<c>>"], [["x", "y"], ["x", "y"], ["y", "x"]], seed=3)
    backend.close()
    assert [g.text for g in out] == ["reply <<a>>", "reply <<b>>", "reply <<a>>", "reply <<a>>"]
    assert [p.option for p in picks] == ["x", "x", "y"]
    assert server.attempts["a"] == 1 and server.attempts["b"] == 1
    assert server.attempts["c"] == 2  # the same prompt with other options is another request
    assert sum(g.usage.calls for g in out) == 2 and sum(p.usage.calls for p in picks) == 2
