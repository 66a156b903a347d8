"""MovieLens-1M layout: ``movies.dat``, ``ratings.dat`` (or several ``ratings*.dat``), ``users.dat``.

Fields are separated by ``::``, text is latin-1, there is no header. ``users.dat`` gives gender (``male``/``female``),
age (the middle of the age band, :data:`~recagent_gym.data.fields.ML1M_AGE_BANDS`) and career (the occupation name
from the ML-1M README, :data:`~recagent_gym.data.fields.ML1M_OCCUPATIONS`). Without ``users.dat`` the users are the
rating users, without demographics. Items have no description or tags in this format.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from recagent_gym.data.build import Parsed
from recagent_gym.data.fields import (
    ML1M_AGE_BANDS,
    ML1M_OCCUPATIONS,
    WHOLE_STARS,
    gender_word,
    split_genres,
    split_title,
)
from recagent_gym.data.reader import BadRows, read_table
from recagent_gym.data.schema import DataError

logger = logging.getLogger(__name__)

SEP = "::"
ENCODING = "latin-1"


def ratings_files(folder: Path) -> list[Path]:
    """``ratings.dat``, or else every ``ratings*.dat`` (sorted by name)."""
    exact = folder / "ratings.dat"
    return [exact] if exact.is_file() else sorted(p for p in folder.glob("ratings*.dat") if p.is_file())


def parse_ml_1m(folder: Path, name: str, bad: BadRows) -> Parsed:
    movies = read_table(folder / "movies.dat", ("movie_id", "title", "genres"), sep=SEP, encoding=ENCODING, bad=bad)
    movie_ids = movies.ints("movie_id")
    movies.reject_duplicates(movie_ids, "MovieID")
    split = [split_title(t) for t in movies.columns["title"][movies.ok]]
    n_items = int(movies.ok.sum())
    items = pd.DataFrame(
        {
            "raw_id": movie_ids[movies.ok].astype(str),
            "title": [title for title, _ in split],
            "genres": [split_genres(g) for g in movies.columns["genres"][movies.ok]],
            "year": np.asarray([year for _, year in split], dtype=np.int64),
            "description": [""] * n_items,
            "tags": [""] * n_items,
        }
    )
    item_index = pd.Index(movie_ids[movies.ok])

    users_path = folder / "users.dat"
    users: pd.DataFrame | None = None
    if users_path.is_file():
        users = _users(users_path, bad)
    else:
        logger.info("%s: no users.dat; users are the rating users, without demographics", folder)
    user_index = pd.Index(users["raw_id"].astype(np.int64)) if users is not None else None

    files = ratings_files(folder)
    if not files:
        raise DataError(f"{folder}: no ratings.dat (or ratings*.dat) file")
    parts = []
    for path in files:
        table = read_table(path, ("user_id", "movie_id", "rating", "timestamp"), sep=SEP, encoding=ENCODING, bad=bad)
        user_raw = table.ints("user_id")
        if user_index is not None:
            table.positions("user_id", user_raw, user_index, "UserID (not in users.dat)")
        item_pos = table.positions("movie_id", table.ints("movie_id"), item_index, "MovieID (not in movies.dat)")
        rating = table.ratings("rating", WHOLE_STARS)
        timestamp = table.timestamps("timestamp")
        ok = table.ok
        parts.append(
            pd.DataFrame(
                {"user_raw": user_raw[ok], "item": item_pos[ok], "rating": rating[ok], "timestamp": timestamp[ok]}
            )
        )
    ratings = pd.concat(parts, ignore_index=True)
    if users is None:
        user_index = pd.Index(np.unique(ratings["user_raw"].to_numpy()))
        users = pd.DataFrame({"raw_id": user_index.to_numpy().astype(str)})
    assert user_index is not None
    ratings["user"] = user_index.get_indexer(ratings["user_raw"].to_numpy())
    return Parsed(name, items, users, ratings.drop(columns="user_raw"))


def _users(path: Path, bad: BadRows) -> pd.DataFrame:
    table = read_table(path, ("user_id", "gender", "age", "occupation", "zip"), sep=SEP, encoding=ENCODING, bad=bad)
    user_ids = table.ints("user_id")
    table.reject_duplicates(user_ids, "UserID")
    age = table.ints("age")
    table.reject(
        ~np.isin(age, list(ML1M_AGE_BANDS)), lambda r: f"age code {age[r]} is not one of {list(ML1M_AGE_BANDS)}"
    )
    occupation = table.ints("occupation")
    table.reject(
        ~np.isin(occupation, list(ML1M_OCCUPATIONS)), lambda r: f"occupation code {occupation[r]} is not in 0..20"
    )
    ok = table.ok
    return pd.DataFrame(
        {
            "raw_id": user_ids[ok].astype(str),
            "gender": [gender_word(g) for g in table.columns["gender"][ok]],
            "age": [ML1M_AGE_BANDS[int(a)] for a in age[ok]],
            "career": [ML1M_OCCUPATIONS[int(o)] for o in occupation[ok]],
        }
    )
