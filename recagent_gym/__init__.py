"""recagent-gym: a Gymnasium environment where the recommender is the RL policy and the users are LLM agents."""

__version__ = "0.1.0"

import recagent_gym.envs  # noqa: F401  (registers the environments: recagent_gym/RecAgentCatalogue-v0, ...)
