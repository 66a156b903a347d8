from __future__ import annotations

import pytest

from recagent_gym.runs.cli import main
from tests._llm_server import FaultServer
from tests._scripted_cli import use_scripted_backend


def test_llm_check_on_the_scripted_backend(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    use_scripted_backend(monkeypatch)
    assert main(["llm", "check"]) == 0
    out = capsys.readouterr().out
    assert "scripted" in out and "generate" in out and "choose" in out and "tokens" in out


def test_llm_check_on_an_openai_compatible_server(capsys: pytest.CaptureFixture[str]) -> None:
    with FaultServer() as server:
        code = main(
            [
                "llm",
                "check",
                "--set",
                "llm.backend=openai",
                "--set",
                "llm.model=m",
                "--set",
                f"llm.base_url={server.base_url}",
            ]
        )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "openai:" in out and "'Yes'" in out


def test_llm_check_reports_a_failing_server(capsys: pytest.CaptureFixture[str]) -> None:
    with FaultServer() as server:
        server.schema_supported = False
        server.plan = {"": ["500"] * 20}  # every untagged prompt fails
        code = main(
            [
                "llm",
                "check",
                "--set",
                "llm.backend=openai",
                "--set",
                "llm.model=m",
                "--set",
                f"llm.base_url={server.base_url}",
                "--set",
                "llm.max_retries=1",
                "--set",
                "llm.backoff_base_s=0.01",
            ]
        )
    assert code == 1
    assert "FAILED" in capsys.readouterr().out
