"""The numeric, bounded observation of a session (the env declares its space; the simulator's recommender reads it)."""

from __future__ import annotations

import numpy as np

from recagent_gym.session.state import RESPONSE_CODES, SessionState
from recagent_gym.session.tables import SessionTables


def observe(session: SessionState, tables: SessionTables, max_pages: int) -> dict[str, np.ndarray]:
    """``user_id``, ``user_features``, ``history``, ``history_genres``, ``page``, ``last_response``, ``last_rating``
    (see :class:`~recagent_gym.envs.recagent_env.RecAgentEnv` for the space)."""
    last = np.zeros(len(RESPONSE_CODES), dtype=np.float32)
    last[session.last_code] = 1.0
    return {
        "user_id": np.array([session.user], dtype=np.int64),
        "user_features": tables.user_features[session.user].copy(),
        "history": session.history.copy(),
        "history_genres": session.history_genres.copy(),
        "page": np.array([min(session.page_index / max_pages, 1.0)], dtype=np.float32),
        "last_response": last,
        "last_rating": np.array([session.last_rating], dtype=np.float32),
    }
