"""The env faces built from a configuration: what ``gymnasium.make`` and ``make_vec`` call for the registered ids
(:mod:`recagent_gym.runs.env_registration`), and what code that builds an env directly calls.

``config`` is a :class:`~recagent_gym.runs.config.Config`, a named configuration (``"quickstart"``), a YAML path,
a mapping of sections, or nothing (the defaults), by keyword or in the env class's position; every other argument
goes to the env class unchanged::

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


def _settled(args: tuple[Any, ...], kwargs: dict[str, Any], position: int) -> tuple[list[Any], dict[str, Any]]:
    """The env class's arguments with ``config`` (keyword, or positional at ``position`` as the classes take it)
    resolved into settings."""
    resolved = list(args)
    if len(resolved) > position:
        resolved[position] = resolve_config(resolved[position])
    else:
        kwargs = {**kwargs, "config": resolve_config(kwargs.get("config"))}
    return resolved, kwargs


CONFIG_POSITION = 5
"""Where the env classes take ``config`` positionally: after dataset, user_model, page_size, max_pages, social (the
vector envs take ``num_envs`` first)."""


def catalogue_env(*args: Any, **kwargs: Any) -> RecAgentEnv:
    """:class:`RecAgentEnv` (``recagent_gym/RecAgentCatalogue-v0``): pages from the whole catalogue."""
    args_, kwargs_ = _settled(args, kwargs, CONFIG_POSITION)
    return RecAgentEnv(*args_, **kwargs_)


def candidates_env(*args: Any, **kwargs: Any) -> RecAgentCandidateEnv:
    """:class:`RecAgentCandidateEnv` (``recagent_gym/RecAgentCandidates-v0``): pages among K retrieved candidates."""
    args_, kwargs_ = _settled(args, kwargs, CONFIG_POSITION)
    return RecAgentCandidateEnv(*args_, **kwargs_)


def catalogue_vector_env(*args: Any, **kwargs: Any) -> RecAgentVectorEnv:
    """:class:`RecAgentVectorEnv`: ``num_envs`` catalogue sessions answered in one batch per step."""
    args_, kwargs_ = _settled(args, kwargs, CONFIG_POSITION + 1)
    return RecAgentVectorEnv(*args_, **kwargs_)


def candidates_vector_env(*args: Any, **kwargs: Any) -> RecAgentCandidateVectorEnv:
    """:class:`RecAgentCandidateVectorEnv`: ``num_envs`` candidate-slate sessions answered in one batch per step."""
    args_, kwargs_ = _settled(args, kwargs, CONFIG_POSITION + 1)
    return RecAgentCandidateVectorEnv(*args_, **kwargs_)


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
    _factory.metadata = _face.metadata  # type: ignore[union-attr]  # Gymnasium reads the creator's render modes
