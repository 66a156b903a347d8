"""One field of a profile given as plain data (YAML, CSV, an LLM's parsed reply), checked and normalised; each
raises ``ValueError`` naming the key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from recagent_gym.data.fields import split_list
from recagent_gym.data.schema import BEHAVIOUR_FEATURES


def text_field(value: Any, key: str, *, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected text, got {value!r}")
    value = value.strip()
    if required and not value:
        raise ValueError(f"{key}: must not be empty")
    return value


def int_field(value: Any, key: str, lo: int, hi: int | None) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise ValueError(f"{key}: {value} is outside {lo}..{hi if hi is not None else ''}")
    return int(value)


def unit_field(value: Any, key: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key}: expected a number in [0, 1], got {value!r}") from None
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{key}: {number} is outside [0, 1]")
    return number


def text_list_field(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return split_list(value)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise ValueError(f"{key}: expected a list of texts or one text separated by ';', got {value!r}")


def features_field(value: Any) -> tuple[str, ...]:
    known = {f.lower(): f for f in BEHAVIOUR_FEATURES}
    names = text_list_field(value, "features")
    unknown = [n for n in names if n.lower() not in known]
    if unknown:
        raise ValueError(f"features: unknown {unknown} (known: {', '.join(BEHAVIOUR_FEATURES)})")
    chosen = {known[n.lower()] for n in names}
    return tuple(f for f in BEHAVIOUR_FEATURES if f in chosen)
