"""The paper's evaluations: discrimination (a, b) with a popularity control and a personalization check, and
sequence generation with an LLM judge and objective metrics; their metrics, tables and plots.

Exports are resolved lazily: the root configuration imports ``evaluation.config``, and an eager import of the
runners here (which import the configuration package) would be circular.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "EvaluationConfig": "recagent_gym.evaluation.config",
    "DiscriminationResult": "recagent_gym.evaluation.discrimination",
    "run_discrimination": "recagent_gym.evaluation.discrimination",
    "Estimate": "recagent_gym.evaluation.metrics",
    "summarize": "recagent_gym.evaluation.metrics",
    "write_outputs": "recagent_gym.evaluation.report",
    "SequenceResult": "recagent_gym.evaluation.sequence",
    "run_sequence": "recagent_gym.evaluation.sequence",
    "Resources": "recagent_gym.evaluation.subjects",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'recagent_gym.evaluation' has no attribute {name!r}")
