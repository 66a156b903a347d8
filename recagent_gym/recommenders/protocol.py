"""Everything that recommends answers stable-baselines3's ``predict`` call, so one evaluation loop serves all."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Recommender(Protocol):
    """SB3's ``predict(observation, state, episode_start, deterministic) -> (action, state)``."""

    def predict(
        self,
        observation: Any,
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]: ...
