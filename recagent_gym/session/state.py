"""The state of one recommender session (:class:`RecommenderSession`), and of a stream of sessions one after another
(:class:`SessionStream`: the single env, or one sub-env of a vector env).

A session knows its user, what the user has seen (the dataset history and this session's watches), the last
``history_length`` watched items and their mean genre vector, the page count and the last response. The stream
keeps the generator every draw of the next session comes from, the activation weights, the clock, and the open
session. Both are plain data behind ``get_state`` / ``set_state``.

The page step runs on plain Python values (ints, lists, a ``bytearray`` of seen flags): numpy's per-call overhead
is larger than the work for a page of a few items. The arrays the observation reads (``history``,
``history_genres``) are rebuilt once per watch, not per step.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from recagent_gym.session.tables import SessionTables
from recagent_gym.users.protocol import Context

RESPONSE_CODES: tuple[str, ...] = ("start", "watch", "next", "search_watch", "search_next", "leave")
"""What a session's last page got (``last_code`` indexes it); the order of the ``last_response`` one-hot in the
observations of both envs."""
START, WATCH, NEXT, SEARCH_WATCH, SEARCH_NEXT, LEAVE = range(len(RESPONSE_CODES))


class RecommenderSession:
    """One user's recommender session, open or just ended (see the module docstring); the user model keeps its own
    per-session state apart (e.g. the LLM agent's patience)."""

    __slots__ = (
        "_pointer_floor",
        "_seen_flags",
        "history",
        "history_genres",
        "history_length",
        "last_code",
        "last_rating",
        "open",
        "page_index",
        "pop_pointer",
        "rng",
        "seen",
        "time_h",
        "user",
        "watched",
        "window",
    )

    def __init__(
        self,
        user: int,
        rng: np.random.Generator,
        time_h: float,
        *,
        seen_flags: bytearray,
        window: list[int],
        history_length: int,
        pointer_floor: int,
        arrays: tuple[np.ndarray, np.ndarray],
        watched: list[int] | None = None,
        page_index: int = 0,
        pop_pointer: int = 0,
        last_code: int = 0,
        last_rating: float = 0.0,
        open: bool = True,
    ) -> None:
        self.user = user
        self.rng = rng
        """The session's child generator, which the user model draws from."""
        self.time_h = time_h
        self._seen_flags = seen_flags
        self.seen: np.ndarray = np.frombuffer(seen_flags, dtype=bool)
        """``(n_items,)`` bool: items the user already watched (dataset history and this session); a view of the
        flags the page step reads."""
        self.history_length = history_length
        self.window = window
        """The last ``history_length`` watched items, most recent first (``history`` without the -1 pad)."""
        self.watched: list[int] = [] if watched is None else watched
        self.page_index = page_index
        self.pop_pointer = pop_pointer
        """Start of the popularity scan for replacements (items before it are all seen)."""
        self._pointer_floor = pointer_floor
        """Where the scan may start at the earliest: the user's dataset history covers everything before it."""
        self.last_code = last_code
        self.last_rating = last_rating
        self.open = open
        self.history, self.history_genres = arrays
        """``history``: ``(history_length,)`` int64, ``window`` padded with -1; ``history_genres``: ``(n_genres,)``
        float32, the window's mean genre vector. Both rebuilt on a watch, never written in place."""

    @classmethod
    def start(
        cls, user: int, rng: np.random.Generator, time_h: float, tables: SessionTables, history_length: int
    ) -> RecommenderSession:
        """A fresh session of ``user``: its opening state (seen flags, window, arrays) comes from ``tables``' per-user
        cache, built once per user (a session start is a large share of a short session's cost)."""
        opening = tables.opening(user, history_length)
        return cls(
            user,
            rng,
            time_h,
            seen_flags=bytearray(opening.seen),
            window=list(opening.window),
            history_length=history_length,
            pointer_floor=opening.first_unseen,
            arrays=(opening.history, opening.history_genres),
        )

    def fork(self, rng: np.random.Generator) -> RecommenderSession:
        """A copy of the session that draws from ``rng`` (an oracle's rollout of the rest of the session): its own
        seen flags, window and watches; the history arrays are shared (rebuilt on a watch, never written in place)."""
        return RecommenderSession(
            self.user,
            rng,
            self.time_h,
            seen_flags=bytearray(self._seen_flags),
            window=list(self.window),
            history_length=self.history_length,
            pointer_floor=self._pointer_floor,
            arrays=(self.history, self.history_genres),
            watched=list(self.watched),
            page_index=self.page_index,
            pop_pointer=self.pop_pointer,
            last_code=self.last_code,
            last_rating=self.last_rating,
            open=self.open,
        )

    def context(self) -> Context:
        return Context(user_id=self.user, step=self.page_index, time_h=self.time_h, watched=tuple(self.watched))

    def record_watch(self, item: int, tables: SessionTables) -> None:
        self._seen_flags[item] = 1
        self.watched.append(item)
        window = self.window
        window.insert(0, item)
        if len(window) > self.history_length:
            window.pop()
        self.history, self.history_genres = tables.window_arrays(window, self.history_length)

    @property
    def history_count(self) -> int:
        """Items in the window (it fills from the front)."""
        return len(self.window)

    def apply_duplicate_rule(self, items: list[int], rule: str, tables: SessionTables) -> tuple[list[int], int, int]:
        """``items`` with repeated or already-watched slots replaced (``rule='replace'``) or as given (``'allow'``);
        returns ``(items, duplicates, watched)``."""
        seen = self._seen_flags
        if rule == "allow":
            return items, len(items) - len(set(items)), sum(seen[i] for i in items)
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
            replacement = self._replacement(taken, tables.popularity_list)
            items[slot] = replacement
            taken.add(replacement)
        return items, duplicates, watched

    def _replacement(self, taken: set[int], order: list[int]) -> int:
        """The most popular item neither watched nor on the page (watched ones only if the catalogue is spent)."""
        seen, n = self._seen_flags, len(order)
        pointer = max(self.pop_pointer, self._pointer_floor)
        while pointer < n and seen[order[pointer]]:
            pointer += 1
        self.pop_pointer = pointer
        for j in range(pointer, n):
            item = order[j]
            if not seen[item] and item not in taken:
                return item
        for item in order:
            if item not in taken:
                return item
        return order[0]  # page larger than the catalogue: a duplicate is unavoidable

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
    def from_state(cls, state: dict[str, Any], tables: SessionTables) -> RecommenderSession:
        rng = np.random.default_rng()
        rng.bit_generator.state = copy.deepcopy(state["rng"])
        seen = np.zeros(tables.n_items, dtype=bool)
        seen[np.asarray(state["seen"], dtype=np.int64)] = True
        user, history = int(state["user"]), [int(i) for i in state["history"]]
        window = [i for i in history if i >= 0]
        return cls(
            user,
            rng,
            float(state["time_h"]),
            seen_flags=bytearray(seen.tobytes()),
            window=window,
            history_length=len(history),
            pointer_floor=tables.first_unseen(user),
            arrays=tables.window_arrays(window, len(history)),
            watched=[int(i) for i in state["watched"]],
            page_index=int(state["page_index"]),
            pop_pointer=int(state["pop_pointer"]),
            last_code=int(state["last_code"]),
            last_rating=float(state["last_rating"]),
            open=bool(state["open"]),
        )


@dataclass
class SessionStream:
    """A stream of sessions, one after another: the single env, or one sub-env of a vector env."""

    rng: np.random.Generator
    """Every draw of the next session (user, child seeds) and the activation weights come from it."""
    weights: np.ndarray | None = None
    """Activation probability of each user (None until the stream's world starts)."""
    clock: float = 0.0
    started: int = 0
    """Sessions started since the world started (the first one starts without a social round)."""
    session: RecommenderSession | None = None
    social_h: float = -np.inf
    """The clock of the latest social round of this stream's world (-inf: none yet). The streams of one world (a
    vector env's sub-envs) all record each round, and a world runs at most one round per clock time."""

    cumulative: np.ndarray | None = None
    """``cumsum(weights)``, for the draws."""

    def start_world(self, weights: np.ndarray) -> None:
        """A fresh world: these activation weights, the clock at 0, no session started yet."""
        self.weights = np.asarray(weights, dtype=np.float64)
        self.cumulative = np.cumsum(self.weights)
        self.clock = 0.0
        self.started = 0
        self.social_h = -np.inf

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
            "social_h": self.social_h,
            "session": None if self.session is None else self.session.get_state(),
        }

    def set_state(self, state: dict[str, Any], tables: SessionTables) -> None:
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])
        self.weights = None if state["weights"] is None else np.asarray(state["weights"], dtype=np.float64)
        self.cumulative = None if self.weights is None else np.cumsum(self.weights)
        self.clock = float(state["clock"])
        self.started = int(state["started"])
        self.social_h = float(state.get("social_h", -np.inf))  # states saved before it: no round recorded
        self.session = None if state["session"] is None else RecommenderSession.from_state(state["session"], tables)
