"""Load YAML configuration into the typed :class:`~recagent_gym.config.root.Config`, with ``key=value`` overrides."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from recagent_gym.config.base import ConfigError
from recagent_gym.config.root import Config

PACKAGED_CONFIG_DIR = Path(__file__).resolve().parent.parent.parent / "configs"


class _Yaml12Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false. YAML 1.1 would read ``cache_mode: off`` as the boolean False."""


_Yaml12Loader.yaml_implicit_resolvers = {
    key: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:bool"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def read_yaml(text: str) -> Any:
    """Parse YAML with 1.2 booleans (``on``/``off``/``yes``/``no`` stay strings)."""
    return yaml.load(text, Loader=_Yaml12Loader)


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for problem in err.errors():
        key = ".".join(str(part) for part in problem["loc"]) or "<root>"
        if problem["type"] == "extra_forbidden":
            lines.append(f"  {key}: unknown key")
        else:
            given = problem.get("input")
            lines.append(f"  {key}: {problem['msg']} (got {given!r})")
    return "\n".join(lines)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``a.b.c=value`` into a key path and a YAML-parsed value (``3`` is an int, ``[1,2]`` a list)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form key=value")
    key, raw = text.split("=", 1)
    path = [part for part in key.strip().split(".") if part]
    if not path:
        raise ConfigError(f"override {text!r} has an empty key")
    try:
        value = read_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {text!r}: value is not valid YAML ({exc})") from exc
    return path, value


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with each ``key=value`` override set at its dotted path."""
    result: dict[str, Any] = _deep_copy(data)
    for text in overrides:
        path, value = parse_override(text)
        node = result
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {text!r}: {part!r} is not a section")
            node = child
        node[path[-1]] = value
    return result


def _deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def config_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Config:
    """Validate a plain mapping into a :class:`Config`, raising :class:`ConfigError` naming ``source``."""
    try:
        return Config.model_validate(dict(data))
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> Config:
    """Load a YAML file (or the defaults when ``path`` is None) and apply ``key=value`` overrides.

    A bare name such as ``"quickstart"`` is looked up in the project's ``configs/`` folder.
    """
    data: dict[str, Any] = {}
    source = "<defaults>"
    if path is not None:
        file = Path(path)
        if not file.exists() and not file.suffix:
            candidate = PACKAGED_CONFIG_DIR / f"{path}.yaml"
            if candidate.exists():
                file = candidate
        if not file.is_file():
            raise ConfigError(f"configuration file not found: {file}")
        source = str(file)
        try:
            loaded = read_yaml(file.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source} is not valid YAML: {exc}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{source}: the top level must be a mapping of sections, got {type(loaded).__name__}")
        data = loaded
    overrides = list(overrides)
    if overrides:
        data = apply_overrides(data, overrides)
        source = f"{source} with overrides {overrides}"
    return config_from_dict(data, source)


def dump_config(config: Config) -> str:
    """The configuration as YAML, with secrets redacted (safe to log or save beside results)."""
    return yaml.safe_dump(config.redacted(), sort_keys=False)
