"""Typed configuration: the root :class:`Config` assembles one section per component, loaded from YAML with
``--set key=value`` overrides.

Each component owns its section (``recagent_gym/<pkg>/config.py``, built on :mod:`recagent_gym.settings_section`)
and takes only that section; this package assembles them (:mod:`~recagent_gym.runs.config.root`), loads them
(:mod:`~recagent_gym.runs.config.loader`) and ships the named configurations (:mod:`~recagent_gym.runs.config.named`).
"""

from __future__ import annotations

from recagent_gym.runs.config.loader import apply_overrides, config_from_dict, dump_config, load_config
from recagent_gym.runs.config.root import Config
from recagent_gym.settings_section import ConfigError, Section

__all__ = ["Config", "ConfigError", "Section", "apply_overrides", "config_from_dict", "dump_config", "load_config"]
