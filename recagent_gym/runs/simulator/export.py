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
import os
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
    return {
        f"{name}.inter": _table(INTER_HEADER, _inter_rows(dataset, rows)),
        f"{name}.item": item_file(dataset),
        f"{name}.user": user_file(dataset),
    }


def _inter_rows(dataset: Dataset, rows: Sequence[dict[str, Any]]) -> list[tuple[str, ...]]:
    if not rows:
        return []
    item_raw, user_raw = dataset.items["raw_id"].astype(str).tolist(), dataset.users["raw_id"].astype(str).tolist()
    return [
        (_token(user_raw[row["user_id"]]), _token(item_raw[row["item_id"]]), _float(row.get("rating")),
         _float(row["timestamp"]))
        for row in rows
    ]  # fmt: skip


def item_file(dataset: Dataset) -> str:
    """``<name>.item``: every item of the dataset (it never changes during a run)."""
    items = [
        (_token(raw), _token_seq(str(title).split()), _optional_int(year), _token_seq(list(genres)))
        for raw, title, year, genres in zip(
            dataset.items["raw_id"].astype(str), dataset.items["title"], dataset.items["year"],
            dataset.items["genres"], strict=True,
        )
    ]  # fmt: skip
    return _table(ITEM_HEADER, items)


def user_file(dataset: Dataset) -> str:
    """``<name>.user``: every user of the dataset (it never changes during a run)."""
    users = [
        (_token(raw), _optional_int(age), _token(gender), _token(career))
        for raw, age, gender, career in zip(
            dataset.users["raw_id"].astype(str), dataset.users["age"], dataset.users["gender"],
            dataset.users["career"], strict=True,
        )
    ]  # fmt: skip
    return _table(USER_HEADER, users)


def recbole_folder(run: Path, name: str) -> Path:
    """Where dataset ``name``'s atomic files go: RecBole's ``<data_path>/<name>``, with ``data_path=run/recbole``."""
    return run / RECBOLE_DIR / name


def export_interactions(
    folder: Path, dataset: Dataset, rows: Sequence[dict[str, Any]], name: str = "simulation"
) -> None:
    """Write ``interactions.csv`` and ``recbole/<name>/<name>.{inter,item,user}`` into ``folder`` (atomically); the
    item and user files only where they are missing (they never change during a run)."""
    atomic_write_text(folder / "interactions.csv", interactions_csv(rows))
    target = recbole_folder(folder, name)
    atomic_write_text(target / f"{name}.inter", _table(INTER_HEADER, _inter_rows(dataset, rows)))
    for file, build in ((f"{name}.item", item_file), (f"{name}.user", user_file)):
        if not (target / file).exists():
            atomic_write_text(target / file, build(dataset))


class InteractionExport:
    """The interaction files of one run folder kept up to date round by round: the first write (and any write after
    the rows were replaced, e.g. a resumed state) rewrites them whole and atomically, later ones append the new rows
    to ``interactions.csv`` and ``<name>.inter`` (flushed and synced). A process killed mid-append leaves a torn
    last line at worst, and a resume rewrites both files from the checkpoint's rows."""

    def __init__(self, folder: Path, dataset: Dataset, name: str = "simulation") -> None:
        self.folder, self.dataset, self.name = Path(folder), dataset, name
        self._rows: Sequence[dict[str, Any]] | None = None
        self._written = 0

    def write(self, rows: Sequence[dict[str, Any]]) -> None:
        csv_path = self.folder / "interactions.csv"
        inter_path = recbole_folder(self.folder, self.name) / f"{self.name}.inter"
        appendable = rows is self._rows and self._written <= len(rows) and csv_path.exists() and inter_path.exists()
        if not appendable:
            export_interactions(self.folder, self.dataset, rows, self.name)
        elif len(rows) > self._written:
            new = rows[self._written :]
            _append(csv_path, interactions_csv(new).split("\n", 1)[1])  # without the header line
            _append(inter_path, "".join("\t".join(cells) + "\n" for cells in _inter_rows(self.dataset, new)))
        self._rows, self._written = rows, len(rows)


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8", newline="") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
