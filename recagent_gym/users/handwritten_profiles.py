"""Handwritten profiles, the paper's second method: a YAML or CSV file (RecAgent's user columns accepted)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from recagent_gym.data.reader import BadRows, read_table
from recagent_gym.data.schema import DataError
from recagent_gym.users.profiles import Profile


def load_profiles(path: str | Path) -> list[Profile]:
    """Handwritten profiles from YAML (a list of mappings, or ``{profiles: [...]}``) or CSV (RecAgent's user
    columns ``id,name,gender,age,traits,status,interest,feature``). ``user_id``/``id`` defaults to the position;
    errors name the file, the entry (and its line) and the key."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such profiles file")
    if path.suffix.lower() in (".yaml", ".yml"):
        entries = _yaml_entries(path)
    elif path.suffix.lower() == ".csv":
        entries = _csv_entries(path)
    else:
        raise DataError(f"{path}: profiles must be a .yaml/.yml or .csv file")
    profiles: list[Profile] = []
    seen: dict[int, int] = {}
    for index, (line, entry) in enumerate(entries):
        where = f"{path}, profile {index + 1} (line {line})"
        if not isinstance(entry, Mapping):
            raise DataError(f"{where}: expected a mapping of keys to values, got {type(entry).__name__}")
        data = {"source": "handwritten", **entry}
        if "user_id" not in data and "id" not in data:
            data["user_id"] = index
        try:
            profile = Profile.from_dict(data)
        except ValueError as exc:
            raise DataError(f"{where}: {exc}") from exc
        if profile.user_id in seen:
            raise DataError(f"{where}: duplicate user_id {profile.user_id} (first in profile {seen[profile.user_id]})")
        seen[profile.user_id] = index + 1
        profiles.append(profile)
    return profiles


def _yaml_entries(path: Path) -> list[tuple[int, Any]]:
    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataError(f"{path}: not valid YAML ({exc})") from exc
    if isinstance(data, Mapping) and set(data) == {"profiles"}:
        data = data["profiles"]
        node = next(v for k, v in node.value if k.value == "profiles")
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of profiles (or a mapping with the single key 'profiles')")
    return [(item.start_mark.line + 1, entry) for item, entry in zip(node.value, data, strict=True)]


def _csv_entries(path: Path) -> list[tuple[int, dict[str, str]]]:
    table = read_table(path, ("name",), sep=",", header=True, quoted=True, bad=BadRows("error"))
    rows = []
    for r, line in enumerate(table.lines):
        entry = {k: v[r] for k, v in table.columns.items() if v[r].strip() or k in ("name",)}
        if "age" in entry:
            entry["age"] = entry["age"].strip()
        rows.append((int(line), entry))
    return rows
