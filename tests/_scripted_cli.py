"""The command line with the scripted test model in place of the configured backend.

``llm.backend`` offers only real backends; a command-line test that needs a deterministic model patches the
factory with :func:`use_scripted_backend` (in process) or runs ``python -m tests._scripted_cli ARGS`` (subprocess).
"""

from __future__ import annotations

import sys

import pytest

from recagent_gym.llm import factory
from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.testing import ScriptedLLM


def scripted_backend(cfg: LLMConfig) -> ScriptedLLM:
    """What ``llm.backend: scripted`` used to build: answers "ok", named after the configured model."""
    return ScriptedLLM(default="ok", model=cfg.model_name)


def use_scripted_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factory, "build_backend", scripted_backend)


if __name__ == "__main__":
    from recagent_gym.runs.cli import main

    factory.build_backend = scripted_backend  # type: ignore[assignment]
    sys.exit(main())
