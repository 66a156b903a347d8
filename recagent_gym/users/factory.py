"""Build a user model by name, so the LLM agent and the classical baselines are one flag apart."""

from __future__ import annotations

from typing import Any, Literal

from recagent_gym.config import Config, ConfigError
from recagent_gym.data.schema import Dataset
from recagent_gym.users.protocol import UserModel

UserModelKind = Literal["llm", "recsim", "embedding", "distilled"]
USER_MODEL_KINDS: tuple[str, ...] = ("llm", "recsim", "embedding", "distilled")


def build_user_model(
    kind: str,
    dataset: Dataset,
    config: Config,
    *,
    llm: Any = None,
    embedder: Any = None,
) -> UserModel:
    """A fresh user model of ``kind`` over ``dataset``.

    ``llm`` (a :class:`~recagent_gym.llm.protocol.LanguageModel`) and ``embedder`` are built from ``config`` when
    the LLM agent needs them and none is given; the classical users ignore ``llm``.
    """
    if kind == "recsim":
        from recagent_gym.users.recsim import RecSimUser

        return RecSimUser(dataset, config.user)
    if kind == "embedding":
        from recagent_gym.users.embedding_user import EmbeddingUser

        return EmbeddingUser(dataset, config.user, embedder=embedder)
    if kind == "distilled":
        from recagent_gym.users.distilled.user import DistilledUser

        return DistilledUser(dataset, config.user.distilled_path, rating_timing=config.user.feeling_timing)
    if kind == "llm":
        if llm is None:
            from recagent_gym.llm.factory import build_llm

            llm = build_llm(config.llm)
        if embedder is None:
            from recagent_gym.llm.embedder import SentenceEmbedder

            embedder = SentenceEmbedder()
        return build_llm_agents(dataset, config, llm, embedder, seed=config.data.seed)
    raise ConfigError(f"unknown user model {kind!r}; expected one of {', '.join(USER_MODEL_KINDS)}")


def build_llm_agents(dataset: Dataset, config: Config, llm: Any, embedder: Any, *, seed: int) -> UserModel:
    """The LLM agent population: profiles by ``data.profile_source``, the social graph (the dataset's links, a CSV,
    or generated from ``seed``), and :class:`~recagent_gym.users.agent.LLMUserModel` over them."""
    import numpy as np

    # Imported lazily: the agent pulls in the LLM stack, which the classical users never need.
    from recagent_gym.social.graph import graph_from_config
    from recagent_gym.users.agent import LLMUserModel
    from recagent_gym.users.profiles import profiles_from_config

    graph = graph_from_config(dataset, config.data, config.social, np.random.default_rng(seed))

    def generate(batch: list[str]) -> list[str]:
        return [g.text for g in llm.generate(batch, max_tokens=60, stop=["\n\n"], seed=config.llm.seed)]

    profiles = profiles_from_config(config.data, dataset, generate)
    return LLMUserModel(dataset, config, llm, embedder, graph=graph, profiles=profiles)
