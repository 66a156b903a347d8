"""A batch of prompts as concurrent requests: each distinct prompt sent once, the answers back in prompt order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K")


def spread_answers(keys: Sequence[K], answers: dict[K, T], copy: Callable[[T], T]) -> list[T]:
    """One answer per key, in order. Identical prompts of one batch (the same post compressed into several friends'
    memories) were sent once: with per-prompt seeds a server gives them the same answer anyway. Repeats get
    ``copy(answer)`` (the answer with zero usage, since they cost no request)."""
    out: list[T] = []
    seen: set[K] = set()
    for key in keys:
        out.append(answers[key] if key not in seen else copy(answers[key]))
        seen.add(key)
    return out


async def gather_in_order(tasks: Sequence[Awaitable[T]]) -> list[T]:
    """All results in order; on the first failure the other requests are cancelled and the failure raised."""
    futures = [asyncio.ensure_future(task) for task in tasks]
    try:
        return list(await asyncio.gather(*futures))
    except BaseException:
        for future in futures:
            future.cancel()
        await asyncio.gather(*futures, return_exceptions=True)
        raise
