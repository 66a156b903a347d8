"""Shared pieces of the distilled-user tests: tiny scripted-LLM logs and a model distilled from them (cached)."""

from __future__ import annotations

from pathlib import Path

from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.users.distilled.collect import collect
from recagent_gym.users.distilled.fit import FitSettings, distill
from tests._agent_fixtures import make_config, make_model, tiny_dataset


def tiny_logs(folder: Path, sessions: int = 36) -> Path:
    collect(make_model(), tiny_dataset(), folder, sessions=sessions, batch=6, max_pages=5, progress=False)
    return folder


def tiny_distilled(folder: Path, logs_folder: Path, epochs: int = 40) -> tuple[Path, str]:
    config = make_config()
    summary = distill(
        logs_folder, tiny_dataset(), config, folder, settings=FitSettings(epochs=epochs), embedder=HashingEmbedder(32)
    )
    return folder, summary
