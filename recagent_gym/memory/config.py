"""Configuration of the agents' memory (the paper's sensory, short-term and long-term memory)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recagent_gym.config.base import Section


class MemoryConfig(Section):
    implementation: Literal["recagent", "long_term_only", "short_term_only", "none"] = "recagent"
    """Memory implementation; the non-default ones are ablations."""

    sensory: bool = True
    """Compress each observation into one sentence with an importance score (LLM); off stores raw text."""

    short_term_capacity: int = Field(10, ge=1)
    """Records held in short-term memory before the oldest are moved on."""

    enhance_threshold: float = Field(0.75, ge=0.0, le=1.0)
    """Cosine similarity above which a new record enhances an existing short-term record."""

    enhance_count: int = Field(3, ge=1)
    """Enhancements (the paper's K) after which a short-term record and its insight move to long-term memory."""

    retrieve_top_n: int = Field(5, ge=1)
    """Long-term records returned per retrieval (plus all short-term records)."""

    recency_decay: float = Field(0.99, gt=0.0, le=1.0)
    """Per-hour decay of the recency score of a record."""

    forget_beta: float = Field(2.0, gt=1.0)
    """The paper's beta in ``g(M) = 1 - (s + r)/2 * max(r**beta, delta)``."""

    forget_delta: float = Field(0.1, gt=0.0, lt=1.0)
    """The paper's delta in the forgetting function."""

    forget_max_records: int = Field(200, ge=1)
    """Long-term size above which forgetting runs."""

    reflection_threshold: float = Field(10.0, gt=0.0)
    """Sum of importance of new records that triggers a reflection."""

    merge_threshold: float = Field(0.95, ge=0.0, le=1.0)
    """Similarity above which near-duplicate long-term records are merged."""

    write_mode: Literal["deferred", "inline"] = "deferred"
    """``deferred`` batches memory writes off the critical path (end of session); ``inline`` writes at once."""
