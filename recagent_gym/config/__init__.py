"""Typed configuration: one section per component, loaded from YAML with ``--set key=value`` overrides."""

from recagent_gym.config.base import ConfigError, Section
from recagent_gym.config.loader import apply_overrides, config_from_dict, dump_config, load_config
from recagent_gym.config.root import Config

__all__ = ["Config", "ConfigError", "Section", "apply_overrides", "config_from_dict", "dump_config", "load_config"]
