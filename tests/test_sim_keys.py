"""API keys across ``simulate --resume``, ``sim-interview`` and ``sim-intervene``: never from the checkpoint (it holds
them redacted), from ``--set llm.api_keys`` or the environment as for a fresh run, and never silently replaced by
the placeholder key."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from recagent_gym.llm.openai_backend import PLACEHOLDER_KEY
from recagent_gym.runs.cli import build_parser, dispatch
from recagent_gym.runs.commands import simulate as commands
from tests._llm_server import FaultServer
from tests._sim_fixtures import make_embedder, settings

KEY = "sk-resume-secret-0123456789abcdef"
ENV = "RG_TEST_RESUME_KEYS"


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    with FaultServer() as srv:
        yield srv


def _sets(server: FaultServer, *extra: str) -> list[str]:
    llm = [
        "llm.backend=openai",
        f"llm.base_url={server.base_url}",
        "llm.model=test-model",
        "llm.structured_output=text",
        f"llm.api_key_env={ENV}",
    ]
    base = [s for s in settings("simulation.agents=3", "simulation.rounds=1") if not s.startswith("llm.backend=")]
    return [a for s in (*base, *llm, *extra) for a in ("--set", s)]


def _dispatch(args) -> int:  # type: ignore[no-untyped-def]
    handler = {
        "simulate": commands.run_simulate,
        "sim-interview": commands.run_interview,
        "sim-intervene": commands.run_intervene,
    }[args.command]
    args.func = partial(handler, embedder=make_embedder())
    return dispatch(args)  # typed errors become one line and exit 2, as from the command line


@pytest.fixture(scope="module")
def run(server: FaultServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One round started with a key given in ``llm.api_keys`` (not in the environment)."""
    out = tmp_path_factory.mktemp("keys") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(ENV, raising=False)
        argv = ["simulate", *_sets(server, f"llm.api_keys=[{KEY}]"), "--out", str(out)]
        assert _dispatch(build_parser().parse_args(argv)) == 0
    assert server.auth_headers and all(h == f"Bearer {KEY}" for h in server.auth_headers)
    assert KEY not in "".join(p.read_text() for p in out.rglob("*.json"))  # checkpoints hold it redacted
    return out


def _requests_since(server: FaultServer, start: int) -> list[str]:
    return server.auth_headers[start:]


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--resume", "{run}", "--set", "simulation.rounds=2"],
        ["sim-interview", "{run}", "--agent", "#0", "--question", "How are you?"],
        ["sim-intervene", "{run}", "--out", "{branch}", "--post", "#0", "Watch Casino"],
    ],
    ids=["resume", "interview", "intervene"],
)
@pytest.mark.slow
def test_keys_from_set_are_sent_and_none_means_a_clear_error(
    argv: list[str],
    run: Path,
    server: FaultServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    args = [a.format(run=run, branch=tmp_path / "branch") for a in argv]
    start = len(server.auth_headers)
    assert _dispatch(build_parser().parse_args(args)) == 2  # no key anywhere: refused before any request
    err = capsys.readouterr().err
    assert "llm.api_keys" in err and ENV in err and len(err.strip().splitlines()) == 1
    assert _requests_since(server, start) == []
    assert not any(PLACEHOLDER_KEY in h for h in server.auth_headers)

    extra = ["--set", f"llm.api_keys=[{KEY}]"]
    assert _dispatch(build_parser().parse_args([*args, *extra])) == 0
    sent = _requests_since(server, start)
    if argv[0] != "sim-intervene":  # an intervention edits the world without asking the model
        assert sent and all(h == f"Bearer {KEY}" for h in sent)
    assert KEY not in capsys.readouterr().err


@pytest.mark.slow
def test_keys_from_the_environment_are_used_on_resume(
    run: Path, server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "sk-from-the-env-0123456789abc")
    start = len(server.auth_headers)
    argv = ["sim-interview", str(run), "--agent", "#0", "--question", "And now?"]
    assert _dispatch(build_parser().parse_args(argv)) == 0
    sent = _requests_since(server, start)
    assert sent and all(h == "Bearer sk-from-the-env-0123456789abc" for h in sent)


def test_a_failing_model_during_an_interview_is_one_clear_line(
    run: Path, server: FaultServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV, KEY)
    monkeypatch.setattr(server, "always", "int_content")  # every reply malformed: retried, then LLMError
    argv = ["sim-interview", str(run), "--agent", "#0", "--question", "Still there?", "--set", "llm.max_retries=0"]
    assert _dispatch(build_parser().parse_args(argv)) == 2
    err = capsys.readouterr().err
    assert "language model error" in err and "malformed reply" in err and err.count("\n") == 1
    assert "Traceback" not in err and KEY not in err
