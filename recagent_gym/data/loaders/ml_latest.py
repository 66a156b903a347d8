"""MovieLens "latest" layout (``movies.csv``, ``ratings.csv``, optional ``tags.csv``; UTF-8 CSV with a header).

This is the layout of the bundled default, MovieLens latest-small. Items: title without "(year)", the year parsed
from it; ``tags`` holds each movie's most frequent tags (:data:`~recagent_gym.data.fields.MAX_TAGS`, case-insensitive
duplicates merged) and ``description`` is the templated line ``"Viewers tag it: <tags>."`` (empty for untagged
movies), so tags reach :meth:`Dataset.item_text`. Users have no demographics in this format (profile fields empty,
``age`` -1); ``links.csv`` is not read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from recagent_gym.data.build import Parsed
from recagent_gym.data.fields import HALF_STARS, fold_tags, split_genres, split_title, tags_description
from recagent_gym.data.reader import BadRows, RawTable, read_table

REQUIRED = ("movies.csv", "ratings.csv")


def parse_ml_latest(folder: Path, name: str, bad: BadRows) -> Parsed:
    movies = read_table(
        folder / "movies.csv", ("movieId", "title", "genres"), sep=",", header=True, quoted=True, bad=bad
    )
    movie_ids = movies.ints("movieId")
    movies.reject_duplicates(movie_ids, "movieId")
    split = [split_title(t) for t in movies.columns["title"][movies.ok]]
    items = pd.DataFrame(
        {
            "raw_id": movie_ids[movies.ok].astype(str),
            "title": [title for title, _ in split],
            "genres": [split_genres(g) for g in movies.columns["genres"][movies.ok]],
            "year": np.asarray([year for _, year in split], dtype=np.int64),
        }
    )
    item_index = pd.Index(movie_ids[movies.ok])

    ratings = read_table(
        folder / "ratings.csv", ("userId", "movieId", "rating", "timestamp"), sep=",", header=True, bad=bad
    )
    user_raw = ratings.ints("userId")
    item_pos = ratings.positions("movieId", ratings.ints("movieId"), item_index, "movieId")
    rating = ratings.ratings("rating", HALF_STARS)
    timestamp = ratings.timestamps("timestamp")
    ok = ratings.ok
    user_index = pd.Index(np.unique(user_raw[ok]))
    interactions = pd.DataFrame(
        {
            "user": user_index.get_indexer(user_raw[ok]),
            "item": item_pos[ok],
            "rating": rating[ok],
            "timestamp": timestamp[ok],
        }
    )
    users = pd.DataFrame({"raw_id": user_index.to_numpy().astype(str)})

    tag_text, tag_counts = _tags(folder / "tags.csv", item_index, user_index, bad)
    items["tags"] = tag_text if tag_text is not None else [""] * len(items)
    items["description"] = [tags_description(t) for t in items["tags"]]
    return Parsed(name, items, users, interactions, user_tag_counts=tag_counts)


def _tags(
    path: Path, item_index: pd.Index, user_index: pd.Index, bad: BadRows
) -> tuple[list[str] | None, np.ndarray | None]:
    """Folded tags per item and tag counts per rating user; ``(None, None)`` without ``tags.csv``.

    Tags by users who rated nothing are still folded into item text (they describe the movie) but count for no user.
    """
    if not path.is_file():
        return None, None
    table: RawTable = read_table(
        path, ("userId", "movieId", "tag", "timestamp"), sep=",", header=True, quoted=True, bad=bad
    )
    user_raw = table.ints("userId")
    item_pos = table.positions("movieId", table.ints("movieId"), item_index, "movieId")
    table.timestamps("timestamp")
    ok = table.ok
    folded = fold_tags(item_pos[ok], table.columns["tag"][ok], len(item_index))
    user_pos = user_index.get_indexer(user_raw[ok])
    counts = np.bincount(user_pos[user_pos >= 0], minlength=len(user_index))
    return folded, counts
