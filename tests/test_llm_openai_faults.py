"""The OpenAI-compatible backend under faults, against a real HTTP server on 127.0.0.1: a trickling body, malformed
200 replies, lone surrogates, a server that is not there, off-list answers in a whole simulation."""

from __future__ import annotations

import logging
import socket
import time
from functools import partial
from pathlib import Path

import pytest

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.openai_backend import OpenAIBackend
from recagent_gym.llm.protocol import LLMError
from recagent_gym.llm.text import clean_text
from recagent_gym.prompts.checked import choose_checked, generate_checked
from recagent_gym.runs.cli import build_parser, dispatch
from recagent_gym.runs.commands import simulate as commands
from recagent_gym.runs.config import load_config
from recagent_gym.runs.simulator import runner
from tests._llm_server import HTTP_CLIENT, MALFORMED, FaultServer, http_client  # noqa: F401  (autouse: every test runs with both clients)
from tests._sim_fixtures import make_embedder, settings

KEY = "sk-faults-test-key-0123456789abcdef"


def _backend(server: FaultServer | str, **overrides: object) -> OpenAIBackend:
    values: dict[str, object] = {
        "http_client": HTTP_CLIENT[0],
        "backend": "openai",
        "base_url": server if isinstance(server, str) else server.base_url,
        "model": "test-model",
        "api_keys": [KEY],
        "timeout_s": 2.0,
        "backoff_base_s": 0.01,
        "max_retries": 1,
        "structured_output": "text",
    }
    values.update(overrides)
    return OpenAIBackend(LLMConfig(**values))


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    with FaultServer(trickle_s=12.0) as srv:
        yield srv


def _openai_settings(server: FaultServer, *extra: str) -> list[str]:
    llm = [
        "llm.backend=openai",
        f"llm.base_url={server.base_url}",
        "llm.model=test-model",
        "llm.structured_output=text",
        "llm.timeout_s=5",
        "llm.max_retries=1",
        "llm.backoff_base_s=0.01",
    ]
    return [s for s in settings(*extra) if not s.startswith("llm.backend=")] + llm


@pytest.mark.slow
def test_timeout_bounds_the_whole_request_not_each_read(server: FaultServer) -> None:
    server.plan = {"t": ["trickle"] * 5}  # every read makes progress: a per-read timeout never fires
    backend = _backend(server, timeout_s=2.0, max_retries=0)
    started = time.perf_counter()
    with pytest.raises(LLMError, match="timed out") as info:
        backend.generate(["<<t>>"])
    elapsed = time.perf_counter() - started
    backend.close()
    assert elapsed < 6.0, f"waited {elapsed:.1f} s for a 12 s trickle with timeout_s=2"
    assert server.base_url in str(info.value)


@pytest.mark.parametrize("fault", sorted(MALFORMED))
@pytest.mark.slow
def test_malformed_replies_are_retried_then_raised_as_llm_errors(server: FaultServer, fault: str) -> None:
    server.plan = {"once": [fault], "always": [fault] * 5}
    backend = _backend(server)
    (recovered,) = backend.generate(["<<once>>"])
    assert recovered.text == "reply <<once>>" and backend.retries == 1
    (choice,) = backend.choose(["<<once>> PICK:b"], [["a", "b"]])  # the retry's answer; the fault was used up
    assert choice.option == "b"
    for call in (lambda: backend.generate(["<<always>>"]), lambda: backend.choose(["<<always>>"], [["a", "b"]])):
        with pytest.raises(LLMError, match="malformed reply") as info:
            call()
        assert type(info.value) is LLMError and server.base_url in str(info.value)
    backend.close()


def test_missing_usage_counts_zero_tokens(server: FaultServer) -> None:
    server.plan = {"u": ["no_usage"]}
    backend = _backend(server)
    (generation,) = backend.generate(["<<u>>"])
    backend.close()
    assert generation.text == "reply <<u>>" and generation.usage.prompt_tokens == 0 and backend.retries == 0


def test_lone_surrogates_are_replaced_at_the_boundary(server: FaultServer) -> None:
    server.plan = {"s": ["surrogate"]}
    backend = _backend(server)
    (generation,) = backend.generate(["<<s>>"])
    assert generation.text == "half an emoji: \ufffd, then more"
    generation.text.encode("utf-8")  # storable, loggable
    (quoted,) = backend.generate([f"<<q>> Your friend said: {generation.text}"])  # the next request quoting it
    (raw,) = backend.generate(["<<r>> a prompt with a stray \ud83d half"])  # prompts are cleaned on the way out too
    backend.close()
    assert quoted.text == "reply <<q>>" and raw.text == "reply <<r>>"
    assert clean_text("pair \ud83d\ude00 kept, lone \ude00 replaced") == "pair \U0001f600 kept, lone \ufffd replaced"


def test_connection_errors_name_the_server_never_a_key() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = _backend(f"http://user:{KEY}@127.0.0.1:{port}/v1?key={KEY}", max_retries=1)
    with pytest.raises(LLMError, match="connection failed") as info:
        backend.generate(["hello"])
    backend.close()
    message = str(info.value)
    assert f"http://127.0.0.1:{port}/v1" in message and KEY not in message


def test_off_list_answers_fall_back_through_choose_checked(server: FaultServer, caplog) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.INFO)
    server.plan = {"x": ["nonsense"] * 4, "refused": ["refuse"] * 4}
    backend = _backend(server)
    out = choose_checked(backend, ["<<x>>", "<<ok>> PICK:b"], [["a", "b"], ["a", "b"]], lambda c: c.option, seed=1)
    assert out[0].value is None and out[0].reasked and out[0].raw == "banana"
    assert out[1].value == "b"
    assert server.attempts["x"] == 2  # the backend's one re-ask; choose_checked does not ask a third time
    (free,) = generate_checked(backend, ["<<refused>>"], lambda text, prompt: text or None, seed=1, max_tokens=8)
    assert free.value is None and free.reasked  # a refusal is an unusable answer: re-asked once, then the fallback
    backend.close()
    assert "fallback applies" in caplog.text


@pytest.mark.slow
def test_a_simulation_with_off_list_answers_falls_back_and_counts(server: FaultServer, tmp_path: Path) -> None:
    server.always = "nonsense"  # every choice off the list, every free text "banana"
    config = load_config(None, _openai_settings(server, "simulation.rounds=1", "simulation.agents=4"))
    sim = runner.start(config, tmp_path / "run", embedder=make_embedder())
    try:
        sim.run()
    finally:
        sim.close()
    assert sim.model.fallbacks > 0
    assert sim.summary()["rounds"] == 1


@pytest.mark.slow
def test_simulate_reports_persistent_malformed_replies_with_the_resume_hint(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.always = "int_content"
    sets = [a for s in _openai_settings(server, "simulation.rounds=1", "simulation.agents=4") for a in ("--set", s)]
    args = build_parser().parse_args(["simulate", *sets, "--out", str(tmp_path / "run")])
    args.func = partial(commands.run_simulate, embedder=make_embedder())
    assert dispatch(args) == 2
    err = capsys.readouterr().err
    assert "malformed reply" in err and "checkpoints" in err and f"--resume {tmp_path / 'run'}" in err
    assert "Traceback" not in err and server.base_url in err


def test_secrets_in_urls_never_reach_the_logs(server: FaultServer, caplog) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.DEBUG)
    secret = "sk-in-the-query-string-0123456789"
    server.plan = {"r": ["500"]}
    backend = _backend(f"{server.base_url}?api_key={secret}")
    (generation,) = backend.generate(["<<r>> hello"])  # one retry: the backend logs it, the HTTP client logs both
    backend.close()
    assert generation.text == "reply <<r>>"
    assert "retry 1/1" in caplog.text and "127.0.0.1" in caplog.text
    assert secret not in caplog.text and KEY not in caplog.text


def test_the_local_server_answers_from_the_options_not_from_listed_items(server: FaultServer) -> None:
    backend = _backend(server)
    prompt = "<<page>> The page shows:\n- Dangerous Minds (1995)\n- Heat (1995)\nDo you watch one?"
    (choice,) = backend.choose([prompt], [["watch", "next page"]])
    backend.close()
    assert choice.answered and choice.option == "watch" and server.attempts["page"] == 1
