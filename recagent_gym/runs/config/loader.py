"""Load YAML configuration into the typed :class:`~recagent_gym.runs.config.root.Config`, with ``key=value``
overrides."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from yaml.constructor import ConstructorError
from yaml.nodes import Node

from recagent_gym.errors import RecAgentError
from recagent_gym.runs.config.bounded_yaml import MAX_DEPTH, BoundedLoader, YamlLimitError
from recagent_gym.runs.config.named import find_config
from recagent_gym.runs.config.redact import redact_override, redact_value, secret_paths
from recagent_gym.runs.config.root import Config
from recagent_gym.settings_section import ConfigError

SECRETS = secret_paths(Config)
"""Configuration keys holding secrets: their values never appear in a message."""


class _Yaml12Loader(BoundedLoader):
    """YAML 1.2 booleans and floats: only true/false are booleans (YAML 1.1 would read ``cache_mode: off`` as the
    boolean False), and ``3e-4`` is a float (YAML 1.1 wants ``3.0e-4`` and would give the string "3e-4"); bounded
    in depth and size (:class:`~recagent_gym.runs.config.bounded_yaml.BoundedLoader`)."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        """A value its tag cannot build (``2001-02-30``, ``!!int x``, a bare ``!!int``, an integer of 5,000 digits)
        makes PyYAML's constructors raise plain Python errors: each becomes a YAML error naming the line."""
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, LookupError, AttributeError, OverflowError) as exc:
            problem = f"cannot read this {node.tag.rsplit(':', 1)[-1]} value ({exc})"
            raise ConstructorError(None, None, problem, node.start_mark) from None


_Yaml12Loader.yaml_implicit_resolvers = {
    key: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:bool"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Yaml12Loader.add_implicit_resolver(  # after the int resolver, so "3" stays an int
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"),
    list("-+.0123456789"),
)


def read_yaml(text: str) -> Any:
    """Parse YAML with 1.2 booleans (``on``/``off``/``yes``/``no`` stay strings), bounded in depth and size; every
    failure is a :class:`yaml.YAMLError`."""
    return yaml.load(text, Loader=_Yaml12Loader)


def _format_validation_error(err: ValidationError, source: str) -> str:
    """One line per problem, naming the key; secret values are masked (also inside a mapping given as the value)."""
    lines = [f"invalid configuration in {source}:"]
    for problem in err.errors():
        loc = tuple(str(part) for part in problem["loc"])
        key = ".".join(loc) or "<root>"
        if problem["type"] == "extra_forbidden":
            lines.append(f"  {key}: unknown key")
        elif problem["type"] == "value_error":  # a section's own check: its message says what is wrong
            lines.append(f"  {key}: {problem['msg'].removeprefix('Value error, ')}")
        else:
            given = redact_value(problem.get("input"), loc, SECRETS)
            lines.append(f"  {key}: {problem['msg']} (got {given!r})")
    return "\n".join(lines)


def describe_overrides(overrides: Iterable[str]) -> str:
    """The overrides for a message, secret values masked."""
    return str([redact_override(text, SECRETS) for text in overrides])


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``a.b.c=value`` into a key path and a YAML-parsed value (``3`` is an int, ``[1,2]`` a list)."""
    shown = redact_override(text, SECRETS)
    if "=" not in text:
        raise ConfigError(f"override {shown!r} is not of the form key=value")
    key, raw = text.split("=", 1)
    path = [part for part in key.strip().split(".") if part]
    if not path:
        raise ConfigError(f"override {shown!r} has an empty key")
    if len(path) > MAX_DEPTH:
        raise ConfigError(f"override key {key[:60]!r}...: nested deeper than {MAX_DEPTH} levels")
    try:
        value = read_yaml(raw) if raw.strip() else ""
    except YamlLimitError as exc:
        raise ConfigError(f"override {'.'.join(path)}: {exc}") from None
    except yaml.YAMLError as exc:
        detail = "" if shown != text else f" ({exc})"  # the parser's message quotes the value
        raise ConfigError(f"override {shown!r}: value is not valid YAML{detail}") from None
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
                raise ConfigError(f"override {redact_override(text, SECRETS)!r}: {part!r} is not a section")
            node = child
        node[path[-1]] = value
    return result


def _deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def config_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Config:
    """Validate a plain mapping into a :class:`Config`, raising :class:`ConfigError` naming ``source``."""
    try:
        config = Config.model_validate(dict(data))
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None
    _check_setting_files(config, source)
    return config


def _check_setting_files(config: Config, source: str) -> None:
    """Files that hold settings rather than data (``user.prior_weights``, ``user.recsim_fitted``) are checked whole
    with the configuration, so that a missing or malformed one stops a command before it creates anything. The
    sections cannot do it: they import nothing but the base (``tests/test_config_assembly.py``), and the reader needs
    the data layer."""
    if config.user.recsim_fitted is not None:
        from recagent_gym.users.recsim_features import apply_fit

        try:
            apply_fit(config.user)  # the fit's file read and its values validated as the user section's
        except RecAgentError as exc:
            raise ConfigError(f"invalid configuration in {source}:\n  {exc}") from None
    path = config.user.prior_weights
    if path is None:
        return
    from recagent_gym.users.prior_default import AUTO, BUNDLED, BUNDLED_PRIOR
    from recagent_gym.users.prior_file import is_fit_file, read_prior_file

    shipped = path in (AUTO, BUNDLED)
    if shipped:  # the shipped fit; whether it applies is known with the dataset and model
        path = str(BUNDLED_PRIOR)
    try:
        checked = read_prior_file(path)
    except RecAgentError as exc:
        raise ConfigError(f"invalid configuration in {source}:\n  user.prior_weights: {exc}") from None
    if is_fit_file(path) or (shipped and "prior_fit" not in config.user.model_fields_set):
        return  # a fit file's one fit (``parts``) is used whatever user.prior_fit says (resolve_prior)
    if config.user.prior_fit not in checked.fits:
        raise ConfigError(
            f"invalid configuration in {source}:\n  user.prior_fit: {path} has no {config.user.prior_fit!r} fit "
            f"(it holds {sorted(checked.fits)}; re-run `recagent-gym calibrate` with the LLM, or set "
            "user.prior_fit=both)"
        )


def read_config_file(path: str | Path) -> tuple[dict[str, Any], str]:
    """The mapping in a YAML file or shipped configuration (see :func:`~recagent_gym.runs.config.named.find_config`),
    and the source to name in messages."""
    file: Path | Traversable = find_config(path)
    source = str(file)
    try:
        loaded = read_yaml(file.read_text(encoding="utf-8"))
    except YamlLimitError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source} is not valid YAML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read ({exc})") from exc
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, got {type(loaded).__name__}")
    return loaded, source


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> Config:
    """Load a YAML file (or the defaults when ``path`` is None) and apply ``key=value`` overrides.

    A bare name such as ``"quickstart"`` is one of the configurations shipped in the package (``recagent_gym/configs``).
    """
    data: dict[str, Any] = {}
    source = "<defaults>"
    if path is not None:
        data, source = read_config_file(path)
    overrides = list(overrides)
    if overrides:
        data = apply_overrides(data, overrides)
        source = f"{source} with overrides {describe_overrides(overrides)}"
    return config_from_dict(data, source)


def dump_config(config: Config) -> str:
    """The configuration as YAML, with secrets redacted (safe to log or save beside results)."""
    return yaml.safe_dump(config.redacted(), sort_keys=False)
