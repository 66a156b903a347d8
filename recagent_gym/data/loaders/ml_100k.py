"""MovieLens-100K layout: ``u.data`` (tab-separated ratings), ``u.item`` and ``u.user`` (``|``-separated, latin-1).

``u.item`` rows are ``id|title|release date|video release date|IMDb URL`` and 19 genre flags
(:data:`~recagent_gym.data.fields.ML100K_GENRES`; the ``unknown`` flag gives no genre). The year comes from the
title, else from the release date. ``u.user`` rows are ``id|age|gender|occupation|zip``; the occupation is already a
name. Items have no description or tags in this format.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from recagent_gym.data.build import Parsed
from recagent_gym.data.fields import ML100K_GENRES, NO_GENRES, WHOLE_STARS, gender_word, split_title
from recagent_gym.data.reader import BadRows, read_table

ENCODING = "latin-1"
_ITEM_FIELDS = ("movie_id", "title", "release_date", "video_release_date", "url", *ML100K_GENRES)
_DATE_YEAR = re.compile(r"([0-9]{4})\s*$")


def parse_ml_100k(folder: Path, name: str, bad: BadRows) -> Parsed:
    movies = read_table(folder / "u.item", _ITEM_FIELDS, sep="|", encoding=ENCODING, bad=bad)
    movie_ids = movies.ints("movie_id")
    movies.reject_duplicates(movie_ids, "movie id")
    flags = {g: movies.ints(g) for g in ML100K_GENRES}
    for genre, values in flags.items():
        movies.reject(~np.isin(values, (0, 1)), lambda r, g=genre: f"genre flag {g!r} is {flags[g][r]}, not 0 or 1")
    ok = movies.ok
    split = [split_title(t) for t in movies.columns["title"][ok]]
    dates = movies.columns["release_date"][ok]
    years = [year if year > 0 else _date_year(date) for (_, year), date in zip(split, dates, strict=True)]
    genre_rows = np.stack([flags[g][ok] for g in ML100K_GENRES], axis=1) if ok.any() else np.zeros((0, 19))
    items = pd.DataFrame(
        {
            "raw_id": movie_ids[ok].astype(str),
            "title": [title for title, _ in split],
            "genres": [
                tuple(g for g, f in zip(ML100K_GENRES, row, strict=True) if f and g not in NO_GENRES)
                for row in genre_rows
            ],
            "year": np.asarray(years, dtype=np.int64),
            "description": [""] * int(ok.sum()),
            "tags": [""] * int(ok.sum()),
        }
    )
    item_index = pd.Index(movie_ids[ok])

    people = read_table(
        folder / "u.user", ("user_id", "age", "gender", "occupation", "zip"), sep="|", encoding=ENCODING, bad=bad
    )
    user_ids = people.ints("user_id")
    people.reject_duplicates(user_ids, "user id")
    age = people.ints("age")
    people.reject((age < 0) | (age > 120), lambda r: f"age {age[r]} is outside 0..120")
    ok = people.ok
    users = pd.DataFrame(
        {
            "raw_id": user_ids[ok].astype(str),
            "gender": [gender_word(g) for g in people.columns["gender"][ok]],
            "age": age[ok],
            "career": [o.strip() for o in people.columns["occupation"][ok]],
        }
    )
    user_index = pd.Index(user_ids[ok])

    ratings = read_table(
        folder / "u.data", ("user_id", "item_id", "rating", "timestamp"), sep="\t", encoding=ENCODING, bad=bad
    )
    user_pos = ratings.positions("user_id", ratings.ints("user_id"), user_index, "user id (not in u.user)")
    item_pos = ratings.positions("item_id", ratings.ints("item_id"), item_index, "item id (not in u.item)")
    rating = ratings.ratings("rating", WHOLE_STARS)
    timestamp = ratings.timestamps("timestamp")
    ok = ratings.ok
    interactions = pd.DataFrame(
        {"user": user_pos[ok], "item": item_pos[ok], "rating": rating[ok], "timestamp": timestamp[ok]}
    )
    return Parsed(name, items, users, interactions)


def _date_year(date: str) -> int:
    match = _DATE_YEAR.search(date)
    return int(match.group(1)) if match else -1
