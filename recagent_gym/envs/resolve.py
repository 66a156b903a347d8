"""Turn the env faces' flexible arguments (dataset, user model) into objects with their settings, and build
their kernel."""

from __future__ import annotations

from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.envs.settings import WorldSettings
from recagent_gym.recommenders.search import CatalogueSearch
from recagent_gym.session import SessionKernel, SessionRules, SessionTables
from recagent_gym.session.activation import Settings, session_weights
from recagent_gym.users.protocol import UserModel


def resolve_dataset(dataset: Dataset | str | None, config: WorldSettings) -> Dataset:
    """A :class:`Dataset` as is, or one loaded by the data package from a spec (``bundled`` or a folder)."""
    if isinstance(dataset, Dataset):
        return dataset
    from recagent_gym.data.load import load_dataset_from_config  # lazily: loaders are heavier than the env

    data_config = config.data if dataset is None else config.data.model_copy(update={"dataset": str(dataset)})
    return load_dataset_from_config(data_config)


def build_kernel(
    dataset: Dataset,
    config: WorldSettings,
    page_size: int | None = None,
    max_pages: int | None = None,
    social: bool | None = None,
    tables: SessionTables | None = None,
    search: CatalogueSearch | None = None,
    history_length: int | None = None,
    end_batch: int | None = None,
) -> SessionKernel:
    """The session kernel of an env face (or of another loop of sessions): rules from ``config.env`` (arguments
    win), shared tables and search."""
    if dataset.n_items == 0 or dataset.n_users == 0:
        raise ValueError(f"dataset {dataset.name!r} needs at least one item and one user")
    env = config.env
    rules = SessionRules(
        page_size=int(page_size if page_size is not None else env.page_size),
        max_pages=int(max_pages if max_pages is not None else env.max_pages),
        history_length=int(history_length if history_length is not None else env.history_length),
        duplicate_rule=env.duplicate_rule,
        session_hours=env.session_hours,
        social=bool(env.social and config.social.enabled if social is None else social),
        end_batch=int(end_batch if end_batch is not None else config.user.session_end_batch),
    )
    return SessionKernel(
        tables if tables is not None else SessionTables.build(dataset),
        search if search is not None else CatalogueSearch(dataset),
        rules,
    )


def build_users(
    kind: str | UserModel | None, dataset: Dataset, config: WorldSettings, llm: Any, embedder: Any
) -> UserModel:
    """A user model as given, or built by name (default ``config.user.model``)."""
    if kind is not None and not isinstance(kind, str):
        return kind
    from recagent_gym.users.factory import build_user_model

    return build_user_model(
        kind if kind is not None else config.user.model,
        dataset,
        **config.user_model_sections(),
        llm=llm,
        embedder=embedder,
    )


def world_weights(config: WorldSettings, dataset: Dataset, rng: np.random.Generator) -> np.ndarray:
    """Each user's probability of starting the next session (``env.activation``; the Pareto shape settings are
    ``simulation``'s), drawn from ``rng``."""
    sim = config.simulation
    settings = Settings(
        activation=config.env.activation,
        active_prob=1.0 / dataset.n_users,
        active_threshold=sim.active_threshold,
        pareto_alpha=sim.pareto_alpha,
        pareto_x_min=sim.pareto_x_min,
        fit_activity=sim.fit_activity,
    )
    counts = np.bincount(dataset.interactions["user_id"].to_numpy(), minlength=dataset.n_users)
    return session_weights(settings, counts, rng)
