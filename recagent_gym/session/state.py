"""The state of one open session, and of one lane (a stream of sessions: the single env, or one sub-env).

A session knows its user, what the user has seen (the dataset history and this session's watches), the last
``history_length`` watched items and their mean genre vector, the page count and the last response. The lane
keeps the generator every draw of the next session comes from, the activation weights, the clock, and the open
session. Both are plain data behind ``get_state`` / ``set_state``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recagent_gym.session.tables import SessionTables
from recagent_gym.users.protocol import Context

RESPONSE_CODES: tuple[str, ...] = ("start", "watch", "next", "search_watch", "search_next", "leave")
"""Order of the ``last_response`` one-hot in the observation."""


@dataclass
class SessionState:
    """One open session (see the module docstring)."""

    user: int
    rng: np.random.Generator
    """The session's child generator, which the user model draws from."""
    time_h: float
    seen: np.ndarray
    """``(n_items,)`` bool: items the user already watched (dataset history and this session)."""
    history: np.ndarray
    """The last ``history_length`` watched items, most recent first, -1 pad."""
    history_genres: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    watched: list[int] = field(default_factory=list)
    page_index: int = 0
    pop_pointer: int = 0
    """Start of the popularity scan for replacements (items before it are all seen)."""
    last_code: int = 0
    last_rating: float = 0.0
    open: bool = True

    @classmethod
    def start(
        cls, user: int, rng: np.random.Generator, time_h: float, tables: SessionTables, history_length: int
    ) -> SessionState:
        past = tables.histories[user]
        seen = np.zeros(tables.n_items, dtype=bool)
        seen[past] = True
        history = np.full(history_length, -1, dtype=np.int64)
        recent = past[::-1][:history_length]
        history[: len(recent)] = recent
        state = cls(user, rng, time_h, seen, history)
        state.update_genres(tables)
        return state

    def context(self) -> Context:
        return Context(user_id=self.user, step=self.page_index, time_h=self.time_h, watched=tuple(self.watched))

    def record_watch(self, item: int, tables: SessionTables) -> None:
        self.seen[item] = True
        self.watched.append(item)
        self.history[1:] = self.history[:-1].copy()
        self.history[0] = item
        self.update_genres(tables)

    def update_genres(self, tables: SessionTables) -> None:
        """Mean genre vector of the window, recomputed from its items: a running sum with subtraction drifts
        below 0 (e.g. -5.6e-18) and leaves the observation space."""
        valid = self.history[self.history >= 0]
        if len(valid) == 0:
            self.history_genres = np.zeros(tables.n_genres, dtype=np.float32)
        else:
            self.history_genres = tables.topics[valid].mean(axis=0).astype(np.float32)

    def apply_duplicate_rule(self, items: list[int], rule: str, tables: SessionTables) -> tuple[list[int], int, int]:
        """``items`` with repeated or already-watched slots replaced (``rule='replace'``) or as given (``'allow'``);
        returns ``(items, duplicates, watched)``."""
        seen = self.seen
        if rule == "allow":
            return items, len(items) - len(set(items)), sum(bool(seen[i]) for i in items)
        taken: set[int] = set()
        duplicates = watched = 0
        for slot, item in enumerate(items):
            if item in taken:
                duplicates += 1
            elif seen[item]:
                watched += 1
            else:
                taken.add(item)
                continue
            replacement = self._replacement(taken, tables.popularity_order)
            items[slot] = replacement
            taken.add(replacement)
        return items, duplicates, watched

    def _replacement(self, taken: set[int], order: np.ndarray) -> int:
        """The most popular item neither watched nor on the page (watched ones only if the catalogue is spent)."""
        seen, n = self.seen, len(order)
        pointer = self.pop_pointer
        while pointer < n and seen[order[pointer]]:
            pointer += 1
        self.pop_pointer = pointer
        for j in range(pointer, n):
            item = int(order[j])
            if not seen[item] and item not in taken:
                return item
        for item in order.tolist():
            if item not in taken:
                return item
        return int(order[0])  # page larger than the catalogue: a duplicate is unavoidable

    def get_state(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "rng": copy.deepcopy(self.rng.bit_generator.state),
            "time_h": self.time_h,
            "seen": np.flatnonzero(self.seen).tolist(),
            "history": self.history.tolist(),
            "watched": list(self.watched),
            "page_index": self.page_index,
            "pop_pointer": self.pop_pointer,
            "last_code": self.last_code,
            "last_rating": self.last_rating,
            "open": self.open,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], tables: SessionTables) -> SessionState:
        rng = np.random.default_rng()
        rng.bit_generator.state = copy.deepcopy(state["rng"])
        seen = np.zeros(tables.n_items, dtype=bool)
        seen[np.asarray(state["seen"], dtype=np.int64)] = True
        session = cls(
            user=int(state["user"]),
            rng=rng,
            time_h=float(state["time_h"]),
            seen=seen,
            history=np.asarray(state["history"], dtype=np.int64),
            watched=[int(i) for i in state["watched"]],
            page_index=int(state["page_index"]),
            pop_pointer=int(state["pop_pointer"]),
            last_code=int(state["last_code"]),
            last_rating=float(state["last_rating"]),
            open=bool(state["open"]),
        )
        session.update_genres(tables)
        return session


@dataclass
class Lane:
    """A stream of sessions, one after another: the single env, or one sub-env of the vector env."""

    rng: np.random.Generator
    """Every draw of the next session (user, child seeds) and the activation weights come from it."""
    weights: np.ndarray | None = None
    """Activation probability of each user (None until the lane's world starts)."""
    clock: float = 0.0
    started: int = 0
    """Sessions started since the world started (the first one starts without a social round)."""
    session: SessionState | None = None

    cumulative: np.ndarray | None = None
    """``cumsum(weights)``, for the draws."""

    def start_world(self, weights: np.ndarray) -> None:
        """A fresh world: these activation weights, the clock at 0, no session started yet."""
        self.weights = np.asarray(weights, dtype=np.float64)
        self.cumulative = np.cumsum(self.weights)
        self.clock = 0.0
        self.started = 0

    @property
    def user(self) -> int | None:
        """The user of the current session, open or just ended (None before the first)."""
        return None if self.session is None else self.session.user

    @property
    def busy_user(self) -> int | None:
        """The user of the open session (None when none is open)."""
        return self.session.user if self.session is not None and self.session.open else None

    def get_state(self) -> dict[str, Any]:
        return {
            "rng": copy.deepcopy(self.rng.bit_generator.state),
            "weights": None if self.weights is None else self.weights.tolist(),
            "clock": self.clock,
            "started": self.started,
            "session": None if self.session is None else self.session.get_state(),
        }

    def set_state(self, state: dict[str, Any], tables: SessionTables) -> None:
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])
        self.weights = None if state["weights"] is None else np.asarray(state["weights"], dtype=np.float64)
        self.cumulative = None if self.weights is None else np.cumsum(self.weights)
        self.clock = float(state["clock"])
        self.started = int(state["started"])
        self.session = None if state["session"] is None else SessionState.from_state(state["session"], tables)
