"""The env faces built from a configuration: what ``gymnasium.make`` and ``make_vec`` call for the registered ids
(:mod:`recagent_gym.runs.env_registration`), and what code that builds an env directly calls.

``config`` is a :class:`~recagent_gym.runs.config.Config`, a named configuration (``"quickstart"``), a YAML path,
a mapping of sections, or nothing (the defaults); every other argument goes to the env class unchanged::

    env = catalogue_env(dataset="bundled", user_model="recsim", config="quickstart")
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.envs.candidate_slate_env import RecAgentCandidateEnv
from recagent_gym.envs.candidate_slate_vector import RecAgentCandidateVectorEnv
from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.envs.vector import RecAgentVectorEnv
from recagent_gym.runs.config import Config, config_from_dict, load_config

ConfigArgument = Config | str | Path | Mapping[str, Any] | None


def resolve_config(config: ConfigArgument) -> Config:
    """``None`` -> defaults; a path or configs/ name -> loaded YAML; a mapping -> validated; a Config as is."""
    if config is None:
        return Config()
    if isinstance(config, Config):
        return config
    if isinstance(config, str | Path):
        return load_config(config)
    if isinstance(config, Mapping):
        return config_from_dict(config, source="config=")
    raise TypeError(f"config must be a Config, a YAML path or a mapping, got {type(config).__name__}")


def catalogue_env(
    dataset: Any = None,
    user_model: Any = None,
    page_size: int | None = None,
    max_pages: int | None = None,
    social: bool | None = None,
    config: ConfigArgument = None,
    **kwargs: Any,
) -> RecAgentEnv:
    """:class:`RecAgentEnv` (``recagent_gym/RecAgentCatalogue-v0``): pages from the whole catalogue."""
    return RecAgentEnv(dataset, user_model, page_size, max_pages, social, resolve_config(config), **kwargs)


def candidates_env(
    dataset: Any = None,
    user_model: Any = None,
    page_size: int | None = None,
    max_pages: int | None = None,
    social: bool | None = None,
    config: ConfigArgument = None,
    **kwargs: Any,
) -> RecAgentCandidateEnv:
    """:class:`RecAgentCandidateEnv` (``recagent_gym/RecAgentCandidates-v0``): pages among K retrieved candidates."""
    return RecAgentCandidateEnv(dataset, user_model, page_size, max_pages, social, resolve_config(config), **kwargs)


def catalogue_vector_env(
    num_envs: int,
    dataset: Any = None,
    user_model: Any = None,
    page_size: int | None = None,
    max_pages: int | None = None,
    social: bool | None = None,
    config: ConfigArgument = None,
    **kwargs: Any,
) -> RecAgentVectorEnv:
    """:class:`RecAgentVectorEnv`: ``num_envs`` catalogue sessions answered in one batch per step."""
    settings = resolve_config(config)
    return RecAgentVectorEnv(num_envs, dataset, user_model, page_size, max_pages, social, settings, **kwargs)


def candidates_vector_env(
    num_envs: int,
    dataset: Any = None,
    user_model: Any = None,
    page_size: int | None = None,
    max_pages: int | None = None,
    social: bool | None = None,
    config: ConfigArgument = None,
    **kwargs: Any,
) -> RecAgentCandidateVectorEnv:
    """:class:`RecAgentCandidateVectorEnv`: ``num_envs`` candidate-slate sessions answered in one batch per step."""
    settings = resolve_config(config)
    return RecAgentCandidateVectorEnv(num_envs, dataset, user_model, page_size, max_pages, social, settings, **kwargs)


def make_candidate_env(
    config: Config, dataset: Dataset, users: np.ndarray, user_model: Any = None, **kwargs: Any
) -> RecAgentCandidateEnv:
    """A RecAgent-v1 env over ``users`` with ``user_model`` (a name or an instance; default ``config.user.model``);
    pass ``retriever=`` an existing env's to skip its MF factorisation."""
    kwargs.setdefault("candidate_mix", config.train.candidate_mix)
    users_of = config.user.model if user_model is None else user_model
    return candidates_env(
        dataset, users_of, config=config, n_candidates=config.train.n_candidates, users=users, **kwargs
    )


class SharedCandidates:
    """The retriever and the item features every env of one transfer uses: those of the env of the users the
    policy trains on (``trained_on``, default the distilled users), built once."""

    def __init__(self, config: Config, dataset: Dataset, users: np.ndarray, trained_on: str = "distilled") -> None:
        self.trained_on = trained_on
        self.env = make_candidate_env(config, dataset, users, trained_on)
        self.retriever = self.env.retriever
        self.item_features = (self.env.item_features, self.env.latent_source)

    def make_env(self, config: Config, dataset: Dataset, users: np.ndarray, user_model: Any) -> Any:
        """The env of ``user_model`` (a name, or a user-model instance) with the shared retriever and items."""
        if user_model == self.trained_on:
            return self.env
        return make_candidate_env(
            config, dataset, users, user_model, retriever=self.retriever, item_features=self.item_features
        )


for _factory, _face in (
    (catalogue_env, RecAgentEnv),
    (candidates_env, RecAgentCandidateEnv),
    (catalogue_vector_env, RecAgentVectorEnv),
    (candidates_vector_env, RecAgentCandidateVectorEnv),
):
    _factory.metadata = _face.metadata  # type: ignore[attr-defined]  (Gymnasium reads the creator's render modes)
