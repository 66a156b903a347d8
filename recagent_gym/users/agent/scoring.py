"""Few-shot item scoring: every candidate of many users in ONE ``choose`` call (see ``prompts/item_scoring.py``).

Each user's prompts share a prefix (profile, memory, the session's fixed Yes/No examples) and differ only in the
candidate at the end, which the embedded backend exploits by evaluating the prefix once. With calibration, the
content-free candidate is scored in the same call and subtracted.

The per-(user, item) cache of the scores (:class:`ScoreCache`, :func:`cached_score_requests`): an item scored for a
user whose scoring context has not changed since is not scored again. The LLM score of a candidate is a function of
its prompt: the user's profile, memory block and Yes/No examples (the *context*) and the candidate's line. The cache
keeps, per user, the context it last scored in and the raw ``logp(Yes) - logp(No)`` of every candidate (and the
content-free calibration baseline) scored in it. A request in the same context reuses them and sends only the missing
candidates to the LLM; a request in a new context (the memory changed, new examples were drawn) invalidates the
user's entries first. The same user back in the same state (an evaluation restarts every user from the same state for
each recommender) thus costs only the items not scored yet. Results with a fallback are not stored (the next request
asks again).
"""

from __future__ import annotations

import hashlib
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
    ``mode``: ``yes_no``, ``continuation`` or ``continuation_pmi`` (``user.llm_item_score``)."""
    if title_continuation.reads_the_list(mode):
        return score_continuations(llm, requests, calibrate=calibrate, seed=seed, pmi=mode == "continuation_pmi")
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
    llm: LanguageModel, requests: Sequence[ScoringRequest], *, calibrate: bool, seed: int, pmi: bool = False
) -> list[ScoringResult]:
    """``continuation`` scores: one prompt per request (the user's list), its candidates and references as the
    options of one ``choose`` call (``prompts/title_continuation.py``). ``pmi``: a second prompt per request, the
    header with an empty list and the same options, whose log-likelihoods are subtracted (``continuation_pmi``)."""
    prompts, options = [], []
    for req in requests:
        lines = list(req.candidates) + (list(req.references) if calibrate else [])
        prompts.append(title_continuation.build(name=req.name, shots=req.shots))
        options.append([title_continuation.option(line) for line in lines])
    per_request = 2 if pmi else 1
    if pmi:
        prompts = [p for req, own in zip(requests, prompts, strict=True)
                   for p in (own, title_continuation.build_prior(name=req.name))]  # fmt: skip
        options = [o for o in options for _ in range(2)]
    checked = choose_checked(llm, prompts, options, title_continuation.parse, seed=seed)
    results = []
    for k, req in enumerate(requests):
        parts, sent = checked[k * per_request : (k + 1) * per_request], options[k * per_request]
        n = len(req.candidates)
        usage, reasked = sum((c.usage for c in parts), Usage()), sum(int(c.reasked) for c in parts)
        if any(c.value is None or len(c.value) != len(sent) for c in parts):  # no scores, or not one per option
            values = np.full(n, title_continuation.FALLBACK_SCORE)
            results.append(ScoringResult(values, values.copy(), 0.0, usage, per_request, reasked, n))
            continue
        loglik = np.asarray(parts[0].value, dtype=float)
        if pmi:
            loglik = loglik - np.asarray(parts[1].value, dtype=float)
        raw = loglik[:n] / title_continuation.SCALE
        refs = loglik[n:] / title_continuation.SCALE
        baseline = float(refs.mean()) if calibrate and len(refs) else 0.0
        results.append(ScoringResult(raw - baseline, raw, baseline, usage, per_request, reasked, 0))
    return results


_BASELINE = "\0content-free"
"""Key of the calibration baseline among a context's candidates (no candidate line starts with a NUL)."""


@dataclass
class CachedResult(ScoringResult):
    cache_hits: int = 0
    """Candidates (and the baseline) of this request answered by the cache, without the LLM."""


class ScoreCache:
    """Raw LLM item scores per user in their current scoring context; counters ``hits``, ``misses``,
    ``invalidations`` (contexts replaced)."""

    def __init__(self) -> None:
        self._users: dict[str, tuple[str, dict[str, float]]] = {}
        self.hits = 0
        self.misses = 0
        self.invalidations = 0

    @staticmethod
    def _keys(request: ScoringRequest) -> tuple[str, str]:
        user = hashlib.sha1(f"{request.name}\0{request.profile}".encode()).hexdigest()
        context = hashlib.sha1(f"{request.memory}\0{request.shots}".encode()).hexdigest()
        return user, context

    def entries(self, request: ScoringRequest) -> dict[str, float]:
        """The user's stored scores for the request's context (emptied first if the context changed)."""
        user, context = self._keys(request)
        held = self._users.get(user)
        if held is None or held[0] != context:
            if held is not None and held[1]:
                self.invalidations += 1
            held = (context, {})
            self._users[user] = held
        return held[1]

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "invalidations": self.invalidations}


def cached_score_requests(
    cache: ScoreCache | None, llm: LanguageModel, requests: Sequence[ScoringRequest], *, calibrate: bool, seed: int,
    mode: str = "yes_no",
) -> list[ScoringResult]:  # fmt: skip
    """:func:`score_requests` through ``cache``: one LLM batch for the candidates
    (and baselines) not cached, none if everything is; the results as ``score_requests`` would give them. In
    ``continuation`` mode the references are cached like candidates and the baseline is their mean."""
    if cache is None:
        return score_requests(llm, requests, calibrate=calibrate, seed=seed, mode=mode)
    continuation = title_continuation.reads_the_list(mode)
    stores = [cache.entries(r) for r in requests]
    reduced: list[ScoringRequest] = []
    owners: list[int] = []
    hits: list[int] = []
    for k, (req, store) in enumerate(zip(requests, stores, strict=True)):
        extra = (list(req.references) if continuation else [_BASELINE]) if calibrate and req.candidates else []
        wanted = list(dict.fromkeys([*req.candidates, *extra]))
        missing = [item_scoring.CONTENT_FREE if c == _BASELINE else c for c in wanted if c not in store]
        hits.append(len(wanted) - len(missing))
        cache.hits += hits[-1]
        cache.misses += len(missing)
        if missing:
            reduced.append(ScoringRequest(req.profile, req.memory, req.name, req.shots, candidates=tuple(missing)))
            owners.append(k)
    fresh: dict[int, ScoringResult] = {}
    if reduced:
        # calibration is done here from the (possibly cached) baseline, so the LLM scores raw candidates only
        fresh = dict(zip(owners, score_requests(llm, reduced, calibrate=False, seed=seed, mode=mode), strict=True))
    results: list[ScoringResult] = []
    for k, (req, store) in enumerate(zip(requests, stores, strict=True)):
        got = fresh.get(k)
        values = dict(store)
        if got is not None:
            asked = reduced[owners.index(k)].candidates
            new = {
                (_BASELINE if c == item_scoring.CONTENT_FREE else c): float(v)
                for c, v in zip(asked, got.raw, strict=True)
            }
            values.update(new)
            if got.fallbacks == 0:
                store.update(new)
        raw = np.array([values[c] for c in req.candidates], dtype=float)
        if not (calibrate and req.candidates):
            baseline = 0.0
        elif continuation:
            baseline = float(np.mean([values[r] for r in req.references])) if req.references else 0.0
        else:
            baseline = values[_BASELINE]
        results.append(
            CachedResult(
                scores=raw - baseline,
                raw=raw,
                baseline=baseline,
                usage=got.usage if got is not None else Usage(),
                prompts=got.prompts if got is not None else 0,
                reasked=got.reasked if got is not None else 0,
                fallbacks=got.fallbacks if got is not None else 0,
                cache_hits=hits[k],
            )
        )
    return results
