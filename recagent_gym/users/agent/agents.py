"""The agents' state and the per-agent pieces every agent action reads: profiles, memories, histories, sessions,
heard items, friends, item lines. The page decider and the social round receive this view; the protocol (sessions,
writes, interviews) is :class:`~recagent_gym.users.agent.model.LLMUserModel`'s. The agents reach their memories
through a :class:`MemoryBackend` (one memory per agent, batched flushes).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.llm.protocol import LanguageModel
from recagent_gym.llm.vector_store import stored
from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.writer import flush_memories
from recagent_gym.prompts import item_scoring, title_continuation
from recagent_gym.social.config import SocialConfig
from recagent_gym.social.titles import TitleMatcher
from recagent_gym.users.agent.items import ItemTexts, ItemVectors, combine_scores
from recagent_gym.users.agent.profile_view import ProfileTexts, agent_profiles
from recagent_gym.users.agent.scoring import ScoreCache
from recagent_gym.users.agent.state import AgentState, SessionState
from recagent_gym.users.config import UserConfig
from recagent_gym.users.prior_default import resolve_prior
from recagent_gym.users.profiles import Profile

MEMORY_LINE_CHARS = 160
"""Longest memory record quoted in a prompt (longer ones are cut), to bound the prompt."""


class MemoryBackend(Protocol):
    """How the agents reach their memory: one memory per agent, and batched flushing of many agents' memories. The
    default is the paper's memory (:class:`RecAgentMemoryBackend`); tests pass a light fake with the same methods."""

    def create(self, agent_name: str, seed: int) -> Any:
        """A new, empty memory with ``observe``, ``retrieve``, ``get_state``, ``set_state``."""
        ...

    def flush(self, memories: Sequence[Any], time_h: float) -> None:
        """Process the deferred writes of many memories in one batch."""
        ...


class RecAgentMemoryBackend:
    """The paper's sensory / short-term / long-term memory (``recagent_gym.memory.AgentMemory``)."""

    def __init__(self, config: MemoryConfig, llm: LanguageModel, embedder: Any) -> None:
        self.config = config
        self.llm = llm
        self.embedder = embedder

    def create(self, agent_name: str, seed: int) -> Any:
        return AgentMemory(self.config, self.llm, self.embedder, agent_name, seed=seed)

    def flush(self, memories: Sequence[Any], time_h: float) -> None:
        if memories:
            flush_memories(list(memories), time_h)


def memory_text(records: Sequence[Any], limit: int, name: str) -> str:
    """The first ``limit`` records as a short block for a prompt ("" when there is nothing to quote)."""
    lines = []
    for record in records[:limit]:
        content = " ".join(str(getattr(record, "content", record)).split())
        if content:
            lines.append("- " + (content if len(content) <= MEMORY_LINE_CHARS else content[:MEMORY_LINE_CHARS] + "..."))
    if not lines:
        return ""
    return f"{name} remembers:\n" + "\n".join(lines)


def resolve_strategy(strategy: str, backend: str, *, prior: bool = False) -> str:
    """``auto`` means ``direct`` for remote (``openai``) backends and ``few_shot`` otherwise, or with a behavioural
    ``prior`` (``user.prior_weights``), which adjusts the item scores only ``few_shot`` produces."""
    if strategy == "auto":
        return "direct" if backend == "openai" and not prior else "few_shot"
    return strategy


def resolve_combined(setting: str, backend: str) -> bool:
    """``auto`` means combined structured replies for remote (``openai``) backends only."""
    return backend == "openai" if setting == "auto" else setting == "on"


class Agents:
    """A population of LLM agents, one per dataset user (created lazily on first use).

    ``config`` is the user section; ``social`` the social section (chat and post; ``social_config``); the memory is
    ``memory_backend``, or the paper's memory configured by ``memory``; ``llm_backend`` (the ``llm.backend`` the
    ``llm`` came from) resolves ``decision_strategy='auto'``. This constructor is the population's only one (the
    model adds no arguments).
    """

    def __init__(
        self,
        dataset: Dataset,
        config: UserConfig,
        llm: LanguageModel,
        embedder: Any,
        graph: Any = None,
        profiles: Sequence[Any] | Mapping[int, Any] | None = None,
        *,
        social: SocialConfig | None = None,
        memory: MemoryConfig | None = None,
        memory_backend: MemoryBackend | None = None,
        llm_backend: str = "embedded",
    ) -> None:
        if not isinstance(config, UserConfig):
            raise TypeError(f"the LLM agents take the user section (UserConfig), got {type(config).__name__}")
        self.dataset = dataset
        # ``user.prior_weights: auto`` (the default) becomes the shipped calibration where it applies, else none.
        self.config = config = resolve_prior(config, dataset, getattr(llm, "name", None))
        self.social_config = social if social is not None else SocialConfig()
        self.llm = llm
        self.embedder = embedder
        self.graph = graph
        self.profiles: list[Profile] = agent_profiles(dataset, profiles)
        self.profile_text = ProfileTexts(self.profiles)
        self.strategy = resolve_strategy(config.decision_strategy, llm_backend, prior=config.prior_weights is not None)
        self.combined = resolve_combined(config.combined_replies, llm_backend)
        memory_config = memory or MemoryConfig()
        if self.combined and not memory_config.importance_with_summary:
            memory_config = memory_config.model_copy(update={"importance_with_summary": True})
        self.memory_backend = memory_backend or RecAgentMemoryBackend(memory_config, llm, embedder)
        # Item texts through the machine's text-vector store (user.item_vector_store): embedded once per machine.
        self.vectors = ItemVectors(dataset, stored(embedder) if config.item_vector_store else embedder)
        self.popularity = dataset.item_popularity()
        self._titles: TitleMatcher | None = None
        self._history: dict[int, list[int]] = {}
        self.items = ItemTexts(dataset, scoring_genres=config.scoring_genres)
        self._agents: dict[int, AgentState] = {}
        self._sessions: dict[int, SessionState] = {}
        self._ended: list[SessionState] = []
        """Ended sessions whose feelings and memory flush wait for ``write_ended``."""
        self._ended_lock = threading.Lock()
        self._ready_feelings: dict[int, tuple[Any, Any]] = {}
        """Feelings written ahead by a pipeline's :meth:`prefetch`, by ``id`` of their pending entry (transient)."""
        """Guards ``_ended``: the simulator's per-agent pipelines end and write sessions from several threads."""
        self._memories: dict[int, Any] = {}
        self.score_cache = ScoreCache() if config.score_cache else None  # see users/agent/scoring.py

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
        """Short item text for prompts: ``Title (year) [genres]`` (:class:`ItemTexts`)."""
        return self.items.line(item)

    def scoring_line(self, item: int) -> str:
        """Item text in the few-shot scoring prompt (:class:`ItemTexts`)."""
        return self.items.scoring_line(item)

    def title(self, item: int) -> str:
        return self.items.title(item)

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
            if len(recent) == self.config.history_shots:
                break
        return recent[::-1]

    def negatives(self, user_id: int, rng: np.random.Generator) -> list[int]:
        """``negative_shots`` distinct items the user never watched, uniformly at random."""
        seen = set(self.history(user_id))
        want = min(self.config.negative_shots, self.dataset.n_items - len(seen))
        found: list[int] = []
        while len(found) < want:
            for item in rng.integers(0, self.dataset.n_items, size=2 * want):
                if int(item) not in seen and int(item) not in found and len(found) < want:
                    found.append(int(item))
        return found

    def shots(self, positives: Sequence[int], negatives: Sequence[int], rng: np.random.Generator) -> str:
        """The scoring prompt's examples: Yes/No lines, or the user's list (``llm_item_score: continuation``)."""
        if title_continuation.reads_the_list(self.config.llm_item_score):
            return title_continuation.build_shots([self.scoring_line(i) for i in positives])
        return item_scoring.build_shots(
            [self.scoring_line(i) for i in positives], [self.scoring_line(i) for i in negatives], rng
        )

    def references(self, negatives: Sequence[int]) -> tuple[str, ...]:
        """The lines calibrating a ``continuation`` score (the negative examples); none in ``yes_no`` mode."""
        if not title_continuation.reads_the_list(self.config.llm_item_score):
            return ()
        return tuple(self.scoring_line(i) for i in negatives)

    def memory_block(self, user_id: int, query: str, time_h: float) -> str:
        return self.memory_blocks([(user_id, query, time_h)])[0]

    def memory_blocks(self, asks: Sequence[tuple[int, str, float]]) -> list[str]:
        """:meth:`memory_block` of many ``(user, query, time_h)``: the paper's memories embed all their queries in
        one embedder call (one per distinct embedder) instead of one call per retrieval."""
        limit = self.config.memory_in_prompt
        if limit == 0:
            return [""] * len(asks)
        memories = [self.memory(u) for u, _, _ in asks]
        vectors: dict[int, Any] = {}
        groups: dict[int, list[int]] = {}
        for k, (memory, (_, query, _)) in enumerate(zip(memories, asks, strict=True)):
            if isinstance(memory, AgentMemory) and memory.needs_query_vector(query):
                groups.setdefault(id(memory.embedder), []).append(k)
        for members in groups.values():
            matrix = memories[members[0]].embed([asks[k][1] for k in members])
            vectors.update({k: matrix[row] for row, k in enumerate(members)})
        blocks = []
        for k, (memory, (u, query, time_h)) in enumerate(zip(memories, asks, strict=True)):
            if k in vectors:
                records = memory.retrieve(query, time_h, top_n=limit, vector=vectors[k])
            else:
                records = memory.retrieve(query, time_h, top_n=limit)
            blocks.append(memory_text(records, limit, self.profiles[u].name))
        return blocks

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
        cap = self.config.heard_capacity
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

    @property
    def scale(self) -> float:
        return self.config.embedding_scale

    def combine(self, llm_scores: np.ndarray, embedding_scores: np.ndarray) -> np.ndarray:
        return combine_scores(self.config, llm_scores, embedding_scores)

    def open_users(self) -> set[int]:
        """Users in a session now."""
        return set(self._sessions)
