"""Build a user model by name, so the LLM agent and the classical baselines are one flag apart.

The builders take the configuration sections they read, not the root ``Config``: the faces (envs, simulator, CLI
commands) assemble them, e.g. ``build_user_model(kind, dataset, **config.user_model_sections())``.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from recagent_gym.data.config import DataConfig
from recagent_gym.data.schema import Dataset
from recagent_gym.llm.config import LLMConfig
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.settings_section import ConfigError
from recagent_gym.social.config import SocialConfig
from recagent_gym.users.config import UserConfig
from recagent_gym.users.protocol import UserModel

UserModelKind = Literal["llm", "recsim", "embedding", "distilled"]
USER_MODEL_KINDS: tuple[str, ...] = ("llm", "recsim", "embedding", "distilled")


def build_user_model(
    kind: str,
    dataset: Dataset,
    user: UserConfig,
    *,
    llm: Any = None,
    embedder: Any = None,
    llm_config: LLMConfig | None = None,
    data: DataConfig | None = None,
    social: SocialConfig | None = None,
    memory: MemoryConfig | None = None,
) -> UserModel:
    """A fresh user model of ``kind`` over ``dataset``, configured by ``user``.

    The LLM agent also reads ``llm_config`` (backend, seed), ``data`` (profiles, social links), ``social`` and
    ``memory`` (each defaults to its section's defaults); ``llm`` (a
    :class:`~recagent_gym.llm.protocol.LanguageModel`) and ``embedder`` are built from them when none is given.
    The classical users ignore all of these.
    """
    # Each kind's module is imported when built: the LLM stack (and torch) is never loaded for the classical users.
    if kind == "recsim":
        from recagent_gym.users.recsim import RecSimUser

        return RecSimUser(dataset, user)
    if kind == "embedding":
        from recagent_gym.users.embedding_user import EmbeddingUser

        return EmbeddingUser(dataset, user, embedder=embedder)
    if kind == "distilled":
        from recagent_gym.users.distilled.user import DistilledUser

        return DistilledUser(
            dataset, user.distilled_path, rating_timing=user.feeling_timing, full_sessions=user.full_sessions
        )
    if kind == "llm":
        llm_config = llm_config or LLMConfig()
        data = data or DataConfig()
        if llm is None:
            from recagent_gym.llm.factory import build_llm

            llm = build_llm(llm_config)
        if embedder is None:
            from recagent_gym.llm.embedder import SentenceEmbedder

            embedder = SentenceEmbedder(precision=llm_config.embedder_precision)
        return build_llm_agents(
            dataset, user, llm, embedder, seed=data.seed, llm_config=llm_config, data=data, social=social, memory=memory
        )
    raise ConfigError(f"unknown user model {kind!r}; expected one of {', '.join(USER_MODEL_KINDS)}")


def build_llm_agents(
    dataset: Dataset,
    user: UserConfig,
    llm: Any,
    embedder: Any,
    *,
    seed: int,
    llm_config: LLMConfig | None = None,
    data: DataConfig | None = None,
    social: SocialConfig | None = None,
    memory: MemoryConfig | None = None,
) -> UserModel:
    """The LLM agent population: profiles by ``data.profile_source``, the social graph (the dataset's links, a CSV,
    or generated from ``seed``), and :class:`~recagent_gym.users.agent.LLMUserModel` over them."""
    # Imported when built: the agent pulls in the LLM stack, which the classical users never need.
    from recagent_gym.social.graph import graph_from_config
    from recagent_gym.users.agent import LLMUserModel
    from recagent_gym.users.profile_source import profiles_from_config

    llm_config, data, social = llm_config or LLMConfig(), data or DataConfig(), social or SocialConfig()
    graph = graph_from_config(dataset, data, social, np.random.default_rng(seed))

    def generate(batch: list[str]) -> list[str]:
        return [g.text for g in llm.generate(batch, max_tokens=60, stop=["\n\n"], seed=llm_config.seed)]

    profiles = profiles_from_config(data, dataset, generate)
    return LLMUserModel(
        dataset,
        user,
        llm,
        embedder,
        graph=graph,
        profiles=profiles,
        social=social,
        memory=memory,
        llm_backend=llm_config.backend,
    )
