"""Few-shot item scoring: every candidate of many users in ONE ``choose`` call (see ``prompts/item_scoring.py``).

Each user's prompts share a prefix (profile, memory, the session's fixed Yes/No examples) and differ only in the
candidate at the end, which the embedded backend exploits by evaluating the prefix once. With calibration, the
content-free candidate is scored in the same call and subtracted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from recagent_gym.llm.protocol import LanguageModel, Usage
from recagent_gym.prompts import item_scoring, title_continuation
from recagent_gym.prompts.checked import choose_checked


@dataclass(frozen=True)
class ScoringRequest:
    profile: str
    memory: str
    name: str
    shots: str
    candidates: tuple[str, ...]
    references: tuple[str, ...] = ()
    """Titles whose mean score calibrates a ``continuation`` request (the session's negative examples)."""


@dataclass
class ScoringResult:
    scores: np.ndarray
    """Calibrated ``logp(Yes) - logp(No)`` per candidate (fallback candidates hold ``FALLBACK_SCORE``)."""
    raw: np.ndarray
    baseline: float
    usage: Usage = field(default_factory=Usage)
    prompts: int = 0
    reasked: int = 0
    fallbacks: int = 0


def score_requests(
    llm: LanguageModel, requests: Sequence[ScoringRequest], *, calibrate: bool, seed: int, mode: str = "yes_no"
) -> list[ScoringResult]:
    """Scores for every request's candidates, from one batched ``choose`` (plus one re-ask batch if needed).
    ``mode``: ``yes_no`` or ``continuation`` (``user.llm_item_score``)."""
    if mode == "continuation":
        return score_continuations(llm, requests, calibrate=calibrate, seed=seed)
    prompts: list[str] = []
    spans: list[tuple[int, int]] = []
    for req in requests:
        start = len(prompts)
        candidates = list(req.candidates) + ([item_scoring.CONTENT_FREE] if calibrate and req.candidates else [])
        for candidate in candidates:
            prompts.append(
                item_scoring.build(
                    profile=req.profile, memory=req.memory, name=req.name, shots=req.shots, candidate=candidate
                )
            )
        spans.append((start, len(prompts)))
    checked = choose_checked(llm, prompts, [item_scoring.OPTIONS] * len(prompts), item_scoring.parse, seed=seed)
    results = []
    for req, (start, stop) in zip(requests, spans, strict=True):
        part = checked[start:stop]
        values = np.array(
            [item_scoring.FALLBACK_SCORE if c.value is None else float(c.value) for c in part], dtype=float
        )
        n = len(req.candidates)
        baseline = float(values[n]) if calibrate and n else 0.0
        usage = sum((c.usage for c in part), Usage())
        results.append(
            ScoringResult(
                scores=values[:n] - baseline,
                raw=values[:n],
                baseline=baseline,
                usage=usage,
                prompts=len(part),
                reasked=sum(c.reasked for c in part),
                fallbacks=sum(c.value is None for c in part),
            )
        )
    return results


def score_continuations(
    llm: LanguageModel, requests: Sequence[ScoringRequest], *, calibrate: bool, seed: int
) -> list[ScoringResult]:
    """``continuation`` scores: one prompt per request (the user's list), its candidates and references as the
    options of one ``choose`` call (``prompts/title_continuation.py``)."""
    prompts, options = [], []
    for req in requests:
        lines = list(req.candidates) + (list(req.references) if calibrate else [])
        prompts.append(title_continuation.build(name=req.name, shots=req.shots))
        options.append([title_continuation.option(line) for line in lines])
    checked = choose_checked(llm, prompts, options, title_continuation.parse, seed=seed)
    results = []
    for req, check, sent in zip(requests, checked, options, strict=True):
        n = len(req.candidates)
        if check.value is None or len(check.value) != len(sent):  # no scores, or not one per option: fall back
            values = np.full(n, title_continuation.FALLBACK_SCORE)
            results.append(ScoringResult(values, values.copy(), 0.0, check.usage, 1, int(check.reasked), n))
            continue
        raw = np.asarray(check.value[:n], dtype=float) / title_continuation.SCALE
        refs = np.asarray(check.value[n:], dtype=float) / title_continuation.SCALE
        baseline = float(refs.mean()) if calibrate and len(refs) else 0.0
        results.append(ScoringResult(raw - baseline, raw, baseline, check.usage, 1, int(check.reasked), 0))
    return results
