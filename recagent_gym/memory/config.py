"""Configuration of the agents' memory (the paper's sensory, short-term and long-term memory)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recagent_gym.settings_section import Section


class MemoryConfig(Section):
    implementation: Literal["recagent", "long_term_only", "short_term_only", "none"] = "recagent"
    """Memory implementation; the non-default ones are ablations. ``long_term_only``: every record goes straight to
    long-term memory (no enhancement, no promotion insights). ``short_term_only``: only the short-term buffer (no
    promotion, reflection or forgetting). ``none``: nothing is stored and retrieval returns nothing."""

    sensory: bool = True
    """Compress each observation into one sentence with the LLM; off stores the raw text."""

    sensory_min_chars: int = Field(0, ge=0)
    """Observations at most this long are stored verbatim without a compression call (0 compresses all)."""

    sensory_max_tokens: int = Field(40, ge=4, le=512)
    """Token cap of one compressed sentence (generation stops at the first newline too)."""

    sensory_max_chars: int = Field(200, ge=20)
    """Longest accepted compressed sentence; also the length of the fallback (the observation's first sentence)."""

    score_importance: bool = True
    """Score each record's importance with a constrained LLM choice; off gives every record ``default_importance``."""

    importance_levels: int = Field(5, ge=2, le=10)
    """Options of the importance choice: ``"1"`` .. ``str(importance_levels)``, normalised to [0, 1]."""

    importance_calibration: bool = True
    """Subtract the option scores of a content-free memory before choosing (fights a small model's bias towards
    one number). Costs one extra prompt per flush inside the same batched call; needs a backend that returns
    scores, else the backend's own choice is used."""

    importance_with_summary: bool = False
    """Ask for the importance in the sensory summary's own reply (``prompts/memory_sensory_importance.py``): one LLM
    call per observation instead of two. The agents turn it on with ``user.combined_replies`` (remote models);
    observations stored verbatim, and replies without a usable level, still get the ``choose`` above."""

    default_importance: float = Field(0.5, ge=0.0, le=1.0)
    """Importance of records when scoring is off."""

    reask_temperature: float = Field(0.7, ge=0.0, le=2.0)
    """Temperature of the one re-ask after an invalid answer (a re-ask at temperature 0 would repeat the answer)."""

    short_term_capacity: int = Field(10, ge=1)
    """Records held in short-term memory; above it the least important record is moved on (see
    ``short_term_overflow``)."""

    short_term_overflow: Literal["to_long_term", "discard"] = "to_long_term"
    """Fate of the least important short-term record when the buffer is full. The paper's code discards it; moving it
    to long-term memory (without an insight) keeps a user's diverse watches retrievable, which RL sessions need."""

    enhance_threshold: float = Field(0.75, ge=0.0, le=1.0)
    """Cosine similarity at or above which a new record enhances an existing short-term record."""

    enhance_count: int = Field(3, ge=1)
    """Enhancements (the paper's K) after which a short-term record and its insight move to long-term memory."""

    insight_max_tokens: int = Field(48, ge=4, le=512)
    """Token cap of one promotion insight."""

    retrieve_top_n: int = Field(5, ge=1)
    """Long-term records returned per retrieval (plus all short-term records)."""

    retrieve_candidates: int = Field(0, ge=0)
    """Long-term records pre-selected by relevance alone (index search) before re-ranking with recency and
    importance; 0 re-ranks all records, which is exact."""

    relevance_weight: float = Field(1.0, ge=0.0)
    """Weight of cosine relevance to the query in the retrieval score."""

    recency_weight: float = Field(1.0, ge=0.0)
    """Weight of recency (``recency_decay ** hours since last access``) in the retrieval score."""

    importance_weight: float = Field(1.0, ge=0.0)
    """Weight of importance (in [0, 1]) in the retrieval score."""

    score_normalisation: Literal["minmax", "none"] = "minmax"
    """``minmax`` rescales relevance, recency and importance each to [0, 1] over the candidates before weighting (as
    in generative agents); with ``none`` the raw values are summed, and MiniLM cosines (mostly 0.1-0.6) are drowned
    by importance and recency, which stay near 1 for recent, important records."""

    recency_decay: float = Field(0.99, gt=0.0, le=1.0)
    """Per-hour decay of the recency score of a record."""

    index: Literal["auto", "faiss", "numpy"] = "auto"
    """Search of long-term memory for the ``retrieve_candidates`` pre-selection: a faiss ``IndexFlatIP`` or a numpy
    product + partial sort (both exact). ``auto`` uses numpy below ``faiss_min_records``: measured on 384-d vectors,
    numpy was faster at 200, 2,000 and 20,000 records. Scoring all records is always one numpy product."""

    faiss_min_records: int = Field(50_000, ge=0)
    """Long-term size from which ``index='auto'`` switches to faiss."""

    forget_beta: float = Field(2.0, gt=1.0)
    """The paper's beta in ``g(M) = 1 - (s + r)/2 * max(r**beta, delta)``."""

    forget_delta: float = Field(0.1, gt=0.0, lt=1.0)
    """The paper's delta in the forgetting function."""

    forget_max_records: int = Field(200, ge=1)
    """Long-term size above which forgetting runs; it removes the excess, sampled with probability ~ g(M)."""

    reflection: bool = True
    """Write reflection insights when enough importance has accumulated."""

    reflection_threshold: float = Field(5.0, gt=0.0)
    """Sum of importance (each in [0, 1]) of records stored since the last reflection that triggers one."""

    reflection_window: int = Field(10, ge=1)
    """Most recent records shown to the reflection prompt."""

    reflection_insights: int = Field(2, ge=1, le=5)
    """Insights written per reflection (at most)."""

    reflection_max_tokens: int = Field(64, ge=8, le=1024)
    """Token cap of one reflection answer."""

    insight_max_chars: int = Field(240, ge=20)
    """Longest accepted insight (promotion or reflection)."""

    merge_threshold: float = Field(0.95, ge=0.0, le=1.0)
    """Similarity at or above which near-duplicate long-term records are merged (after each reflection)."""

    write_mode: Literal["deferred", "inline"] = "deferred"
    """``deferred`` batches memory writes off the critical path (``flush_memories``); ``inline`` writes at once."""

    state_embeddings: Literal["store", "recompute"] = "store"
    """``store`` puts embeddings into ``get_state()`` as float lists (exact, bigger); ``recompute`` leaves them out
    and ``set_state`` re-embeds the texts (small state; equal only with a deterministic embedder)."""
