"""Item descriptions from a RecAgent items CSV, attached to an already loaded dataset (e.g. MovieLens-1M).

RecAgent's ``item.csv`` (``id,title,genre,description``) numbers items by their 0-based row in the catalogue file,
which is the dense ``item_id`` of a loaded MovieLens-1M. Each row's title must match the item's title, compared as
sets of lowercase words without articles, punctuation or year (RecAgent moves some trailing articles, e.g.
"Usual Suspects, The" -> "The Usual Suspects"); a mismatch is a bad row (wrong file or shifted ids).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from recagent_gym.data.reader import BadRowMode, BadRows, read_table
from recagent_gym.data.schema import Dataset

_ARTICLES = frozenset({"the", "a", "an", "les", "la", "le", "l", "il", "el", "das", "der", "die"})


def _words(title: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[^\W_]+", title.lower()) if not re.fullmatch(r"\d{4}", w)) - _ARTICLES


def attach_descriptions(dataset: Dataset, path: str | Path, *, on_bad_row: BadRowMode = "error") -> Dataset:
    """A copy of ``dataset`` whose ``items.description`` comes from the file (items it does not list keep theirs)."""
    bad = BadRows(on_bad_row)
    table = read_table(Path(path), ("id", "title", "description"), sep=",", header=True, quoted=True, bad=bad)
    ids = table.ints("id")
    table.reject((ids < 0) | (ids >= dataset.n_items), lambda r: f"id {ids[r]} is outside 0..{dataset.n_items - 1}")
    table.reject_duplicates(ids, "id")
    titles = dataset.items["title"].to_numpy()
    mismatch = np.array(
        [
            bool(ok) and _words(str(titles[i])) != _words(t)
            for i, t, ok in zip(ids, table.columns["title"], table.ok, strict=True)
        ],
        dtype=bool,
    )
    table.reject(
        mismatch,
        lambda r: f"title {table.columns['title'][r].strip()!r} does not match item {ids[r]} ({titles[ids[r]]!r})",
    )
    bad.log_summary(str(path))
    items = dataset.items.copy()
    descriptions = items["description"].to_numpy(dtype=object).copy()
    descriptions[ids[table.ok]] = table.text("description")[table.ok]
    items["description"] = descriptions
    return replace(dataset, items=items, skipped_rows=dataset.skipped_rows + bad.total)
