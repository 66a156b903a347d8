"""The numeric, bounded observation of a session (the env declares its space; the simulator's recommender reads it).

:func:`observe` builds one session's; :class:`ObservationBatch` keeps N streams' as ``(N, ...)`` arrays and rewrites
a row only where the stream changed (a new session, a watch), so a vector step costs a few numpy calls for all streams.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recagent_gym.session.state import RESPONSE_CODES, RecommenderSession
from recagent_gym.session.tables import SessionTables

_ONE_HOT = np.eye(len(RESPONSE_CODES), dtype=np.float32)


def observe(session: RecommenderSession, tables: SessionTables, max_pages: int) -> dict[str, np.ndarray]:
    """``user_id``, ``user_features``, ``history``, ``history_genres``, ``page``, ``last_response``, ``last_rating``
    (see :class:`~recagent_gym.envs.recagent_env.RecAgentEnv` for the space); fresh arrays the caller may keep."""
    return {
        "user_id": np.array([session.user], dtype=np.int64),
        "user_features": tables.user_features[session.user].copy(),
        "history": session.history.copy(),
        "history_genres": session.history_genres.copy(),
        "page": np.array([min(session.page_index / max_pages, 1.0)], dtype=np.float32),
        "last_response": _ONE_HOT[session.last_code].copy(),
        "last_rating": np.array([session.last_rating], dtype=np.float32),
    }


class ObservationBatch:
    """The observations of ``n`` streams, row ``i`` being :func:`observe` of stream ``i``'s session."""

    def __init__(self, n: int, tables: SessionTables, history_length: int, max_pages: int) -> None:
        self.tables, self.max_pages = tables, max_pages
        self.arrays: dict[str, np.ndarray] = {
            "user_id": np.zeros((n, 1), dtype=np.int64),
            "user_features": np.zeros((n, tables.user_features.shape[1]), dtype=np.float32),
            "history": np.full((n, history_length), -1, dtype=np.int64),
            "history_genres": np.zeros((n, tables.n_genres), dtype=np.float32),
            "page": np.zeros((n, 1), dtype=np.float32),
            "last_response": np.zeros((n, len(RESPONSE_CODES)), dtype=np.float32),
            "last_rating": np.zeros((n, 1), dtype=np.float32),
        }
        self._rows = np.arange(n)
        # What each row was last written from. Holding the objects keeps their ids unique: a session's history
        # arrays are replaced on a watch, never written in place, so identity tells what changed.
        self._sessions: list[RecommenderSession | None] = [None] * n
        self._histories: list[np.ndarray | None] = [None] * n

    def update(self, sessions: Sequence[RecommenderSession]) -> None:
        """Bring every row up to date with ``sessions`` (one per stream)."""
        a = self.arrays
        for i, s in enumerate(sessions):
            if s is not self._sessions[i]:
                self._sessions[i] = s
                a["user_id"][i, 0] = s.user
                a["user_features"][i] = self.tables.user_features[s.user]
            if s.history is not self._histories[i]:
                self._histories[i] = s.history
                a["history"][i] = s.history
                a["history_genres"][i] = s.history_genres
        max_pages = self.max_pages
        a["page"][:, 0] = [min(s.page_index / max_pages, 1.0) for s in sessions]
        last = a["last_response"]
        last.fill(0.0)
        last[self._rows, [s.last_code for s in sessions]] = 1.0
        a["last_rating"][:, 0] = [s.last_rating for s in sessions]

    def batch(self) -> dict[str, np.ndarray]:
        """Copies of the ``(n, ...)`` arrays (the caller may keep them)."""
        return {key: array.copy() for key, array in self.arrays.items()}

    def row(self, i: int) -> dict[str, np.ndarray]:
        """Copies of row ``i`` (:func:`observe` of stream ``i``)."""
        return {key: array[i].copy() for key, array in self.arrays.items()}
