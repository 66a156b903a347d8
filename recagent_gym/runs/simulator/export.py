"""The simulated interactions as a CSV table and as RecBole atomic files (``.inter``, ``.item``, ``.user``).

RecBole reads a dataset ``<name>`` from ``<data_path>/<name>/<name>.inter`` (and ``.user``, ``.item`` beside it), so
the files go to ``<run>/recbole/<name>/``: load them with ``data_path=<run>/recbole`` and ``dataset=<name>``.
Each file is tab-separated, one header line of ``field:type`` with a type RecBole documents (``token``,
``token_seq``, ``float``, ``float_seq``); sequences are space-separated; an empty cell is a missing value. Ids are
the dataset's own (``raw_id``) so the files join with the original data. Timestamps are simulated seconds since the
start of the run.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.simulator.files import atomic_write_text

INTERACTION_FIELDS: tuple[str, ...] = ("user_id", "item_id", "rating", "timestamp", "round", "source")
"""Columns of ``interactions.csv`` (dense ids; ``source``: ``recommender``, ``random`` or ``search``)."""

RECBOLE_TYPES: frozenset[str] = frozenset({"token", "token_seq", "float", "float_seq"})
"""The feature types of RecBole's atomic files."""

RECBOLE_DIR = "recbole"
INTER_HEADER = ("user_id:token", "item_id:token", "rating:float", "timestamp:float")
ITEM_HEADER = ("item_id:token", "movie_title:token_seq", "release_year:token", "genre:token_seq")
USER_HEADER = ("user_id:token", "age:token", "gender:token", "occupation:token")


def interactions_csv(rows: Sequence[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(INTERACTION_FIELDS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in INTERACTION_FIELDS})
    return out.getvalue()


def _token(value: Any) -> str:
    """A RecBole token: one word-run without tabs or newlines (field and row separators) or double quotes (RecBole
    reads with pandas, whose quoting would swallow separators after a stray ``"``)."""
    return " ".join(str(value).replace('"', "").split())


def _token_seq(values: Sequence[Any]) -> str:
    """A space-separated ``token_seq``; a value with inner spaces becomes one token joined by ``_``."""
    return " ".join(t.replace(" ", "_") for t in (_token(v) for v in values) if t)


def _float(value: Any) -> str:
    """A ``float`` cell: whole numbers without a point, others in their shortest exact form; empty when missing."""
    if value is None:
        return ""
    number = float(value)
    if math.isnan(number):
        return ""
    return str(int(number)) if number.is_integer() else repr(number)


def _optional_int(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) or value < 0 else str(int(value))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return "".join("\t".join(cells) + "\n" for cells in (header, *rows))


def recbole_files(dataset: Dataset, rows: Sequence[dict[str, Any]], name: str) -> dict[str, str]:
    """``{file name: text}`` of ``<name>.inter``, ``<name>.item`` and ``<name>.user``."""
    item_raw = [_token(v) for v in dataset.items["raw_id"].astype(str)]
    user_raw = [_token(v) for v in dataset.users["raw_id"].astype(str)]
    inter = [
        (user_raw[row["user_id"]], item_raw[row["item_id"]], _float(row.get("rating")), _float(row["timestamp"]))
        for row in rows
    ]
    items = [
        (raw, _token_seq(str(title).split()), _optional_int(year), _token_seq(list(genres)))
        for raw, title, year, genres in zip(
            item_raw, dataset.items["title"], dataset.items["year"], dataset.items["genres"], strict=True
        )
    ]
    users = [
        (raw, _optional_int(age), _token(gender), _token(career))
        for raw, age, gender, career in zip(
            user_raw, dataset.users["age"], dataset.users["gender"], dataset.users["career"], strict=True
        )
    ]
    return {
        f"{name}.inter": _table(INTER_HEADER, inter),
        f"{name}.item": _table(ITEM_HEADER, items),
        f"{name}.user": _table(USER_HEADER, users),
    }


def recbole_folder(run: Path, name: str) -> Path:
    """Where dataset ``name``'s atomic files go: RecBole's ``<data_path>/<name>``, with ``data_path=run/recbole``."""
    return run / RECBOLE_DIR / name


def export_interactions(
    folder: Path, dataset: Dataset, rows: Sequence[dict[str, Any]], name: str = "simulation"
) -> None:
    """Write ``interactions.csv`` and ``recbole/<name>/<name>.{inter,item,user}`` into ``folder`` (atomically)."""
    atomic_write_text(folder / "interactions.csv", interactions_csv(rows))
    for file, text in recbole_files(dataset, rows, name).items():
        target = recbole_folder(folder, name) / file
        if file.endswith(".inter") or not target.exists():  # items and users never change during a run
            atomic_write_text(target, text)
