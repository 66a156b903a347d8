"""Base class of every typed configuration section, and the configuration's error.

Each component defines its own section (``recagent_gym/<pkg>/config.py``) on this base; the root
:class:`~recagent_gym.runs.config.root.Config` assembles them. This module sits outside the ``config`` package, and
imports nothing of the project but :mod:`recagent_gym.errors`, so that a section can be defined without importing
the assembler that imports every section (no import cycle).

Each section is a pydantic model whose attribute docstrings are its field documentation. Unknown keys, wrong types
and out-of-range values are rejected; :func:`recagent_gym.runs.config.load_config` turns the rejection into a
:class:`ConfigError` that names the key and the file.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from recagent_gym.errors import RecAgentError

SEED_LIMIT = 2**32
"""Seeds are below this (numpy's legacy and SB3's seeding refuse larger ones) and not negative."""


def is_seed_key(name: str) -> bool:
    """Whether a setting named ``name`` is a seed or a list of seeds (``seed``, ``split_seed``, ``seeds``, ...)."""
    return name in ("seed", "seeds") or name.endswith(("_seed", "_seeds"))


def check_seed(value: int, what: str) -> int:
    """``value`` if it is a valid seed (``0 <= value < 2**32``); a :class:`ValueError` naming ``what`` if not."""
    if not 0 <= value < SEED_LIMIT:
        raise ValueError(f"{what} must be a whole number from 0 to {SEED_LIMIT - 1}, got {value}")
    return value


class Section(BaseModel):
    """A typed, documented, strict block of configuration.

    Strict: ``true`` is not the integer 1 and ``1`` is not a boolean (``simulation.rounds=true`` is an error, not one
    round); integers are still accepted where a float is expected. No setting is NaN or infinite (``.nan``, ``.inf``
    and ``1e999`` would pass range checks such as ``gt=0`` or none at all, and spread silently).
    """

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        validate_assignment=True,
        use_attribute_docstrings=True,
        frozen=False,
    )

    @field_validator("*")
    @classmethod
    def _seeds_in_range(cls, value: Any, info: ValidationInfo) -> Any:
        """Every seed of every section, however spelled (``-1``, ``0x100000000``), before any work is done."""
        name = info.field_name or ""
        if is_seed_key(name):
            for seed in value if isinstance(value, list | tuple) else [value]:
                if isinstance(seed, int) and not isinstance(seed, bool):
                    check_seed(seed, "a seed")
        return value


class ConfigError(RecAgentError, ValueError):
    """A configuration file or override is malformed; the message names the key and the source."""

    label = "configuration error"
