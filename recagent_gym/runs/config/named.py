"""The named configurations shipped inside the package (``recagent_gym/configs/*.yaml``).

``--config quickstart`` names one of them; anything else is a path to a YAML file. They are package data, read
through :mod:`importlib.resources`, so they work from an installed wheel as well as from a checkout.
"""

from __future__ import annotations

import difflib
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from recagent_gym.settings_section import ConfigError

SUFFIX = ".yaml"


def _folder() -> Traversable:
    return resources.files("recagent_gym") / "configs"


def config_names() -> list[str]:
    """The names of the shipped configurations, sorted."""
    return sorted(entry.name[: -len(SUFFIX)] for entry in _folder().iterdir() if entry.name.endswith(SUFFIX))


def find_config(name_or_path: str | Path) -> Path | Traversable:
    """An existing YAML file, or the shipped configuration of that name; otherwise a :class:`ConfigError`.

    A name that matches nothing gets the available names and the nearest one in its message.
    """
    path = Path(name_or_path)
    if path.is_file():
        return path
    text = str(name_or_path)
    names = config_names()
    if not path.suffix and path.name == text:  # a bare name, not a path
        if text in names:
            return _folder() / f"{text}{SUFFIX}"
        what = f"unknown configuration {text!r}"
    else:
        what = f"configuration file not found: {text}"
    return _raise(what, path.stem if path.suffix in (SUFFIX, ".yml") else path.name, names)


def _raise(what: str, stem: str, names: list[str]) -> Path:
    nearest = difflib.get_close_matches(stem, names, n=1, cutoff=0.6)
    hint = f"; did you mean {nearest[0]!r}?" if nearest else ""
    raise ConfigError(f"{what}{hint} (shipped configurations: {', '.join(names)}; or give a path to a YAML file)")
