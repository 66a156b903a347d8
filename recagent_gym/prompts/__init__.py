"""Prompt templates (``templates/*.txt``) and, beside them, each prompt's contract: build, parse, validate, fallback."""

from recagent_gym.prompts.template import PromptError, PromptTemplate, load_template

__all__ = ["PromptError", "PromptTemplate", "load_template"]
