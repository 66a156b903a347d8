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

from pydantic import BaseModel, ConfigDict

from recagent_gym.errors import RecAgentError


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


class ConfigError(RecAgentError, ValueError):
    """A configuration file or override is malformed; the message names the key and the source."""

    label = "configuration error"
