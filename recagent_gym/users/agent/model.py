"""The LLM user agent (RecAgent): profile, memory and actions behind the :class:`UserModel` protocol.

One page decision is ONE batched LLM call on the critical path, for any number of users:

* ``few_shot`` (default for the embedded model): every page item of every user is scored Yes/No after a prefix
  built from the user's own history (``prompts/item_scoring.py``), calibrated by a content-free candidate, plus the
  embedding relevance of the item to the user's taste (``taste.py``); :mod:`.decide` turns the scores and the
  user's patience into watch / search / next / leave.
* ``direct`` (default for remote ``openai`` backends): one ``choose`` over ``watch <title>`` per item, ``next``,
  ``search``, ``leave`` (``prompts/page_decision.py``); the user's patience still ends the session.

The page is shuffled with the request's rng before the model sees it and the permutation is returned in
``Response.extra``. Feelings and ratings of watched items, memory writes and the social world are batched off the
critical path (end of session, between sessions), unless ``user.feeling_timing`` is ``inline``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from functools import cached_property, partial
from typing import Any

import numpy as np

from recagent_gym.llm.protocol import Usage
from recagent_gym.llm.seeding import SEED_HIGH
from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.sensory import Observation
from recagent_gym.memory.writer import precompress
from recagent_gym.prompts import interview as interview_prompt
from recagent_gym.prompts import memory_notes
from recagent_gym.prompts.checked import generate_checked
from recagent_gym.users.agent.agents import Agents
from recagent_gym.users.agent.clock import clock_text
from recagent_gym.users.agent.feelings import FeelingJob, FeelingResult, write_feelings
from recagent_gym.users.agent.page import AgentInput, PageDecider, Prepared
from recagent_gym.users.agent.prior import PagePrior
from recagent_gym.users.agent.score_cache import cached_score_requests
from recagent_gym.users.agent.scoring import ScoringRequest
from recagent_gym.users.agent.social_round import social_round
from recagent_gym.users.agent.state import AgentState, PendingFeeling, SessionState
from recagent_gym.users.agent.take_action import choose_actions
from recagent_gym.users.agent.taste import relevance
from recagent_gym.users.protocol import Action, Context, Page, Response

log = logging.getLogger(__name__)


class LLMUserModel(Agents):
    """A population of LLM agents behind the :class:`~recagent_gym.users.protocol.UserModel` protocol.

    The agents' state and per-agent pieces are :class:`~recagent_gym.users.agent.agents.Agents` (the view the page
    decider and the social round receive); this class adds the protocol: sessions, decisions, the batched
    end-of-session writes, take action, interviews, the social round, accounting and state.
    """

    social = True
    """The agents chat and post between sessions (:meth:`social_round`)."""

    @cached_property
    def _pages(self) -> PageDecider:
        """The page decider: the shared pieces only; each request brings its agent's state (:meth:`_agent_input`)."""
        return PageDecider(
            llm=self.llm,
            config=self.config,
            strategy=self.strategy,
            items=self.items,
            vectors=self.vectors,
            score_cache=self.score_cache,
            prior=None if (path := self.config.prior_weights) is None else PagePrior.load(path, self.dataset),
        )

    def _agent_input(self, ctx: Context) -> AgentInput:
        u = ctx.user_id
        heard = self.heard_item(u, ctx.heard)
        return AgentInput(
            session=self.session(u),
            state=self.agent(u),
            memory=self.memory(u),
            profile=self.profiles[u],
            profile_text=self.profile_text(u, "recommender"),
            heard_title=None if heard is None else self.title(heard),
        )

    # -- UserModel protocol ---------------------------------------------------------------------------------------

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        """Draw patience and the session's fixed Yes/No examples; an open session of this user is ended first."""
        self._check_user(user_id)
        if user_id in self._sessions:
            self.end_sessions([user_id])
        self.write_ended_of([user_id])
        p = min(1.0, 1.0 / self.config.patience)
        patience = int(rng.geometric(p))
        positives = self.positives(user_id)
        negatives = self.negatives(user_id, rng)
        shots = self.shots(positives, negatives, rng)
        session_rng = np.random.default_rng(int(rng.integers(0, SEED_HIGH)))
        self._sessions[user_id] = SessionState(user_id, session_rng, patience, positives, negatives, shots)

    def respond(self, page: Page, context: Context, rng: np.random.Generator) -> Response:
        return self.respond_batch([(page, context)], [rng])[0]

    def respond_batch(
        self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[np.random.Generator]
    ) -> list[Response]:
        """All users' decisions with one batched LLM call (plus one re-ask batch only if some answer was invalid)."""
        if len(requests) != len(rngs):
            raise ValueError(f"{len(requests)} requests but {len(rngs)} rngs")
        users = [ctx.user_id for _, ctx in requests]
        if len(set(users)) != len(users):
            raise ValueError(f"respond_batch got several requests for one user: {users}")
        for page, ctx in requests:  # check everything before any state changes
            self.session(ctx.user_id)
            for item in page.items:
                if not 0 <= int(item) < self.dataset.n_items:
                    raise ValueError(f"page {page.index} for user {ctx.user_id}: item {item} is not in the catalogue")
        drawn = [self._draw(page, ctx, rng) for (page, ctx), rng in zip(requests, rngs, strict=True)]
        blocks = self.memory_blocks(
            [
                (ctx.user_id, "; ".join(self.title(i) for i in shown) or "movies", ctx.time_h)
                for ctx, shown, _, _ in drawn
            ]
        )
        prepared = [
            Prepared(page, ctx, rng, perm, shown, seed, block, self._agent_input(ctx))
            for (page, _), rng, (ctx, shown, perm, seed), block in zip(requests, rngs, drawn, blocks, strict=True)
        ]
        responses = self._pages.decide(prepared)
        if self.config.write_feelings and self.config.feeling_timing == "inline":
            responses = self._inline_feelings(prepared, responses)
        return responses

    def prefetch_scores(self, user_id: int, items: Sequence[int], time_h: float = 0.0) -> int:
        """Score ``items`` for the user's open session in one LLM call, into the score cache, when the session's
        scoring context does not depend on the page (no memory block); the candidates sent (0 otherwise)."""
        ctx = Context(user_id, time_h=time_h)
        block = self.memory_block(user_id, "; ".join(self.title(int(i)) for i in items), time_h)
        return 0 if block else self._pages.prefetch(self._agent_input(ctx), block, items, seed=int(user_id))

    def _draw(self, page: Page, ctx: Context, rng: np.random.Generator) -> tuple[Context, list[int], Any, int]:
        """The page's shuffled order and the call's seed (drawn from the request's rng), session counters."""
        session = self.session(ctx.user_id)
        perm = rng.permutation(len(page.items))
        shown = [int(page.items[k]) for k in perm]
        seed = int(rng.integers(0, SEED_HIGH))
        session.pages += 1
        session.last_time_h = ctx.time_h
        return ctx, shown, perm, seed

    def end_sessions(self, user_ids: Sequence[int]) -> None:
        """These users' sessions are over: their feelings and memory writes wait for :meth:`write_ended` (no LLM
        work here), so that the sessions ended across sub-envs or steps are written as one batch."""
        ended = [self._sessions.pop(u) for u in user_ids if u in self._sessions]
        with self._ended_lock:
            self._ended += ended

    def write_ended(self, *, at_least: int = 1, also: Collection[int] = (), time_h: float | None = None) -> list[int]:
        """Write the feelings (and ratings) and flush the memories of every ended session still pending, as one
        batch, if at least ``at_least`` are pending; returns their users. ``also``: more agents whose memories are
        flushed in the same batch (the round's social notes), at ``time_h`` or later."""
        ready = len(self._ended) >= max(at_least, 1)
        if not ready and not also:
            return []
        sessions: list[SessionState] = []
        if ready:
            with self._ended_lock:
                sessions, self._ended = self._ended, []
        self._write_pending(sessions)
        times = [s.last_time_h for s in sessions] + ([time_h] if time_h is not None else [])
        users = [s.user_id for s in sessions]
        flushed = list(dict.fromkeys([*users, *sorted(also)]))
        self.memory_backend.flush([self.memory(u) for u in flushed], max(times) if times else 0.0)
        return users

    def write_sessions_of(self, user_ids: Collection[int]) -> list[int]:
        """Write the ended sessions of ``user_ids`` only (feelings, ratings, their memories flushed) as one batch;
        the others stay pending. One agent's pipeline calls it for itself when its session is over (the batch's
        seeds come from its own sessions, so the result does not depend on what other agents do meanwhile)."""
        wanted = {int(u) for u in user_ids}
        with self._ended_lock:
            sessions = [s for s in self._ended if s.user_id in wanted]
            self._ended = [s for s in self._ended if s.user_id not in wanted]
        if not sessions:
            return []
        self._write_pending(sessions)
        users = list(dict.fromkeys(s.user_id for s in sessions))
        self.memory_backend.flush([self.memory(u) for u in users], max(s.last_time_h for s in sessions))
        return users

    def write_ended_of(self, user_ids: Collection[int]) -> None:
        """:meth:`write_ended` now if one of ``user_ids`` has an unwritten ended session: called explicitly before
        their memories are read or written (their last session goes first)."""
        if self._ended and any(s.user_id in user_ids for s in self._ended):
            self.write_ended()

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        """The few-shot item score (LLM + embedding, as in the page decision) of each item for this user."""
        llm_scores, embedding_scores = self.score_components(user_id, items, rng)
        return self.combine(llm_scores, embedding_scores)

    def score_components(
        self, user_id: int, items: Sequence[int], rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """The calibrated LLM score and the embedding relevance of each item (fresh Yes/No examples from ``rng``).

        For a personalization check, score user ``u``'s candidates with another user's id: the agent then brings
        that user's history, profile and memory.
        """
        self._check_user(user_id)
        items = [int(i) for i in items]
        if not items:
            return np.zeros(0), np.zeros(0)
        self.write_ended_of([user_id])
        positives = self.positives(user_id)
        negatives = self.negatives(user_id, rng)
        query = "; ".join(self.title(i) for i in items)
        request = ScoringRequest(
            profile=self.profile_text(user_id, "recommender"),
            memory=self.memory_block(user_id, query, 0.0) if user_id in self._memories else "",
            name=self.profiles[user_id].name,
            shots=self.shots(positives, negatives, rng),
            candidates=tuple(self.scoring_line(i) for i in items),
            references=self.references(negatives),
        )
        seed = int(rng.integers(0, SEED_HIGH))
        result = cached_score_requests(
            self.score_cache, self.llm, [request], calibrate=self.config.calibrate, seed=seed,
            mode=self.config.llm_item_score,
        )[0]  # fmt: skip
        agent = self.agent(user_id)
        agent.usage = agent.usage + result.usage
        agent.count("item_scoring", reasked=result.reasked > 0, fallback=result.fallbacks > 0)
        return result.scores, relevance(self.vectors, positives, negatives, items, self.scale)

    # -- feelings -------------------------------------------------------------------------------------------------

    def _feeling_jobs(self, pending: Sequence[tuple[int, PendingFeeling]]) -> list[FeelingJob]:
        return [
            FeelingJob(
                profile=self.profile_text(u, "feeling"),
                name=self.profiles[u].name,
                item_text=self.item_line(p.item),
                title=self.title(p.item),
                score=p.score,
            )
            for u, p in pending
        ]

    @cached_property
    def _feeling_levels(self) -> int | None:
        """The importance levels a combined feeling reply also answers for the agent's memory (None: not asked):
        only where the paper's memory scores importance, so that the feeling's note is stored as written."""
        cfg = getattr(self.memory_backend, "config", None)
        if not (self.combined and self.config.rate_after_watch and isinstance(cfg, MemoryConfig)):
            return None
        return cfg.importance_levels if cfg.score_importance and cfg.implementation != "none" else None

    def _compute_feelings(self, pending: Sequence[tuple[int, PendingFeeling]], seed: int) -> list[FeelingResult]:
        cfg = self.config
        return write_feelings(
            self.llm,
            self._feeling_jobs(pending),
            rate=cfg.rate_after_watch,
            max_tokens=cfg.feeling_max_tokens,
            seed=seed,
            combined=self.combined,
            importance_levels=self._feeling_levels,
        )

    def _apply_feelings(self, pending: Sequence[tuple[int, PendingFeeling]], results: Sequence[FeelingResult]) -> None:
        for (u, p), result in zip(pending, results, strict=True):
            agent = self.agent(u)
            agent.usage = agent.usage + result.usage
            agent.count("feeling", reasked=result.feeling_reasked, fallback=result.feeling_fallback)
            if self.config.rate_after_watch:
                agent.count("rating", reasked=result.rating_reasked, fallback=result.rating_fallback)
                agent.ratings[p.item] = float(result.rating)
            agent.feelings[p.item] = result.feeling
            note, memory = self._feeling_note(u, p, result), self.memory(u)
            if self._feeling_levels is not None:
                agent.count("feeling_importance", fallback=result.importance_fallback)
            if result.importance is not None and hasattr(memory, "observe_written"):
                memory.observe_written(note, result.importance, p.time_h, kind="feeling")
            else:
                memory.observe([note], p.time_h, kind="feeling")

    def _feeling_note(self, user_id: int, p: PendingFeeling, result: FeelingResult) -> str:
        return memory_notes.feeling(
            name=self.profiles[user_id].name, title=self.title(p.item), feeling=result.feeling, rating=result.rating
        )

    def _run_feelings(self, pending: Sequence[tuple[int, PendingFeeling]], seed: int) -> list[FeelingResult]:
        results = self._compute_feelings(pending, seed)
        self._apply_feelings(pending, results)
        return results

    def _write_pending(self, sessions: Sequence[SessionState]) -> None:
        if not self.config.write_feelings:
            return
        pending = [(s.user_id, p) for s in sessions for p in s.pending]
        ready = {id(p): self._ready_feelings.pop(id(p))[1] for _, p in pending if id(p) in self._ready_feelings}
        todo = [(u, p) for u, p in pending if id(p) not in ready]
        if todo:  # everything not written ahead (prefetch): one batch, seeded as always
            ready.update(
                zip(
                    (id(p) for _, p in todo),
                    self._compute_feelings(todo, seed=int(sessions[0].rng.integers(0, SEED_HIGH))),
                    strict=True,
                )
            )
        if pending:
            self._apply_feelings(pending, [ready[id(p)] for _, p in pending])
        for s in sessions:
            s.pending.clear()

    def prefetch(self, user_id: int) -> list[Callable[[], None]]:
        """Work that this agent's session end will need, to run now beside its next page (per-agent pipelines):
        one job per new watch (its feeling, and the compression of its note unless the feeling's reply scored it),
        and one job compressing the notes queued so far. The jobs are independent: they may run at once.

        Seeds and the notes each job takes are fixed here, in the agent's own order; the jobs only call the language
        model and keep the answers (:meth:`write_sessions_of` uses them), so results do not depend on when they run.
        """
        session = self._sessions.get(user_id)
        if session is None:
            with self._ended_lock:
                session = next((s for s in self._ended if s.user_id == user_id), None)
        if session is None:
            return []
        memory = self.memory(user_id)
        new = [p for p in session.pending if id(p) not in self._ready_feelings] if self.config.write_feelings else []
        seeds = [int(session.rng.integers(0, SEED_HIGH)) for _ in new]
        for p in new:
            self._ready_feelings[id(p)] = (p, None)  # claimed (the object stays referenced while its id is a key)
        paper = isinstance(memory, AgentMemory) and memory.enabled  # only the paper's memory compresses notes
        queued = list(memory.sensory.pending) if paper else []

        def feel(p: PendingFeeling, seed: int) -> None:
            [result] = self._compute_feelings([(user_id, p)], seed)
            self._ready_feelings[id(p)] = (p, result)
            if paper and result.importance is None:  # else the note is stored as written (_apply_feelings)
                note = self._feeling_note(user_id, p, result)
                precompress(memory, [Observation(" ".join(note.split()), p.time_h, "feeling")])

        jobs: list[Callable[[], None]] = [partial(feel, p, seed) for p, seed in zip(new, seeds, strict=True)]
        if queued:
            jobs.append(partial(precompress, memory, queued))
        return jobs

    def _inline_feelings(self, prepared: Sequence[Prepared], responses: list[Response]) -> list[Response]:
        watchers = [k for k, r in enumerate(responses) if r.action == Action.WATCH]
        if not watchers:
            return responses
        pending = []
        for k in watchers:
            session = self.session(prepared[k].ctx.user_id)
            pending.append((session.user_id, session.pending.pop()))
        results = self._run_feelings(pending, seed=prepared[watchers[0]].seed + 7)
        out = list(responses)
        for k, result in zip(watchers, results, strict=True):
            r = out[k]
            fallback = r.fallback or result.feeling_fallback or result.rating_fallback
            out[k] = Response(
                action=r.action,
                item=r.item,
                rating=result.rating,
                feeling=result.feeling,
                query=r.query,
                text=r.text,
                usage=r.usage + result.usage,
                parse_ok=r.parse_ok,
                fallback=fallback,
                extra={**r.extra, "feeling_fallback": result.feeling_fallback},
            )
        return out

    # -- other actions --------------------------------------------------------------------------------------------

    def take_action(
        self, user_ids: Sequence[int], rng: np.random.Generator, time_h: float, *, use_llm: bool = True
    ) -> list[str]:
        """``recommender`` / ``social`` / ``nothing`` for each user (:func:`.take_action.choose_actions`)."""
        if use_llm:
            self.write_ended_of(user_ids)
        return choose_actions(self, user_ids, rng, time_h, use_llm=use_llm)

    def interview(self, user_id: int, question: str, rng: np.random.Generator, time_h: float = 0.0) -> str:
        """The agent's in-character answer (fallback: a fixed "no answer" sentence, counted and logged)."""
        self.write_ended_of([user_id])
        prompt = interview_prompt.build(
            profile=self.profile_text(user_id, "interview"),
            memory=self.memory_block(user_id, question, time_h),
            name=self.profiles[user_id].name,
            clock=clock_text(time_h),
            question=" ".join(question.split()),
        )
        answer = generate_checked(
            self.llm,
            [prompt],
            interview_prompt.validate,
            seed=int(rng.integers(0, SEED_HIGH)),
            max_tokens=self.config.interview_max_tokens,
            stop=interview_prompt.STOP,
        )[0]
        agent = self.agent(user_id)
        agent.usage = agent.usage + answer.usage
        agent.count("interview", reasked=answer.reasked, fallback=answer.value is None)
        if answer.value is None:
            log.warning("interview of user %d: no valid answer after a re-ask, using the fallback", user_id)
            return interview_prompt.FALLBACK
        return str(answer.value)

    def social_round(
        self,
        rng: np.random.Generator,
        time_h: float,
        incoming: Collection[int] = (),
        *,
        users: Sequence[int] | None = None,
    ) -> list[dict[str, Any]]:
        """The social world once (activation, take action, chats and posts); returns the events.

        ``incoming``: users about to start a session (they neither act nor receive posts this round); a vector env
        passes every sub-env that starts a session at this step, so one round serves them all. ``users`` limits
        who may be activated (default: everyone); friends outside it can still be chatted with.
        """
        return social_round(self, rng, time_h, incoming, users, settle=self.write_ended_of)

    # -- accounting and state -------------------------------------------------------------------------------------

    def counters(self, user_id: int) -> dict[str, Any]:
        """Per-prompt ``asked``/``reasked``/``fallback`` counts and LLM usage of one agent."""
        agent = self.agent(user_id)
        data = agent.to_dict()
        return {"counts": data["counts"], "usage": data["usage"], "fallbacks": agent.fallbacks, "reasks": agent.reasks}

    @property
    def usage(self) -> Usage:
        """LLM usage of the agents' own prompts (memory's usage is reported by the memories)."""
        return sum((a.usage for a in self._agents.values()), Usage())

    @property
    def fallbacks(self) -> int:
        return sum(a.fallbacks for a in self._agents.values())

    def get_state(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "agents": [a.to_dict() for a in self._agents.values()],
            "sessions": [s.to_dict() for s in self._sessions.values()],
            "ended": [s.to_dict() for s in self._ended],
            "memories": [[u, m.get_state()] for u, m in self._memories.items()],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._agents = {int(a["user_id"]): AgentState.from_dict(a) for a in state["agents"]}
        self._sessions = {int(s["user_id"]): SessionState.from_dict(s) for s in state["sessions"]}
        self._ended = []
        self._ready_feelings = {}
        self._memories = {}
        for user_id, mem_state in state["memories"]:
            self.memory(int(user_id)).set_state(mem_state)
        self._ended = [SessionState.from_dict(s) for s in state.get("ended", [])]
