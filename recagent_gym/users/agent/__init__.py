"""The LLM user agent of RecAgent: profile, memory, page decisions, feelings, chat and post."""

from recagent_gym.users.agent.agents import resolve_strategy
from recagent_gym.users.agent.model import LLMUserModel
from recagent_gym.users.agent.profile_view import relevant_profile

__all__ = ["LLMUserModel", "relevant_profile", "resolve_strategy"]
