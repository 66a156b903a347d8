"""The language-model layer: one protocol (:mod:`~recagent_gym.llm.protocol`), an embedded llama.cpp backend, an
OpenAI-compatible backend, stackable wrappers (cache, recorder, budget, usage meter) and :func:`build_llm`."""

from recagent_gym.llm.protocol import BudgetExceeded, CacheMiss, Choice, Generation, LanguageModel, LLMError, Usage

__all__ = ["BudgetExceeded", "CacheMiss", "Choice", "Generation", "LLMError", "LanguageModel", "Usage"]
