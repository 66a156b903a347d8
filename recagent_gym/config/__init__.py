"""Typed configuration: one section per component, loaded from YAML with ``--set key=value`` overrides.

Component sections (``recagent_gym/<pkg>/config.py``) import :mod:`recagent_gym.config.base`, and the root
:class:`Config` imports every section, so the root and the loader are imported lazily here to keep that acyclic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from recagent_gym.config.base import ConfigError, Section

if TYPE_CHECKING:
    from recagent_gym.config.loader import apply_overrides, config_from_dict, dump_config, load_config
    from recagent_gym.config.root import Config

_LAZY = {
    "Config": "recagent_gym.config.root",
    "apply_overrides": "recagent_gym.config.loader",
    "config_from_dict": "recagent_gym.config.loader",
    "dump_config": "recagent_gym.config.loader",
    "load_config": "recagent_gym.config.loader",
}

__all__ = ["Config", "ConfigError", "Section", "apply_overrides", "config_from_dict", "dump_config", "load_config"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'recagent_gym.config' has no attribute {name!r}")
