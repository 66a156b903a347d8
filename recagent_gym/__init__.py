"""recagent-gym: a Gymnasium environment where the recommender is the RL policy and the users are LLM agents."""

__version__ = "0.1.0"

import recagent_gym.runs.env_registration  # noqa: F401  (registers recagent_gym/RecAgentCatalogue-v0, ...)
