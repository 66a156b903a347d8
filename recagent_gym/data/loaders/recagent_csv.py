"""Plain CSV in the RecAgent layout: a folder of UTF-8 CSV files with a header line.

==================  ==========================================  ===========================================
file                columns (header names)                      notes
==================  ==========================================  ===========================================
``item*.csv``       ``id,title,genre,description``              required; ``genre`` is ``A|B``; optional
                                                                ``year`` and ``tags`` columns; a title's
                                                                "(year)" is split off
``user*.csv``       ``id,name,gender,age,traits,status,``       optional; RecAgent's names. Aliases:
                    ``interest,feature``                        ``career`` for ``status``, ``interests`` for
                                                                ``interest``, ``features`` for ``feature``.
                                                                Only ``id`` is required; ``interest`` and
                                                                ``feature`` are lists split on ``;`` (or
                                                                ``|``, else ``,``); features must be among
                                                                Watcher/Explorer/Critic/Chatter/Poster
``relationship*``   ``user_1,user_2,relationship``              optional; user ids of ``user*.csv``; extra
``.csv``                                                        columns (RecAgent's ``intimacy``) ignored
``interaction*``    ``user_id,item_id,rating,timestamp``        optional (also ``rating*.csv``); ``rating``
``.csv``                                                        may be empty (implicit, NaN); without a
                                                                ``timestamp`` column, row order is time
==================  ==========================================  ===========================================

Where a file name is not exact (``item.csv``/``items.csv``, ``user.csv``/``users.csv``, ...), exactly one file
must match the pattern (RecAgent's ``user_1000.csv``, ``relationship_1000.csv``). Without a users file, the users
are those of the interactions. Columns not listed are ignored with a warning.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from recagent_gym.data.build import Parsed
from recagent_gym.data.fields import HALF_STARS, gender_word, split_genres, split_list, split_title
from recagent_gym.data.reader import BadRows, RawTable, read_table
from recagent_gym.data.schema import BEHAVIOUR_FEATURES, DataError

logger = logging.getLogger(__name__)

ITEM_FILES = (("item.csv", "items.csv"), "item*.csv")
USER_FILES = (("user.csv", "users.csv"), "user*.csv")
SOCIAL_FILES = (("relationship.csv", "relationships.csv"), "relationship*.csv")
INTERACTION_FILES = (("interactions.csv", "interaction.csv", "ratings.csv"), ("interaction*.csv", "rating*.csv"))
USER_ALIASES = {"status": "career", "interest": "interests", "feature": "features"}
_USER_COLUMNS = ("name", "gender", "age", "traits", "career", "interests", "features")


def find_file(folder: Path, exact: tuple[str, ...], patterns: str | tuple[str, ...]) -> Path | None:
    """The first exact name present, else the single file matching a pattern (several matches are an error)."""
    for name in exact:
        if (folder / name).is_file():
            return folder / name
    for pattern in (patterns,) if isinstance(patterns, str) else patterns:
        matches = sorted(p for p in folder.glob(pattern) if p.is_file())
        if len(matches) > 1:
            raise DataError(f"{folder}: several files match {pattern!r}: {[p.name for p in matches]}; keep one")
        if matches:
            return matches[0]
    return None


def parse_recagent_csv(folder: Path, name: str, bad: BadRows) -> Parsed:
    items_path = find_file(folder, *ITEM_FILES)
    if items_path is None:
        raise DataError(f"{folder}: no items file (item.csv, items.csv or item*.csv)")
    items, item_index = _items(items_path, bad)

    users_path = find_file(folder, *USER_FILES)
    users = _users(users_path, bad) if users_path else None
    user_index = pd.Index(users["raw_id"]) if users is not None else None

    inter_path = find_file(folder, *INTERACTION_FILES)
    interactions = pd.DataFrame({"user": [], "item": [], "rating": [], "timestamp": []})
    if inter_path is not None:
        interactions, user_index = _interactions(inter_path, item_index, user_index, bad)
    if users is None:
        if user_index is None:
            raise DataError(f"{folder}: no users file (user.csv, users.csv or user*.csv) and no interactions file")
        users = pd.DataFrame({"raw_id": user_index.to_numpy().astype(str)})
    assert user_index is not None

    social_path = find_file(folder, *SOCIAL_FILES)
    social = _social(social_path, user_index, bad) if social_path else None
    return Parsed(name, items, users, interactions, **({"social": social} if social is not None else {}))


def _items(path: Path, bad: BadRows) -> tuple[pd.DataFrame, pd.Index]:
    table = read_table(
        path,
        ("id", "title", "genre", "description"),
        sep=",",
        header=True,
        quoted=True,
        optional=("year", "tags"),
        bad=bad,
    )
    _warn_ignored(table, {"id", "title", "genre", "description", "year", "tags"})
    ids = table.text("id")
    table.reject(ids == "", lambda r: "empty id")
    table.reject_duplicates(ids, "item id")
    year_col = table.numbers("year", kind="int", allow_empty=True)
    ok = table.ok
    split = [split_title(t) for t in table.columns["title"][ok]]
    years = [
        int(given) if np.isfinite(given) else parsed for (_, parsed), given in zip(split, year_col[ok], strict=True)
    ]
    items = pd.DataFrame(
        {
            "raw_id": ids[ok].astype(str),
            "title": [title for title, _ in split],
            "genres": [split_genres(g) for g in table.columns["genre"][ok]],
            "year": np.asarray(years, dtype=np.int64),
            "description": table.text("description")[ok],
            "tags": table.text("tags")[ok],
        }
    )
    return items, pd.Index(ids[ok])


def _users(path: Path, bad: BadRows) -> pd.DataFrame:
    table = read_table(path, ("id",), sep=",", header=True, quoted=True, bad=bad)
    for old, new in USER_ALIASES.items():
        if old in table.columns and new in table.columns:
            raise DataError(f"{path}: give either {old!r} or its alias {new!r}, not both")
        if old in table.columns:
            table.columns[new] = table.columns.pop(old)
    for column in _USER_COLUMNS:
        table.columns.setdefault(column, np.full(len(table), "", dtype=object))
    _warn_ignored(table, {"id", *_USER_COLUMNS})
    ids = table.text("id")
    table.reject(ids == "", lambda r: "empty id")
    table.reject_duplicates(ids, "user id")
    age = table.numbers("age", kind="int", allow_empty=True)
    table.reject((age < 0) | (age > 120), lambda r: f"column 'age': {age[r]:g} is outside 0..120")
    features = [_features(text) for text in table.columns["features"]]
    table.reject(
        np.array([isinstance(f, str) for f in features], dtype=bool),
        lambda r: f"column 'feature': unknown behaviour feature {features[r]!r} (known: {list(BEHAVIOUR_FEATURES)})",
    )
    ok = table.ok
    return pd.DataFrame(
        {
            "raw_id": ids[ok].astype(str),
            "name": table.text("name")[ok],
            "gender": [gender_word(g) for g in table.columns["gender"][ok]],
            "age": np.where(np.isfinite(age[ok]), age[ok], -1).astype(np.int64),
            "traits": table.text("traits")[ok],
            "career": table.text("career")[ok],
            "interests": [split_list(t) for t in table.columns["interests"][ok]],
            "features": [f for f, good in zip(features, ok, strict=True) if good],
        }
    )


def _features(text: str) -> tuple[str, ...] | str:
    """The features of a cell in canonical spelling, or the first unknown name (a str) to report."""
    known = {f.lower(): f for f in BEHAVIOUR_FEATURES}
    out = []
    for part in split_list(text):
        if part.lower() not in known:
            return part
        out.append(known[part.lower()])
    return tuple(f for f in BEHAVIOUR_FEATURES if f in out)


def _interactions(
    path: Path, item_index: pd.Index, user_index: pd.Index | None, bad: BadRows
) -> tuple[pd.DataFrame, pd.Index]:
    table = read_table(
        path, ("user_id", "item_id"), sep=",", header=True, quoted=True, optional=("rating", "timestamp"), bad=bad
    )
    _warn_ignored(table, {"user_id", "item_id", "rating", "timestamp"})
    has_time = bool(len(table)) and any(v.strip() for v in table.columns["timestamp"])
    users_raw = table.text("user_id")
    if user_index is not None:
        table.positions("user_id", users_raw, user_index, "user id (not in the users file)")
    item_pos = table.positions("item_id", table.text("item_id"), item_index, "item id (not in the items file)")
    rating = table.ratings("rating", HALF_STARS, allow_empty=True)
    timestamp = table.timestamps("timestamp") if has_time else np.arange(len(table), dtype=np.int64)
    ok = table.ok
    if user_index is None:
        user_index = pd.Index(pd.unique(users_raw[ok]))
    frame = pd.DataFrame(
        {
            "user": user_index.get_indexer(users_raw[ok]),
            "item": item_pos[ok],
            "rating": rating[ok],
            "timestamp": timestamp[ok],
        }
    )
    return frame, user_index


def _social(path: Path, user_index: pd.Index, bad: BadRows) -> pd.DataFrame:
    table = read_table(path, ("user_1", "user_2", "relationship"), sep=",", header=True, quoted=True, bad=bad)
    u1 = table.positions("user_1", table.text("user_1"), user_index, "user id")
    u2 = table.positions("user_2", table.text("user_2"), user_index, "user id")
    table.reject(u1 == u2, lambda r: f"user {table.columns['user_1'][r].strip()!r} is linked to themself")
    ok = table.ok
    relationship = [r or "friend" for r in table.text("relationship")[ok]]
    return pd.DataFrame({"user_1": u1[ok], "user_2": u2[ok], "relationship": relationship})


def _warn_ignored(table: RawTable, known: set[str]) -> None:
    ignored = sorted(set(table.columns) - known)
    if ignored:
        logger.warning("%s: ignoring columns %s", table.path, ignored)
