"""The LLM user agent (RecAgent): profile, memory and actions behind the :class:`UserModel` protocol.

One page decision is ONE batched LLM call on the critical path, for any number of users:

* ``few_shot`` (default for the embedded model): every page item of every user is scored Yes/No after a prefix
  built from the user's own history (``prompts/item_scoring.py``), calibrated by a content-free candidate, plus the
  embedding relevance of the item to the user's taste (``items.py``); :func:`.page.decide_page` turns the scores and
  the user's patience into watch / search / next / leave.
* ``direct`` (default for remote ``openai`` backends): one ``choose`` over ``watch <title>`` per item, ``next``,
  ``search``, ``leave`` (``prompts/page_decision.py``); the user's patience still ends the session.

The page is shuffled with the request's rng before the model sees it and the permutation is returned in
``Response.extra``. Feelings and ratings of watched items, memory writes and the social world are batched off the
critical path (end of session, between sessions), unless ``user.feeling_timing`` is ``inline``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from recagent_gym.llm.protocol import Usage
from recagent_gym.llm.seeding import SEED_HIGH
from recagent_gym.users.agent.agents import Agents
from recagent_gym.users.agent.interview import interview_answer
from recagent_gym.users.agent.items import relevance
from recagent_gym.users.agent.page import AgentInput, PageDecider, Prepared, session_patience
from recagent_gym.users.agent.prior import PagePrior
from recagent_gym.users.agent.scoring import ScoringRequest, cached_score_requests
from recagent_gym.users.agent.social_round import social_round
from recagent_gym.users.agent.state import AgentState, SessionState
from recagent_gym.users.agent.take_action import choose_actions
from recagent_gym.users.agent.watch_feelings import prefetch_jobs, with_inline_feelings, write_pending
from recagent_gym.users.protocol import Context, Page, Response


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
            prior=None
            if (path := self.config.prior_weights) is None
            else PagePrior.load(path, self.dataset, fit=self.config.prior_fit),
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
        patience = session_patience(int(rng.geometric(p)), self.config.full_sessions)
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
            responses = with_inline_feelings(self, prepared, responses)
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
        write_pending(self, sessions, self._ready_feelings)
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
        write_pending(self, sessions, self._ready_feelings)
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

    # -- feelings (users/agent/watch_feelings.py) ----------------------------------------------------------------

    def prefetch(self, user_id: int) -> list[Callable[[], None]]:
        """Work that this agent's session end will need, to run now beside its next page (per-agent pipelines):
        :func:`~recagent_gym.users.agent.watch_feelings.prefetch_jobs`; none when the agent has no session."""
        session = self._sessions.get(user_id)
        if session is None:
            with self._ended_lock:
                session = next((s for s in self._ended if s.user_id == user_id), None)
        if session is None:
            return []
        return prefetch_jobs(self, session, self._ready_feelings)

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
        return interview_answer(self, user_id, question, rng, time_h)

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
