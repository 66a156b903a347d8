"""The schema of a decision-log part (``part-*.parquet``) and of ``collect.json``, checked once where they are read.

A part is read whole with pyarrow and checked before any of it reaches the distillation or the fidelity report:
the columns a decision row has (:func:`recagent_gym.runs.distill.sessions.decision_row`), their kinds (integer,
float, string, boolean, list of integers or floats), no missing values where the code needs one, the actions
known, the per-item lists as long as ``shown``, and the watched item's position on its page. Columns are then cast
to one type per kind (``int64``, ``float64``, ``list<float64>``, ...), so logs whose per-item scores are all
missing (the ``direct`` decision strategy of remote backends logs none: Parquet stores them as ``list<null>``)
read back as NaN like any other missing score. A file that is not Parquet, is cut short, or has other columns is
a :class:`~recagent_gym.users.distilled.errors.DistillError` naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from recagent_gym.users.distilled.errors import DistillError

INT, FLOAT, STR, BOOL, INTS, FLOATS = "int", "float", "str", "bool", "list<int>", "list<float>"
COLUMNS: dict[str, str] = {
    "session_id": INT, "user_id": INT, "source": STR, "page_index": INT, "page_source": STR, "watched_count": INT,
    "patience_before": FLOAT, "patience_left": FLOAT, "items": INTS, "shown": INTS, "permutation": INTS,
    "scores": FLOATS, "llm_scores": FLOATS, "embedding_scores": FLOATS, "threshold": FLOAT, "p_watch": FLOAT,
    "action": STR, "item": INT, "position": INT, "rating": FLOAT, "query": STR, "fallback": BOOL, "reward": FLOAT,
}  # fmt: skip
"""Every column of a decision row and its kind."""
OPTIONAL = frozenset({"watched_count", "patience_left", "permutation", "llm_scores", "embedding_scores", "threshold",
                      "fallback"})  # fmt: skip
"""Columns no reader needs (checked when present)."""
ALIGNED = ("items", "scores", "permutation", "llm_scores", "embedding_scores")
"""Per-item lists, one entry per ``shown`` item."""
ACTIONS = frozenset({"watch", "next", "search", "leave"})
_TARGET = {INT: pa.int64(), FLOAT: pa.float64(), STR: pa.string(), BOOL: pa.bool_(),
           INTS: pa.list_(pa.int64()), FLOATS: pa.list_(pa.float64())}  # fmt: skip
_READ_ERRORS = (pa.ArrowException, OSError, ValueError, EOFError, MemoryError, IndexError, KeyError, TypeError)
"""What pyarrow raises on a file that is not Parquet or is damaged (a damaged footer may declare huge sizes)."""


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t)


def _kind_ok(kind: str, t: pa.DataType) -> bool:
    if kind in (INTS, FLOATS):
        if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
            return False
        value = t.value_type
        return pa.types.is_integer(value) or pa.types.is_null(value) or (kind == FLOATS and _number(value))
    return {INT: pa.types.is_integer(t), FLOAT: _number(t), STR: _is_string(t), BOOL: pa.types.is_boolean(t)}[kind]


def read_part(path: Path) -> pa.Table:
    """The part at ``path``, checked against :data:`COLUMNS` and cast to one type per kind."""
    try:
        table = pq.read_table(path)
        table.validate(full=True)  # offsets, lengths and UTF-8 of the data, which reading alone does not check
        names = table.schema.names
    except _READ_ERRORS as exc:
        raise DistillError(f"{path}: not a readable Parquet decision log ({_reason(exc)})") from exc
    missing = [c for c in COLUMNS if c not in names and c not in OPTIONAL]
    if missing:
        raise DistillError(f"{path}: not a decision log of 'users collect' (no column {', '.join(missing)})")
    columns = {}
    for name, kind in COLUMNS.items():
        if name not in names:
            continue
        column = table.column(name)
        if not _kind_ok(kind, column.type):
            raise DistillError(f"{path}: column {name!r} holds {column.type}, expected {kind}")
        if kind not in (FLOAT, FLOATS) and column.null_count:
            raise DistillError(f"{path}: column {name!r} has {column.null_count} missing value(s)")
        try:
            columns[name] = column.cast(_TARGET[kind])
        except _READ_ERRORS as exc:
            raise DistillError(f"{path}: column {name!r} does not read as {kind} ({_reason(exc)})") from exc
    table = pa.table(columns)
    _check_values(path, table)
    return table


def _check_values(path: Path, table: pa.Table) -> None:
    """What the readers index with and compute on: actions known, ids non-negative, per-item lists aligned, positions
    on the page, no infinite number (NaN is a missing value)."""
    if not table.num_rows:
        return
    actions = set(table.column("action").unique().to_pylist())
    if not actions <= ACTIONS:
        raise DistillError(f"{path}: unknown action(s) {sorted(actions - ACTIONS)!r}; expected {sorted(ACTIONS)}")
    for name in ("session_id", "user_id", "page_index"):
        if pc.min(table.column(name)).as_py() < 0:
            raise DistillError(f"{path}: column {name!r} holds a negative id")
    for name in ("items", "shown"):
        values = pc.list_flatten(table.column(name))
        if len(values) and pc.min(values).as_py() < 0:
            raise DistillError(f"{path}: column {name!r} holds a negative item id")
    width = pc.list_value_length(table.column("shown"))
    for name in ALIGNED:
        if name in table.column_names and not pc.all(pc.equal(pc.list_value_length(table.column(name)), width)).as_py():
            raise DistillError(f"{path}: column {name!r} is not aligned with 'shown' (one entry per shown item)")
    for name, kind in COLUMNS.items():
        if kind in (FLOAT, FLOATS) and name in table.column_names:
            values = pc.list_flatten(table.column(name)) if kind == FLOATS else table.column(name)
            if len(values) and pc.any(pc.is_inf(values)).as_py():
                raise DistillError(f"{path}: column {name!r} holds an infinite value")
    position, item = table.column("position"), table.column("item")
    watch = pc.equal(table.column("action"), "watch")
    on_page = pc.and_(pc.greater_equal(position, 0), pc.less(position, width))
    if not pc.all(pc.or_(pc.invert(watch), pc.and_(on_page, pc.greater_equal(item, 0)))).as_py():
        raise DistillError(f"{path}: a watch whose item or position is not on its page")
    if pc.min(position).as_py() < -1 or pc.min(item).as_py() < -1 or not pc.all(pc.less(position, width)).as_py():
        raise DistillError(f"{path}: column 'position' or 'item' out of range")


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


META_FIELDS: dict[str, tuple[type, ...]] = {
    "dataset": (str,), "sources": (list,), "seed": (int,), "page_size": (int,), "max_pages": (int,),
    "model": (str,), "sessions": (int,), "policy": (str,), "plan": (int,), "users": (str,),
}  # fmt: skip
"""The fields of ``collect.json`` (each optional) and their JSON types (``plan``: the session plan's version,
:data:`~recagent_gym.runs.distill.sessions.PLAN_VERSION`; 1 when absent; ``users``: how the LLM users scored items,
``prior_default.prior_note``, absent in logs collected before it was recorded)."""


def read_meta_file(path: Path) -> dict[str, Any]:
    """``collect.json`` parsed and checked: a JSON object whose known fields have their types."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DistillError(f"{path}: not a readable collect.json ({_reason(exc)})") from exc
    if not isinstance(meta, dict):
        raise DistillError(f"{path}: collect.json must hold a JSON object, not {type(meta).__name__}")
    for key, types in META_FIELDS.items():
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, types) or isinstance(value, bool):
            raise DistillError(f"{path}: field {key!r} must be {types[0].__name__}, got {value!r}"[:300])
        if key == "sources" and not all(isinstance(s, str) for s in value):
            raise DistillError(f"{path}: field 'sources' must be a list of names, got {value!r}"[:300])
        if (key in ("page_size", "max_pages") and value < 1) or (key in ("seed", "sessions") and value < 0):
            raise DistillError(f"{path}: field {key!r} out of range: {value!r}")
    return meta
