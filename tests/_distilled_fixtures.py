"""Shared pieces of the distilled-user tests: tiny scripted-LLM logs and a model distilled from them (cached)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.runs.distill.collect import collect
from recagent_gym.runs.distill.fit import distill
from recagent_gym.runs.distill.objective import FitSettings
from recagent_gym.runs.make_env import candidates_env
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


def fit_tiny(out: Path, logs_folder: Path, epochs: int, **settings: Any) -> Any:
    """``users distill`` on the tiny logs with ``settings`` (FitSettings fields); the artefact it wrote."""
    from recagent_gym.users.distilled.saved_model import Artefact

    distill(logs_folder, tiny_dataset(), make_config(), out, settings=FitSettings(epochs=epochs, **settings),
            embedder=HashingEmbedder(32))  # fmt: skip
    return Artefact.load(out)


def tiny_policy(folder: Path, config: Any) -> Path:
    """An item-scoring PPO trained a few steps on RecAgent-v1 over the tiny dataset (RecSim-style users)."""
    import json

    from stable_baselines3 import PPO

    from recagent_gym.policies.item_scoring import ItemScoringPolicy

    env = candidates_env(tiny_dataset(), "recsim", config=config, n_candidates=10)
    model = PPO(ItemScoringPolicy, env, n_steps=16, batch_size=16, seed=0, device="cpu",
                policy_kwargs={"page_size": env.page_size})  # fmt: skip
    model.learn(32)
    model.save(folder / "policy.zip")
    meta = {"env": "RecAgent-v1", "user_model": "recsim", "candidate_mix": None}
    (folder / "policy.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder / "policy.zip"
