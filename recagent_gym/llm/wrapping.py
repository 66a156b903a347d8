"""Helpers shared by the wrappers: pass state, ``close`` and the prefix-cache hint on to the wrapped model."""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import Any

from recagent_gym.llm.protocol import PrefixCaching


def state_of(model: object) -> Any:
    getter = getattr(model, "get_state", None)
    return getter() if callable(getter) else None


def set_state_of(model: object, state: Any) -> None:
    setter = getattr(model, "set_state", None)
    if state is not None and callable(setter):
        setter(state)


def close_model(model: object) -> None:
    closer = getattr(model, "close", None)
    if callable(closer):
        closer()


def prefix_hint(model: object, priority: int) -> AbstractContextManager[None]:
    """``model.prefix_priority(priority)`` where ``model`` offers it (:class:`~recagent_gym.llm.protocol.
    PrefixCaching`: the embedded backend and every wrapper), else a no-op. One level only: wrappers forward it
    themselves."""
    if isinstance(model, PrefixCaching):
        return model.prefix_priority(priority)
    return contextlib.nullcontext()
