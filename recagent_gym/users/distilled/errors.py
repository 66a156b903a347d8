"""The distilled users' one-line errors."""

from __future__ import annotations

from recagent_gym.errors import RecAgentError


class DistillError(RecAgentError):
    """Bad decision logs, a missing or inconsistent distilled artefact, or a missing optional dependency."""

    label = "distill error"
