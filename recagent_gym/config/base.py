"""Base class of every typed configuration section.

Each section is a pydantic model whose attribute docstrings are its field documentation. Unknown keys, wrong types
and out-of-range values are rejected; :func:`recagent_gym.config.load_config` turns the rejection into a
:class:`ConfigError` that names the key and the file.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A typed, documented, strict block of configuration."""

    model_config = ConfigDict(
        extra="forbid",
        validate_assignment=True,
        use_attribute_docstrings=True,
        frozen=False,
    )


class ConfigError(ValueError):
    """A configuration file or override is malformed; the message names the key and the source."""
