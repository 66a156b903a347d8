"""The distilled model on disk, as plain data: ``weights.npz`` (arrays, loaded with ``allow_pickle=False``) and
``model.json`` (dataset, logs hash, settings, rule parameters, metrics). No pickle anywhere.

Both files are checked once, on load, against what the readers use (:func:`check_meta`, :func:`check_arrays`):
a damaged, cut-short or foreign file, a missing field or table, or a table of the wrong shape is a one-line
:class:`~recagent_gym.users.distilled.errors.DistillError` naming the file, never an error deep in a reader.
"""

from __future__ import annotations

import json
import math
import tokenize
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.users.distilled.errors import DistillError

FORMAT = 1
WEIGHTS = "weights.npz"
META = "model.json"
TABLES = ("user_table", "item_table", "item_offset", "threshold", "search_interest")
RULE = ("patience", "temperature", "search_heard_probability", "noise_std", "rating_intercept", "rating_slope")
"""The decision rule's numbers in ``model.json``'s ``rule``."""
_NPZ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, NotImplementedError,
               RuntimeError, MemoryError, SyntaxError, tokenize.TokenError)  # fmt: skip
"""What reading a damaged ``.npz`` raises (zip and npy headers, compressed data, CRCs; a header may declare a huge
array or an encrypted member; numpy parses the npy header as a Python literal, hence the tokenizer's errors)."""


@dataclass
class Artefact:
    arrays: dict[str, np.ndarray]
    meta: dict[str, Any]

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(folder / WEIGHTS, **self.arrays)
        (folder / META).write_text(json.dumps(self.meta, indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, folder: str | Path) -> Artefact:
        folder = Path(folder)
        if not (folder / WEIGHTS).is_file() or not (folder / META).is_file():
            raise DistillError(f"{folder}: not a distilled user model (needs {WEIGHTS} and {META})")
        meta = check_meta(folder / META, _read_json(folder / META))
        try:
            with np.load(folder / WEIGHTS, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except _NPZ_ERRORS as exc:
            raise DistillError(f"{folder / WEIGHTS}: not a readable weights file ({_reason(exc)})") from exc
        check_arrays(folder / WEIGHTS, arrays, meta)
        return cls(arrays, meta)


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:300]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise DistillError(f"{path}: not a readable model.json ({_reason(exc)})") from exc


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def check_meta(path: Path, meta: Any) -> dict[str, Any]:
    """``model.json`` as the readers use it: format, dataset size, the rule's numbers, the users' queries, ids and
    held-out users."""
    if not isinstance(meta, dict):
        raise DistillError(f"{path}: must hold a JSON object, not {type(meta).__name__}")
    if meta.get("format") != FORMAT:
        raise DistillError(f"{path}: distilled model format {meta.get('format')!r}, this version reads {FORMAT}")
    problems = [k for k in ("n_users", "n_items") if not _count(meta.get(k))]
    problems += [] if isinstance(meta.get("dataset"), str) else ["dataset"]
    rule = meta.get("rule")
    if not isinstance(rule, dict):
        problems.append("rule")
    else:
        problems += [f"rule.{k}" for k in RULE if not _number(rule.get(k))]
        if not problems and (rule["temperature"] <= 0 or rule["patience"] <= 0 or rule["noise_std"] < 0):
            problems.append("rule (temperature and patience > 0, noise_std >= 0)")
    if problems:
        raise DistillError(f"{path}: missing or invalid {', '.join(problems)}")
    n_users = meta["n_users"]
    lists = {"interest_queries": str, "user_raw_ids": str, "test_users": int, "train_users": int}
    for key, kind in lists.items():
        value = meta.get(key)
        if value is None and key in ("user_raw_ids", "train_users"):
            continue  # older artefacts: no raw ids (the very dataset only); train users are only reported
        if not isinstance(value, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
            raise DistillError(f"{path}: {key!r} must be a list of {kind.__name__}")
        if key in ("interest_queries", "user_raw_ids") and len(value) != n_users:
            raise DistillError(f"{path}: {key!r} has {len(value)} entries for {n_users} users")
        if kind is int and any(not 0 <= v < n_users for v in value):
            raise DistillError(f"{path}: {key!r} holds a user outside 0..{n_users - 1}")
    return meta


def check_arrays(path: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """The tables of ``weights.npz``: present, real numbers, finite, shaped for ``meta``'s users and items."""
    missing = [k for k in TABLES if k not in arrays]
    if missing:
        raise DistillError(f"{path} lacks {', '.join(missing)}")
    n_users, n_items = meta["n_users"], meta["n_items"]
    users, items = arrays["user_table"], arrays["item_table"]
    expected = {
        "user_table": (n_users, users.shape[-1] if users.ndim == 2 else -1),
        "item_table": (n_items, users.shape[-1] if users.ndim == 2 else -1),
        "item_offset": (n_items,),
        "threshold": (n_users,),
        "search_interest": (n_users,),
    }
    for key, shape in expected.items():
        array = arrays[key]
        if array.dtype.kind not in "fiu":
            raise DistillError(f"{path}: {key} holds {array.dtype}, expected numbers")
        if array.shape != shape:
            raise DistillError(f"{path}: {key} has shape {array.shape}, expected {shape} ({n_users} users, {n_items} "
                               "items in model.json)")  # fmt: skip
        if not np.isfinite(array).all():
            raise DistillError(f"{path}: {key} holds NaN or infinite values")
    if items.shape[-1] == 0 or not ((arrays["search_interest"] >= 0) & (arrays["search_interest"] <= 1)).all():
        raise DistillError(f"{path}: empty item table or a search probability outside [0, 1]")
