"""Helpers shared by the wrappers: pass state, ``close`` and cache hints through to the wrapped model."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
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


@contextlib.contextmanager
def prefix_priority(model: object, priority: int) -> Iterator[None]:
    """Calls made inside keep their prompt prefixes at ``priority`` in the first model of the wrapper stack that caches
    prefixes (the embedded backend, :meth:`~recagent_gym.llm.embedded.EmbeddedLLM.prefix_priority`); a no-op for
    other backends."""
    target: object | None = model
    while target is not None and not hasattr(target, "prefix_priority"):
        target = getattr(target, "inner", None)
    if target is None:
        yield
        return
    with target.prefix_priority(priority):  # type: ignore[attr-defined]
        yield
