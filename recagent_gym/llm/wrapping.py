"""Helpers shared by the wrappers: pass state and ``close`` on to the wrapped model (the prefix-cache hint is
:func:`~recagent_gym.llm.protocol.prefix_hint`)."""

from __future__ import annotations

from typing import Any


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
