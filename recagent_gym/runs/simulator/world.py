"""Build the simulated world from a configuration: dataset, profiles, social graph, LLM, agents, recommender.

The agents are the dataset's first ``simulation.agents`` users: the dataset is loaded with
``data.max_users = simulation.agents``, so the social graph, the recommender's training data and the activity fit
all cover exactly the simulated population.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.llm.accounting import UsageMeter
from recagent_gym.runs.config import Config, ConfigError


@dataclass
class World:
    config: Config
    dataset: Dataset
    llm: UsageMeter
    """The configured stack (usage meter, recorder, response cache, budget) around the backend."""
    embedder: Any
    graph: Any
    user_model: Any
    recommender: Any
    own_embedder: Any = None
    """The embedder this world made (closed with the simulation; None when the caller passed one in)."""


def population_config(config: Config) -> Config:
    """``config`` with ``data.max_users`` set to the number of agents (see the module docstring)."""
    agents = config.simulation.agents
    data = config.data
    if data.max_users is not None and data.max_users < agents:
        raise ConfigError(f"simulation.agents={agents} exceeds data.max_users={data.max_users}")
    return config.model_copy(update={"data": data.model_copy(update={"max_users": agents})})


def load_population(config: Config) -> Dataset:
    from recagent_gym.data.load import load_dataset_from_config

    dataset = load_dataset_from_config(config.data)
    if dataset.n_users < config.simulation.agents:
        raise ConfigError(
            f"simulation.agents={config.simulation.agents} but dataset {config.data.dataset!r} has only "
            f"{dataset.n_users} users (after data.min_user_interactions={config.data.min_user_interactions})"
        )
    return dataset


def build_llm_and_embedder(config: Config, llm: Any = None, embedder: Any = None) -> tuple[UsageMeter, Any]:
    """The configured LLM stack (around ``llm`` when given: tests pass a scripted backend) and sentence embedder,
    shared by every agent behind one cache (:class:`~recagent_gym.llm.shared_embedder.CachedEmbedder`: a text is
    embedded once, the agents' concurrent calls are batched together, and urgent callers' texts go first)."""
    from recagent_gym.llm.factory import build_llm
    from recagent_gym.llm.shared_embedder import shared_embedder

    meter = build_llm(config.llm, backend=llm)
    if embedder is None:
        embedder = minilm(config.llm.embedder_precision, process=config.llm.embedder_process)
    return meter, shared_embedder(embedder)


def minilm(precision: str, *, process: bool) -> Any:
    """all-MiniLM-L6-v2 in ``precision``, in a process of its own when ``process`` (``llm.embedder_process``)."""
    if process:
        from recagent_gym.llm.embedder_process import ProcessEmbedder

        return ProcessEmbedder(precision=precision)
    from recagent_gym.llm.embedder import SentenceEmbedder

    return SentenceEmbedder(precision=precision)  # type: ignore[arg-type]


def build_recommender_for(config: Config, dataset: Dataset, seed: int) -> Any:
    from recagent_gym.recommenders.factory import build_recommender

    return build_recommender(
        config.recommender.model, dataset, config.recommender, config.simulation.page_size, seed=seed
    )


def build_world(config: Config, *, llm: Any = None, embedder: Any = None, dataset: Dataset | None = None) -> World:
    """Every component of a fresh run (states at their initial values, drawn from ``simulation.seed``)."""
    from recagent_gym.users.factory import build_llm_agents

    if config.user.model != "llm":
        raise ConfigError(f"simulate needs the LLM agent (user.model=llm), got user.model={config.user.model!r}")
    config = population_config(config)
    dataset = dataset if dataset is not None else load_population(config)
    given = embedder
    meter, embedder = build_llm_and_embedder(config, llm, embedder)
    seeds = np.random.SeedSequence(config.simulation.seed).generate_state(2)
    sections = config.user_model_sections()
    user = sections.pop("user")
    model = build_llm_agents(dataset, user, meter, embedder, seed=int(seeds[0]), **sections)
    recommender = build_recommender_for(config, dataset, int(seeds[1]))
    own = embedder if given is None else None
    return World(config, dataset, meter, embedder, model.graph, model, recommender, own_embedder=own)
