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
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from recagent_gym.config import Config
from recagent_gym.data.schema import Dataset
from recagent_gym.llm.protocol import LanguageModel, Usage
from recagent_gym.prompts import interview as interview_prompt
from recagent_gym.prompts import item_scoring
from recagent_gym.prompts import take_action as take_action_prompt
from recagent_gym.prompts.checked import choose_checked, generate_checked
from recagent_gym.social.titles import TitleMatcher
from recagent_gym.users.agent.clock import clock_text
from recagent_gym.users.agent.feelings import FeelingJob, write_feelings
from recagent_gym.users.agent.memory_backend import MemoryBackend, RecAgentMemoryBackend, memory_text
from recagent_gym.users.agent.page import PageDecider, Prepared
from recagent_gym.users.agent.profile_view import ProfileTexts, agent_profiles
from recagent_gym.users.agent.scoring import ScoringRequest, score_requests
from recagent_gym.users.agent.state import AgentState, PendingFeeling, SessionState
from recagent_gym.users.agent.take_action import decide as decide_action
from recagent_gym.users.agent.take_action import priors as action_priors
from recagent_gym.users.agent.taste import ItemVectors, relevance
from recagent_gym.users.profiles import Profile
from recagent_gym.users.protocol import Action, Context, Page, Response

log = logging.getLogger(__name__)

SEED_HIGH = 2**31 - 1
"""Upper bound of LLM call seeds (backends take 32-bit seeds); session and world seeds use ``session.SEED_HIGH``."""


def resolve_strategy(strategy: str, backend: str) -> str:
    """``auto`` means ``direct`` for remote (``openai``) backends and ``few_shot`` otherwise."""
    if strategy == "auto":
        return "direct" if backend == "openai" else "few_shot"
    return strategy


class LLMUserModel:
    """A population of LLM agents, one per dataset user (created lazily on first use)."""

    def __init__(
        self,
        dataset: Dataset,
        config: Config,
        llm: LanguageModel,
        embedder: Any,
        graph: Any = None,
        profiles: Sequence[Any] | Mapping[int, Any] | None = None,
        *,
        memory_backend: MemoryBackend | None = None,
    ) -> None:
        self.dataset = dataset
        self.config = config
        self.llm = llm
        self.embedder = embedder
        self.graph = graph
        self.profiles: list[Profile] = agent_profiles(dataset, profiles)
        self.profile_text = ProfileTexts(self.profiles)
        self.strategy = resolve_strategy(config.user.decision_strategy, config.llm.backend)
        self.memory_backend = memory_backend or RecAgentMemoryBackend(config.memory, llm, embedder)
        self.vectors = ItemVectors(dataset, embedder)
        self.popularity = dataset.item_popularity()
        self._titles: TitleMatcher | None = None
        self._history: dict[int, list[int]] = {}
        self._item_lines: dict[int, str] = {}
        self._agents: dict[int, AgentState] = {}
        self._sessions: dict[int, SessionState] = {}
        self._ended: list[SessionState] = []
        """Ended sessions whose feelings and memory flush wait for :meth:`write_ended`."""
        self._memories: dict[int, Any] = {}
        self._pages = PageDecider(self)

    # -- per-agent pieces -----------------------------------------------------------------------------------------

    def agent(self, user_id: int) -> AgentState:
        self._check_user(user_id)
        if user_id not in self._agents:
            self._agents[user_id] = AgentState(user_id)
        return self._agents[user_id]

    def memory(self, user_id: int) -> Any:
        """The agent's memory (created on first use). A plain getter: see :meth:`write_ended_of`."""
        self._check_user(user_id)
        if user_id not in self._memories:
            self._memories[user_id] = self.memory_backend.create(self.profiles[user_id].name, seed=user_id)
        return self._memories[user_id]

    def session(self, user_id: int) -> SessionState:
        if user_id not in self._sessions:
            raise ValueError(f"user {user_id} has no open session: call start_session({user_id}, rng) first")
        return self._sessions[user_id]

    def _check_user(self, user_id: int) -> None:
        if not 0 <= int(user_id) < self.dataset.n_users:
            raise ValueError(f"user id {user_id} is outside 0..{self.dataset.n_users - 1} of {self.dataset.name!r}")

    def item_line(self, item: int) -> str:
        """Short item text for prompts: ``Title (year) [genres]`` (no description: keeps the prefix small)."""
        if item not in self._item_lines:
            row = self.dataset.items.iloc[item]
            year = f" ({row.year})" if row.year and row.year > 0 else ""
            self._item_lines[item] = f"{row.title}{year} [{', '.join(row.genres)}]"
        return self._item_lines[item]

    def scoring_line(self, item: int) -> str:
        """Item text in the few-shot scoring prompt: ``Title (year)``, with genres if ``user.scoring_genres``."""
        if self.config.user.scoring_genres:
            return self.item_line(item)
        row = self.dataset.items.iloc[item]
        return f"{row.title} ({row.year})" if row.year and row.year > 0 else str(row.title)

    def title(self, item: int) -> str:
        return str(self.dataset.items["title"].iat[item])

    @property
    def titles(self) -> TitleMatcher:
        if self._titles is None:
            self._titles = TitleMatcher(list(self.dataset.items["title"]), self.popularity)
        return self._titles

    def history(self, user_id: int) -> list[int]:
        """Dataset history in time order, then what the agent watched in the simulation."""
        if user_id not in self._history:
            self._history[user_id] = [int(i) for i in self.dataset.user_history(user_id)["item_id"]]
        return self._history[user_id] + self.agent(user_id).watched

    def positives(self, user_id: int) -> list[int]:
        """The ``history_shots`` most recent distinct items the user watched (oldest first)."""
        recent: list[int] = []
        for item in reversed(self.history(user_id)):
            if item not in recent:
                recent.append(item)
            if len(recent) == self.config.user.history_shots:
                break
        return recent[::-1]

    def negatives(self, user_id: int, rng: np.random.Generator) -> list[int]:
        """``negative_shots`` distinct items the user never watched, uniformly at random."""
        seen = set(self.history(user_id))
        want = min(self.config.user.negative_shots, self.dataset.n_items - len(seen))
        found: list[int] = []
        while len(found) < want:
            for item in rng.integers(0, self.dataset.n_items, size=2 * want):
                if int(item) not in seen and int(item) not in found and len(found) < want:
                    found.append(int(item))
        return found

    def shots(self, positives: Sequence[int], negatives: Sequence[int], rng: np.random.Generator) -> str:
        return item_scoring.build_shots(
            [self.scoring_line(i) for i in positives], [self.scoring_line(i) for i in negatives], rng
        )

    def memory_block(self, user_id: int, query: str, time_h: float) -> str:
        limit = self.config.user.memory_in_prompt
        if limit == 0:
            return ""
        records = self.memory(user_id).retrieve(query, time_h, top_n=limit)
        return memory_text(records, limit, self.profiles[user_id].name)

    def heard_item(self, user_id: int, extra: Sequence[int] = ()) -> int | None:
        """The most recently heard item the user has not watched (``extra``: heard items given by the context)."""
        watched = set(self.history(user_id))
        if user_id in self._sessions:
            watched.update(self._sessions[user_id].watched)
        heard = [h["item"] for h in self.agent(user_id).heard] + list(extra)
        for item in reversed(heard):
            if item not in watched:
                return int(item)
        return None

    def hear(self, user_id: int, items: Sequence[int], time_h: float, *, source: int, kind: str) -> None:
        agent = self.agent(user_id)
        for item in items:
            agent.heard.append({"item": int(item), "time_h": float(time_h), "source": int(source), "kind": kind})
        cap = self.config.user.heard_capacity
        del agent.heard[: max(0, len(agent.heard) - cap)]

    def friends(self, user_id: int) -> list[int]:
        if self.graph is not None:
            return sorted(int(f) for f in self.graph.friends(user_id))
        social = self.dataset.social
        if social.empty:
            return []
        a = social.loc[social["user_1"] == user_id, "user_2"]
        b = social.loc[social["user_2"] == user_id, "user_1"]
        return sorted({int(x) for x in a} | {int(x) for x in b} - {user_id})

    # -- UserModel protocol ---------------------------------------------------------------------------------------

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        """Draw patience and the session's fixed Yes/No examples; an open session of this user is ended first."""
        self._check_user(user_id)
        if user_id in self._sessions:
            self.end_sessions([user_id])
        self.write_ended_of([user_id])
        p = min(1.0, 1.0 / self.config.user.patience)
        patience = int(rng.geometric(p))
        positives = self.positives(user_id)
        negatives = self.negatives(user_id, rng)
        shots = self.shots(positives, negatives, rng)
        session_rng = np.random.default_rng(int(rng.integers(0, 2**63 - 1)))
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
        prepared = [self._prepare(page, ctx, rng) for (page, ctx), rng in zip(requests, rngs, strict=True)]
        responses = self._pages.decide(prepared)
        if self.config.user.write_feelings and self.config.user.feeling_timing == "inline":
            responses = self._inline_feelings(prepared, responses)
        return responses

    def _prepare(self, page: Page, ctx: Context, rng: np.random.Generator) -> Prepared:
        session = self.session(ctx.user_id)
        perm = rng.permutation(len(page.items))
        shown = [int(page.items[k]) for k in perm]
        seed = int(rng.integers(0, SEED_HIGH))
        session.pages += 1
        session.last_time_h = ctx.time_h
        query = "; ".join(self.title(i) for i in shown) or "movies"
        return Prepared(page, ctx, rng, perm, shown, seed, self.memory_block(ctx.user_id, query, ctx.time_h))

    def end_sessions(self, user_ids: Sequence[int]) -> None:
        """These users' sessions are over: their feelings and memory writes wait for :meth:`write_ended` (no LLM
        work here), so that the sessions ended across sub-envs or steps are written as one batch."""
        self._ended += [self._sessions.pop(u) for u in user_ids if u in self._sessions]

    def write_ended(self, *, at_least: int = 1) -> list[int]:
        """Write the feelings (and ratings) and flush the memories of every ended session still pending, as one
        batch, if at least ``at_least`` are pending; returns their users."""
        if not self._ended or len(self._ended) < at_least:
            return []
        sessions, self._ended = self._ended, []
        self._write_pending(sessions)
        time_h = max(s.last_time_h for s in sessions)
        self.memory_backend.flush([self.memory(s.user_id) for s in sessions], time_h)
        return [s.user_id for s in sessions]

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
        )
        seed = int(rng.integers(0, SEED_HIGH))
        result = score_requests(self.llm, [request], calibrate=self.config.user.calibrate, seed=seed)[0]
        agent = self.agent(user_id)
        agent.usage = agent.usage + result.usage
        agent.count("item_scoring", reasked=result.reasked > 0, fallback=result.fallbacks > 0)
        return result.scores, relevance(self.vectors, positives, negatives, items, self.scale)

    @property
    def scale(self) -> float:
        return self.config.user.embedding_scale

    def combine(self, llm_scores: np.ndarray, embedding_scores: np.ndarray) -> np.ndarray:
        cfg = self.config.user
        return cfg.score_llm_weight * np.asarray(llm_scores) + cfg.score_embedding_weight * embedding_scores

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

    def _run_feelings(self, pending: Sequence[tuple[int, PendingFeeling]], seed: int) -> list[Any]:
        cfg = self.config.user
        jobs = self._feeling_jobs(pending)
        results = write_feelings(
            self.llm, jobs, rate=cfg.rate_after_watch, max_tokens=cfg.feeling_max_tokens, seed=seed
        )
        for (u, p), result in zip(pending, results, strict=True):
            agent = self.agent(u)
            agent.usage = agent.usage + result.usage
            agent.count("feeling", reasked=result.feeling_reasked, fallback=result.feeling_fallback)
            if cfg.rate_after_watch:
                agent.count("rating", reasked=result.rating_reasked, fallback=result.rating_fallback)
                agent.ratings[p.item] = float(result.rating)
            agent.feelings[p.item] = result.feeling
            note = f"{self.profiles[u].name} watched {self.title(p.item)} and felt: {result.feeling}"
            if result.rating is not None:
                note += f" (rated {result.rating:g}/5)"
            self.memory(u).observe([note], p.time_h, kind="feeling")
        return results

    def _write_pending(self, sessions: Sequence[SessionState]) -> None:
        if not self.config.user.write_feelings:
            return
        pending = [(s.user_id, p) for s in sessions for p in s.pending]
        if pending:
            self._run_feelings(pending, seed=int(sessions[0].rng.integers(0, SEED_HIGH)))
        for s in sessions:
            s.pending.clear()

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
        """``recommender`` / ``social`` / ``nothing`` for each user: one batched ``choose`` (plus the content-free
        calibration prompt), sampled with the behaviour priors (:mod:`.take_action`); the priors alone without
        ``use_llm``."""
        if not user_ids:
            return []
        if not use_llm:
            return [decide_action(None, self._action_prior(u), rng) for u in user_ids]
        self.write_ended_of(user_ids)
        prompts = [
            take_action_prompt.build(
                profile=self.profile_text(u, "take_action"),
                memory=self.memory_block(u, "what to do in free time", time_h),
                name=self.profiles[u].name,
                clock=clock_text(time_h),
            )
            for u in user_ids
        ]
        prompts.append(take_action_prompt.build_baseline(clock_text(time_h)))
        options = [take_action_prompt.OPTIONS] * len(prompts)
        checked = choose_checked(self.llm, prompts, options, lambda c: c, seed=int(rng.integers(0, SEED_HIGH)))
        baseline = checked.pop().value
        choices = []
        for u, answer in zip(user_ids, checked, strict=True):
            agent = self.agent(u)
            agent.usage = agent.usage + answer.usage
            agent.count("take_action", reasked=answer.reasked, fallback=answer.value is None)
            choices.append(decide_action(answer.value, self._action_prior(u), rng, baseline))
        return choices

    def _action_prior(self, user_id: int) -> np.ndarray:
        profile = self.profiles[user_id]
        return action_priors(profile.features, profile.activity)

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
            max_tokens=self.config.user.interview_max_tokens,
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
        from recagent_gym.users.agent.social_round import social_round

        return social_round(self, rng, time_h, incoming, users)

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
        self._memories = {}
        for user_id, mem_state in state["memories"]:
            self.memory(int(user_id)).set_state(mem_state)
        self._ended = [SessionState.from_dict(s) for s in state.get("ended", [])]
