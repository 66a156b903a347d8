"""``build_llm``: the configured backend with its wrappers, outermost first: usage meter, recorder, response cache,
budget, backend. The budget sits inside the cache so that cached answers do not spend it; the recorder sits outside
so that it sees cache hits too."""

from __future__ import annotations

from recagent_gym.llm.accounting import UsageMeter
from recagent_gym.llm.budget import BudgetedLLM
from recagent_gym.llm.cache import CachedLLM
from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.protocol import LanguageModel, LLMError
from recagent_gym.llm.recorder import RecordingLLM


def build_backend(cfg: LLMConfig) -> LanguageModel:
    """The bare backend named by ``cfg.backend``."""
    if cfg.backend == "embedded":
        from recagent_gym.llm.embedded import EmbeddedLLM

        return EmbeddedLLM(cfg)
    if cfg.backend == "openai":
        from recagent_gym.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(cfg)
    raise LLMError(f"unknown llm.backend {cfg.backend!r}")  # pragma: no cover - the config validates it


def build_llm(cfg: LLMConfig, *, backend: LanguageModel | None = None) -> UsageMeter:
    """The stack for ``cfg``; pass ``backend`` to wrap an existing model (a test's ScriptedLLM, a shared one)."""
    model: LanguageModel = backend if backend is not None else build_backend(cfg)
    if cfg.max_calls is not None or cfg.max_total_tokens is not None:
        model = BudgetedLLM(model, max_calls=cfg.max_calls, max_total_tokens=cfg.max_total_tokens)
    if cfg.cache_mode != "off":
        if cfg.cache_path is None:
            raise LLMError(f"llm.cache_mode is {cfg.cache_mode!r} but llm.cache_path is not set")
        model = CachedLLM(model, cfg.cache_path, mode=cfg.cache_mode)
    if cfg.record_path is not None:
        model = RecordingLLM(model, cfg.record_path)
    return UsageMeter(model, per_1k_prompt=cfg.cost_per_1k_prompt, per_1k_completion=cfg.cost_per_1k_completion)
