"""Every loader on fixtures the tests write; format detection; malformed rows in both modes; bundled data."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from recagent_gym.data.config import DataConfig
from recagent_gym.data.fields import split_title
from recagent_gym.data.load import detect_format, load_dataset, load_dataset_from_config
from recagent_gym.data.schema import BEHAVIOUR_FEATURES, DataError
from tests import _data_fixtures as fx


def test_ml_latest_items_users_tags(tmp_path):
    ds = load_dataset(str(fx.ml_latest(tmp_path)))
    ds.validate()
    assert ds.n_items == 4 and ds.n_users == 3 and len(ds.interactions) == 12
    assert list(ds.items["raw_id"]) == ["1", "2", "3", "5"]
    assert ds.items.loc[1, "title"] == "The American President"
    assert ds.items.loc[1, "year"] == 1995 and ds.items.loc[2, "year"] == -1
    assert ds.items.loc[2, "genres"] == ()
    # "pixar"/"Pixar" merge (3 votes) ahead of "fun"; tags by a user who rated nothing still describe the movie.
    assert ds.items.loc[0, "tags"] == "pixar, fun"
    assert ds.items.loc[1, "tags"] == "politics, drama"
    assert "pixar" in ds.item_text(0) and ds.items.loc[3, "description"] == ""
    # Dense ids: raw item 5 is dense 3.
    assert set(ds.interactions.loc[ds.interactions["item_id"] == 3, "user_id"]) == {0, 1, 2}


def test_statistics_and_features_are_in_range(tmp_path):
    ds = load_dataset(str(fx.ml_latest(tmp_path)))
    for column in ("activity", "diversity", "conformity"):
        assert ds.users[column].between(0, 1).all(), column
    for features in ds.users["features"]:
        assert features and set(features) <= set(BEHAVIOUR_FEATURES)
    # Users 2 and 3 wrote tags (user 9 rated nothing): they are Posters, user 1 is not.
    posters = [("Poster" in f) for f in ds.users["features"]]
    assert posters == [False, True, True]
    # User 3 (raw) rated 0.5 and 1.0 where others rated higher: least conforming.
    assert ds.users["conformity"].idxmin() == 2
    assert ds.users.loc[0, "interests"][0] in {"Action", "Adventure", "Animation", "Children", "Crime"}


def test_ml_1m_with_partial_ratings_file(tmp_path):
    ds = load_dataset(str(fx.ml_1m(tmp_path, ratings_name="ratings_users0001-2999.dat")))
    assert ds.n_users == 3 and ds.n_items == 3 and len(ds.interactions) == 5
    assert ds.items.loc[1, "title"] == "Les Misérables"
    assert ds.users.loc[0, ["gender", "age", "career"]].tolist() == ["female", 15, "K-12 student"]
    assert ds.users.loc[1, "career"] == "self-employed"
    assert ds.interactions["rating"].max() == 5.0


def test_min_user_interactions_and_max_users(tmp_path):
    folder = str(fx.ml_1m(tmp_path))
    assert load_dataset(folder, min_user_interactions=1).n_users == 2
    ds = load_dataset(folder, min_user_interactions=3)
    assert ds.n_users == 1 and set(ds.interactions["user_id"]) == {0}
    assert load_dataset(folder, max_users=1).users["raw_id"].tolist() == ["1"]


def test_ml_100k(tmp_path):
    ds = load_dataset(str(fx.ml_100k(tmp_path)))
    assert ds.n_items == 2 and ds.n_users == 2 and len(ds.interactions) == 3
    assert ds.items.loc[0, "genres"] == ("Animation", "Comedy")
    assert ds.items.loc[1, "genres"] == () and ds.items.loc[1, "year"] == 1997
    assert ds.users.loc[1, ["gender", "age", "career"]].tolist() == ["female", 53, "other"]


def test_recagent_csv(tmp_path):
    ds = load_dataset(str(fx.recagent_csv(tmp_path)))
    assert ds.n_items == 3 and ds.n_users == 3
    assert ds.items.loc[2, ["title", "year"]].tolist() == ["The Matrix", 1999]
    assert ds.items.loc[1, "description"] == "A heist, and a detective."
    alice = ds.users.loc[0]
    assert (alice["name"], alice["career"], alice["age"]) == ("Alice Smith", "nurse", 30)
    assert alice["interests"] == ("sci-fi", "comedy") and alice["features"] == ("Watcher", "Critic")
    assert ds.users.loc[2, "features"]  # empty in the file: derived from the history
    assert math.isnan(ds.interactions.loc[ds.interactions["user_id"] == 1, "rating"].iloc[0])
    assert ds.social[["user_1", "user_2", "relationship"]].values.tolist() == [[0, 1, "friend"], [1, 2, "colleague"]]


def test_recagent_csv_without_interactions_keeps_users(tmp_path):
    folder = fx.recagent_csv(tmp_path)
    (folder / "interactions.csv").unlink()
    ds = load_dataset_from_config(DataConfig(dataset=str(folder), min_user_interactions=5))
    assert ds.n_users == 3 and len(ds.interactions) == 0


def test_unknown_feature_in_users_csv(tmp_path):
    folder = fx.recagent_csv(tmp_path)
    fx.write(folder / "user_1000.csv", "id,name,feature\n0,Al,Watcher;Dancer\n")
    with pytest.raises(DataError, match=r"user_1000.csv, line 2: column 'feature': unknown behaviour feature 'Dancer'"):
        load_dataset(str(folder))


@pytest.mark.parametrize(
    ("maker", "expected"),
    [(fx.ml_latest, "ml-latest"), (fx.ml_1m, "ml-1m"), (fx.ml_100k, "ml-100k"), (fx.recagent_csv, "recagent-csv")],
)
def test_format_detection(tmp_path, maker, expected):
    assert detect_format(maker(tmp_path)) == expected


def test_detection_errors(tmp_path):
    with pytest.raises(DataError, match="no known dataset format"):
        detect_format(tmp_path)
    fx.ml_1m(tmp_path)
    fx.ml_100k(tmp_path)
    with pytest.raises(DataError, match="several formats"):
        detect_format(tmp_path)
    assert load_dataset(str(tmp_path), "ml-100k").n_items == 2
    with pytest.raises(DataError, match="no such folder"):
        load_dataset(str(tmp_path / "missing"))


BAD_ROWS = [
    ("1,1,4.0\n", r"ratings.csv, line 15: expected 4 fields"),
    ("1,1,four,5\n", r"ratings.csv, line 15: column 'rating': 'four' is not a number"),
    ("x1,1,4.0,5\n", r"ratings.csv, line 15: column 'userId': 'x1' is not an integer"),
    ("1,99,4.0,5\n", r"ratings.csv, line 15: column 'movieId': unknown movieId '99'"),
]


@pytest.mark.parametrize(("extra", "message"), BAD_ROWS)
def test_bad_rating_rows_raise_or_skip(tmp_path, caplog, extra, message):
    # 12 fixture rows on lines 2-13, a good extra row on line 14, the bad one on line 15.
    folder = str(fx.ml_latest(tmp_path, extra_ratings="1,1,3.0,5\n" + extra))
    with pytest.raises(DataError, match=message):
        load_dataset(folder)
    with caplog.at_level(logging.WARNING):
        ds = load_dataset(folder, on_bad_row="skip")
    assert ds.skipped_rows == 1 and len(ds.interactions) == 13
    assert "skipped 1 malformed rows" in caplog.text and "ratings.csv: 1" in caplog.text


def test_duplicate_item_id_and_bad_encoding(tmp_path):
    folder = fx.ml_latest(tmp_path, extra_movies="5,Heat again (1995),Action\n")
    with pytest.raises(DataError, match=r"movies.csv, line 6: duplicate movieId 5 \(first on line 5\)"):
        load_dataset(str(folder))
    assert load_dataset(str(folder), on_bad_row="skip").skipped_rows == 1

    with (folder / "movies.csv").open("ab") as f:
        f.write(b"7,Caf\xe9 (1990),Drama\n")  # latin-1 byte in a UTF-8 file
    with pytest.raises(DataError, match=r"movies.csv, line 7: not valid utf-8"):
        load_dataset(str(folder))
    ds = load_dataset(str(folder), on_bad_row="skip")
    assert ds.skipped_rows == 2 and ds.n_items == 4


def test_ml_1m_unknown_user_and_field_count(tmp_path):
    folder = fx.ml_1m(tmp_path, extra_ratings=f"7::1::5::{fx.T0}\n1::1::5\n")
    # Field counts are checked while reading, before the ids of earlier lines.
    with pytest.raises(DataError, match=r"ratings.dat, line 7: expected 4 fields separated by '::', found 3"):
        load_dataset(str(folder))
    fx.ml_1m(tmp_path, extra_ratings=f"7::1::5::{fx.T0}\n")
    with pytest.raises(
        DataError, match=r"ratings.dat, line 6: column 'user_id': unknown UserID \(not in users.dat\) '7'"
    ):
        load_dataset(str(folder))
    fx.ml_1m(tmp_path, extra_ratings=f"7::1::5::{fx.T0}\n1::1::5\n")
    ds = load_dataset(str(folder), on_bad_row="skip")
    assert ds.skipped_rows == 2 and len(ds.interactions) == 5


def test_split_title_variants():
    assert split_title("Heat (1995)") == ("Heat", 1995)
    assert split_title("Usual Suspects, The (1995) ") == ("The Usual Suspects", 1995)
    assert split_title("Enfer, L' (1994)") == ("L'Enfer", 1994)
    assert split_title("Show (2006–2007)") == ("Show", 2006)
    assert split_title("No Year") == ("No Year", -1)


def test_bundled_dataset_matches_its_readme():
    ds = load_dataset("bundled")  # its load time is measured by benchmarks/bench_data_load.py, not asserted here
    # Counts stated in the bundled README.txt (MovieLens latest-small, September 2018).
    assert (ds.n_users, ds.n_items, len(ds.interactions)) == (610, 9742, 100836)
    assert ds.skipped_rows == 0
    assert (ds.items["tags"] != "").sum() > 1000
    assert np.array_equal(ds.items["item_id"].to_numpy(), np.arange(ds.n_items))


def test_attach_descriptions_by_row_with_title_check(tmp_path):
    from recagent_gym.data.descriptions import attach_descriptions

    ds = load_dataset(str(fx.ml_1m(tmp_path / "ml")))
    path = fx.write(
        tmp_path / "item.csv",
        "id,title,genre,description\n0,Toy Story,Animation,Toys live.\n1,Misérables,Drama,Paris.\n"
        "2,Heatwave,Action,x\n",
    )
    with pytest.raises(DataError, match=r"item.csv, line 4: title 'Heatwave' does not match item 2"):
        attach_descriptions(ds, path)
    out = attach_descriptions(ds, path, on_bad_row="skip")
    assert out.items["description"].tolist() == ["Toys live.", "Paris.", ""]
    assert out.skipped_rows == 1 and ds.items["description"].tolist() == ["", "", ""]
    assert "Toys live." in out.item_text(0)
