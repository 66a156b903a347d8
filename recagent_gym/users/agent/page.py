"""The page decision for a batch of users: ONE ``choose`` call for all of them, then per-user bookkeeping.

See :mod:`recagent_gym.users.agent.model` for the two strategies. The few-shot strategy's decision rule
(:func:`decide_page`, which the distilled users share) turns item scores and the user's patience into watch / search
/ next / leave. The decider holds only shared pieces (the language model, the user settings, item texts and vectors,
the score cache); each request brings its agent's own state (:class:`AgentInput`), resolved by the model beforehand,
so nothing here calls back into the population.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recagent_gym.llm.protocol import LanguageModel, Usage, prefix_hint
from recagent_gym.prompts import memory_notes, page_decision, search_query, title_continuation
from recagent_gym.prompts.checked import choose_checked, generate_checked
from recagent_gym.users.agent.clock import clock_text
from recagent_gym.users.agent.items import ItemTexts, ItemVectors, combine_scores, relevance
from recagent_gym.users.agent.prior import PagePrior
from recagent_gym.users.agent.scoring import ScoreCache, ScoringRequest, ScoringResult, cached_score_requests
from recagent_gym.users.agent.state import AgentState, PendingFeeling, SessionState
from recagent_gym.users.config import UserConfig
from recagent_gym.users.profiles import Profile
from recagent_gym.users.protocol import Action, Context, Page, Response

DIRECT_ITEM_CHARS = 160
"""Longest item line in the ``direct`` prompt (description cut), to bound the prompt."""
SESSION_PREFIX_PRIORITY = 1
"""Prefix-cache priority of page decisions (everything else uses 0; see ``llm/llama_runtime.py``)."""


# -- the few-shot rule -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleParams:
    threshold: float
    temperature: float
    search_heard_probability: float
    search_interest_probability: float


@dataclass(frozen=True)
class Decision:
    action: Action
    position: int | None = None
    """Index into the scored (shown) items, for WATCH."""
    query: str | None = None
    p_watch: float = 0.0


def threshold_for(base: float, offset: float, features: Sequence[str], activity: float) -> float:
    return base + offset * (("Critic" in features) - ("Watcher" in features) - (activity - 0.5))


ENDLESS_PATIENCE = 2**62
"""The patience of a user who never leaves (``user.full_sessions``): no session runs that many pages."""


def session_patience(drawn: int, full_sessions: bool) -> int:
    """A new session's patience: the drawn one, or :data:`ENDLESS_PATIENCE` under ``user.full_sessions`` (drawn all
    the same, so that the session's other draws do not depend on the setting)."""
    return ENDLESS_PATIENCE if full_sessions else drawn


def decide_page(
    scores: np.ndarray,
    eligible: np.ndarray,
    *,
    params: RuleParams,
    patience: int,
    heard_query: str | None,
    interest_query: str,
    on_search_page: bool,
    rng: np.random.Generator,
) -> tuple[Decision, int]:
    """The decision and the patience left after it, by the few-shot strategy's rule. For a page whose eligible items
    (not yet watched this session) have scores ``s``:

    1. ``best = max(s)``; the user watches it with probability ``sigmoid((best - threshold) / temperature)``, where
       ``threshold = user.watch_threshold + offset * (Critic - Watcher - (activity - 0.5))``.
    2. Otherwise the page was unrewarding: patience drops by one; when it is spent the user **leaves**.
    3. Otherwise, with probability ``search_heard_probability``, the user **searches** for the most recently heard item
       not watched yet (if any); else with ``search_interest_probability`` (doubled for Explorers, not on a search
       results page) for their interests; else **next** page.

    Each step draws from the rng passed in, so the same inputs and rng state give the same decision.
    """
    p_watch = 0.0
    if eligible.any():
        masked = np.where(eligible, scores, -np.inf)
        position = int(np.argmax(masked))
        p_watch = float(1.0 / (1.0 + np.exp(-(masked[position] - params.threshold) / params.temperature)))
        if rng.random() < p_watch:
            return Decision(Action.WATCH, position=position, p_watch=p_watch), patience
    patience -= 1
    if patience <= 0:
        return Decision(Action.LEAVE, p_watch=p_watch), patience
    if heard_query and rng.random() < params.search_heard_probability:
        return Decision(Action.SEARCH, query=heard_query, p_watch=p_watch), patience
    if not on_search_page and rng.random() < params.search_interest_probability:
        return Decision(Action.SEARCH, query=interest_query, p_watch=p_watch), patience
    return Decision(Action.NEXT, p_watch=p_watch), patience


# -- the decider ----------------------------------------------------------------------------------------------------


@dataclass
class AgentInput:
    """What one page decision reads and updates of its agent: its open session (patience, watched items, examples),
    its counters, its memory, its profile, and the most recently heard unwatched title."""

    session: SessionState
    state: AgentState
    memory: Any
    profile: Profile
    profile_text: str
    """The profile as the recommender prompts show it."""
    heard_title: str | None = None


@dataclass
class Prepared:
    """One request after shuffling: ``shown[k] == page.items[perm[k]]``; ``seed`` derived from the request rng."""

    page: Page
    ctx: Context
    rng: np.random.Generator
    perm: np.ndarray
    shown: list[int]
    seed: int
    memory: str
    agent: AgentInput


@dataclass
class Outcome:
    decision: Decision
    score: float = 0.0
    text: str = ""
    usage: Usage = field(default_factory=Usage)
    reasked: int = 0
    fallbacks: int = 0
    extra: dict[str, Any] | None = None


class PageDecider:
    """Decides pages from the requests' own agent state (:class:`AgentInput`) and the shared pieces given here."""

    def __init__(
        self,
        *,
        llm: LanguageModel,
        config: UserConfig,
        strategy: str,
        items: ItemTexts,
        vectors: ItemVectors,
        score_cache: ScoreCache | None = None,
        prior: PagePrior | None = None,
    ) -> None:
        self.llm = llm
        self.config = config
        self.strategy = strategy
        self.items = items
        self.vectors = vectors
        self.score_cache = score_cache
        self.prior = prior

    def decide(self, prepared: Sequence[Prepared]) -> list[Response]:
        if not prepared:
            return []
        outcomes = self._direct(prepared) if self.strategy == "direct" else self._few_shot(prepared)
        if self.config.search_query_source == "llm":
            self._llm_queries(prepared, outcomes)
        return [self._finish(p, o) for p, o in zip(prepared, outcomes, strict=True)]

    def prefetch(self, agent: AgentInput, memory: str, items: Sequence[int], seed: int) -> int:
        """Score ``items`` for the agent's open session in ONE call, in the context its page decisions use, into
        the score cache (none without one, or with the direct strategy); returns the candidates sent to the LLM.

        One long call scores a pool with one shared prefix and larger batches than page-sized calls do;
        it pays only when the context is the same for every page (no memory block in the prompt)."""
        if self.score_cache is None or self.strategy != "few_shot":
            return 0
        lines = tuple(self.items.scoring_line(int(i)) for i in items if int(i) not in agent.session.watched)
        request = ScoringRequest(
            profile=agent.profile_text, memory=memory, name=agent.profile.name, shots=agent.session.shots,
            candidates=lines, references=self._references(agent.session.negatives),
        )  # fmt: skip
        missing = len(set(lines) - set(self.score_cache.entries(request)))
        if missing:
            with prefix_hint(self.llm, SESSION_PREFIX_PRIORITY):
                cached_score_requests(self.score_cache, self.llm, [request], calibrate=self.config.calibrate,
                                      seed=seed, mode=self.config.llm_item_score)  # fmt: skip
        return missing

    # -- few-shot scoring -----------------------------------------------------------------------------------------

    def _references(self, negatives: Sequence[int]) -> tuple[str, ...]:
        """The lines calibrating a ``continuation`` score (the session's negative examples); none for Yes/No."""
        if not title_continuation.reads_the_list(self.config.llm_item_score):
            return ()
        return tuple(self.items.scoring_line(int(i)) for i in negatives)

    def _few_shot(self, prepared: Sequence[Prepared]) -> list[Outcome]:
        cfg, items = self.config, self.items
        eligible = [np.array([i not in p.agent.session.watched for i in p.shown], bool) for p in prepared]
        requests, owners = [], []
        for k, p in enumerate(prepared):
            if eligible[k].any():
                requests.append(
                    ScoringRequest(
                        profile=p.agent.profile_text,
                        memory=p.memory,
                        name=p.agent.profile.name,
                        shots=p.agent.session.shots,
                        candidates=tuple(
                            items.scoring_line(i) for i, ok in zip(p.shown, eligible[k], strict=True) if ok
                        ),
                        references=self._references(p.agent.session.negatives),
                    )
                )
                owners.append(k)
        scored: dict[int, ScoringResult] = {}
        if requests:
            # The users' profile-and-examples prefixes outrank the feelings, memory and social prompts that run
            # before their next page (embedded backend), so those do not push them out of the prefix cache.
            with prefix_hint(self.llm, SESSION_PREFIX_PRIORITY):
                results = cached_score_requests(
                    self.score_cache,
                    self.llm,
                    requests,
                    calibrate=cfg.calibrate,
                    seed=prepared[owners[0]].seed,
                    mode=cfg.llm_item_score,
                )
            scored = dict(zip(owners, results, strict=True))
        # One embedder call for every item the batch needs (cached afterwards).
        self.vectors.get(
            [i for p in prepared for i in p.shown]
            + [i for p in prepared for i in (*p.agent.session.positives, *p.agent.session.negatives)]
        )
        outcomes = []
        for k, p in enumerate(prepared):
            session, profile = p.agent.session, p.agent.profile
            llm_scores = np.full(len(p.shown), np.nan)
            result = scored.get(k)
            if result is not None:
                llm_scores[eligible[k]] = result.scores
            emb = relevance(self.vectors, session.positives, session.negatives, p.shown, cfg.embedding_scale)
            combined = combine_scores(cfg, np.nan_to_num(llm_scores), emb)
            if self.prior is not None:  # the behavioural prior (user.prior_weights, user.prior_fit)
                combined = self.prior.adjust(p.ctx.user_id, p.shown, combined, llm_scores, emb)
            params = RuleParams(
                threshold=threshold_for(cfg.watch_threshold, cfg.behaviour_offset, profile.features, profile.activity),
                temperature=cfg.watch_temperature,
                search_heard_probability=cfg.search_heard_probability,
                search_interest_probability=cfg.search_interest_probability
                * (2 if "Explorer" in profile.features else 1),
            )
            decision, session.patience = decide_page(
                combined,
                eligible[k],
                params=params,
                patience=session.patience,
                heard_query=p.agent.heard_title,
                interest_query=search_query.template_query(heard_title=None, interests=profile.interests),
                on_search_page=p.page.source == "search",
                rng=p.rng,
            )
            score = float(combined[decision.position]) if decision.position is not None else 0.0
            outcomes.append(
                Outcome(
                    decision,
                    score=score,
                    usage=result.usage if result else Usage(),
                    reasked=result.reasked if result else 0,
                    fallbacks=result.fallbacks if result else 0,
                    extra={
                        "scores": [None if not ok else float(s) for s, ok in zip(combined, eligible[k], strict=True)],
                        "llm_scores": [None if np.isnan(s) else float(s) for s in llm_scores],
                        "embedding_scores": [float(s) for s in emb],
                        "baseline": result.baseline if result else None,
                        "threshold": params.threshold,
                        "p_watch": decision.p_watch,
                        "score_cache_hits": getattr(result, "cache_hits", 0),
                    },
                )
            )
        return outcomes

    # -- direct choice --------------------------------------------------------------------------------------------

    def _direct(self, prepared: Sequence[Prepared]) -> list[Outcome]:
        items = self.items
        prompts, options = [], []
        for p in prepared:
            name = p.agent.profile.name
            prompts.append(
                page_decision.build(
                    profile=p.agent.profile_text,
                    memory=p.memory,
                    name=name,
                    clock=clock_text(p.ctx.time_h),
                    session=page_decision.session_line(
                        name=name, watched=[items.title(i) for i in p.agent.session.watched]
                    ),
                    page=[items.description(i)[:DIRECT_ITEM_CHARS] for i in p.shown],
                )
            )
            options.append(page_decision.options([items.line(i).split(" [")[0] for i in p.shown]))
        checked = choose_checked(self.llm, prompts, options, page_decision.parse, seed=prepared[0].seed)
        outcomes = []
        for p, answer in zip(prepared, checked, strict=True):
            session = p.agent.session
            if answer.value is None:
                action, position = Action.NEXT, None
            else:
                action, position = page_decision.action_of(answer.value, len(p.shown))
                if action == Action.LEAVE and self.config.full_sessions:
                    action = Action.NEXT  # a chosen leave ends nothing under user.full_sessions
            forced = False
            query = None
            if action in (Action.NEXT, Action.SEARCH):
                session.patience -= 1
                if session.patience <= 0:
                    action, position, forced = Action.LEAVE, None, True
            if action == Action.SEARCH:
                query = search_query.template_query(
                    heard_title=p.agent.heard_title, interests=p.agent.profile.interests
                )
            outcomes.append(
                Outcome(
                    Decision(action, position=position, query=query),
                    text=answer.raw,
                    usage=answer.usage,
                    reasked=int(answer.reasked),
                    fallbacks=int(answer.value is None),
                    extra={"patience_forced_leave": forced},
                )
            )
        return outcomes

    # -- optional LLM-written search queries ----------------------------------------------------------------------

    def _llm_queries(self, prepared: Sequence[Prepared], outcomes: list[Outcome]) -> None:
        todo = [k for k, o in enumerate(outcomes) if o.decision.action == Action.SEARCH]
        if not todo:
            return
        prompts = []
        for k in todo:
            agent = prepared[k].agent
            prompts.append(
                search_query.build(
                    profile=agent.profile_text,
                    memory=prepared[k].memory,
                    name=agent.profile.name,
                    hint=search_query.hint(name=agent.profile.name, heard_title=agent.heard_title),
                )
            )
        checked = generate_checked(
            self.llm,
            prompts,
            search_query.validate,
            seed=prepared[todo[0]].seed + 3,
            max_tokens=24,
            stop=search_query.STOP,
        )
        for k, answer in zip(todo, checked, strict=True):
            o = outcomes[k]
            agent = prepared[k].agent.state
            agent.count("search_query", reasked=answer.reasked, fallback=answer.value is None)
            if answer.value is not None:
                o.decision = Decision(Action.SEARCH, query=str(answer.value), p_watch=o.decision.p_watch)
            o.usage = o.usage + answer.usage

    # -- bookkeeping ----------------------------------------------------------------------------------------------

    def _finish(self, p: Prepared, o: Outcome) -> Response:
        session, agent, name = p.agent.session, p.agent.state, p.agent.profile.name
        prompt_name = "page_decision" if self.strategy == "direct" else "item_scoring"
        agent.count(prompt_name, reasked=o.reasked > 0, fallback=o.fallbacks > 0)
        agent.usage = agent.usage + o.usage
        d = o.decision
        item = None
        if d.action == Action.WATCH:
            assert d.position is not None
            item = p.shown[d.position]
            session.watched.append(item)
            agent.watched.append(item)
            # remembered once, by its feeling note ("<name> watched <title> and felt: ..."), written with its
            # importance when the session ends: a separate "<name> watched <title>." record said the same, and cost a
            # compression request and an embedding per watch
            session.pending.append(PendingFeeling(item, p.ctx.time_h, o.score))
        elif d.action == Action.SEARCH:
            note = memory_notes.searched(name=name, query=str(d.query))
            p.agent.memory.observe([note], p.ctx.time_h, kind="observation")
        extra = {
            "strategy": self.strategy,
            "permutation": [int(k) for k in p.perm],
            "shown": list(p.shown),
            "patience_left": session.patience,
            "reasked": o.reasked,
            "fallbacks": o.fallbacks,
            "agent_fallbacks": agent.fallbacks,
            **(o.extra or {}),
        }
        return Response(
            action=d.action,
            item=item,
            query=d.query,
            text=o.text,
            usage=o.usage,
            parse_ok=o.reasked == 0,
            fallback=o.fallbacks > 0,
            extra=extra,
        )
