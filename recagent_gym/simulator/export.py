"""The simulated interactions as a CSV table and as RecBole atomic files (``.inter``, ``.item``, ``.user``).

RecBole's atomic format is tab-separated with typed headers (``user_id:token``); ids are the dataset's own
(``raw_id``) so the files join with the original data. Timestamps are simulated seconds since the start of the run.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recagent_gym.data.schema import Dataset
from recagent_gym.simulator.files import atomic_write_text

INTERACTION_FIELDS: tuple[str, ...] = ("user_id", "item_id", "rating", "timestamp", "round", "source")
"""Columns of ``interactions.csv`` (dense ids; ``source``: ``recommender``, ``random`` or ``search``)."""


def interactions_csv(rows: Sequence[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(INTERACTION_FIELDS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in INTERACTION_FIELDS})
    return out.getvalue()


def _clean(value: Any) -> str:
    """A RecBole field: tabs and newlines would break the format."""
    return " ".join(str(value).split())


def recbole_files(dataset: Dataset, rows: Sequence[dict[str, Any]], name: str) -> dict[str, str]:
    """``{file name: text}`` of ``<name>.inter``, ``<name>.item`` and ``<name>.user``."""
    item_raw = dataset.items["raw_id"].astype(str).tolist()
    user_raw = dataset.users["raw_id"].astype(str).tolist()
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    for row in rows:
        rating = row.get("rating")
        rating_text = "" if rating is None or (isinstance(rating, float) and math.isnan(rating)) else f"{rating:g}"
        inter.append(f"{user_raw[row['user_id']]}\t{item_raw[row['item_id']]}\t{rating_text}\t{row['timestamp']}")
    items = ["item_id:token\tmovie_title:token_seq\trelease_year:token\tgenre:token_seq"]
    for raw, title, year, genres in zip(
        item_raw, dataset.items["title"], dataset.items["year"], dataset.items["genres"], strict=True
    ):
        items.append(f"{raw}\t{_clean(title)}\t{'' if year is None or year < 0 else year}\t{_clean(' '.join(genres))}")
    users = ["user_id:token\tage:token\tgender:token\toccupation:token"]
    for raw, age, gender, career in zip(
        user_raw, dataset.users["age"], dataset.users["gender"], dataset.users["career"], strict=True
    ):
        users.append(f"{raw}\t{'' if age is None or age < 0 else age}\t{_clean(gender)}\t{_clean(career)}")
    return {
        f"{name}.inter": "\n".join(inter) + "\n",
        f"{name}.item": "\n".join(items) + "\n",
        f"{name}.user": "\n".join(users) + "\n",
    }


def export_interactions(
    folder: Path, dataset: Dataset, rows: Sequence[dict[str, Any]], name: str = "simulation"
) -> None:
    """Write ``interactions.csv`` and ``recbole/<name>.{inter,item,user}`` into ``folder`` (each atomically)."""
    atomic_write_text(folder / "interactions.csv", interactions_csv(rows))
    for file, text in recbole_files(dataset, rows, name).items():
        target = folder / "recbole" / file
        if file.endswith(".inter") or not target.exists():  # items and users never change during a run
            atomic_write_text(target, text)
