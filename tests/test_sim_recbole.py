"""The simulator's RecBole export against RecBole's documented atomic-file format.

RecBole itself needs numpy<2, so it is not imported: :func:`load_atomic` reads a file the way RecBole 1.2.1's
``Dataset._load_feat`` does (header ``f.readline()[:-1]`` split into ``field:type``, tab-separated,
``pandas.read_csv(engine="python")`` with ``float64`` for ``float`` and ``str`` otherwise, sequences split on
spaces), and :func:`recbole_dataset_folder` resolves the folder as its ``Config`` does
(``os.path.join(data_path, dataset)``, then ``<dataset>.inter`` inside).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.simulator import runner
from recagent_gym.runs.simulator.export import RECBOLE_TYPES, recbole_files
from tests._sim_fixtures import make_config, make_embedder, make_llm

SEQ_SEPARATOR = " "  # RecBole's default seq_separator; field_separator is "\t"


def recbole_dataset_folder(data_path: Path, dataset: str) -> Path:
    return Path(os.path.join(data_path, dataset))


def load_atomic(path: Path) -> tuple[dict[str, str], pd.DataFrame]:
    """``({field: type}, table)`` read as RecBole reads an atomic file; fails on anything RecBole rejects."""
    raw = path.read_bytes()
    assert b"\r" not in raw, "RecBole strips only the header's last character: no CRLF"
    head = raw.decode("utf-8").split("\n", 1)[0]
    types: dict[str, str] = {}
    for field_type in head.split("\t"):
        field, ftype = field_type.split(":")  # exactly one colon, as RecBole unpacks it
        assert ftype in RECBOLE_TYPES, f"{path.name}: {field} has type {ftype!r}"
        types[field] = ftype
    dtype = {f"{f}:{t}": (np.float64 if t == "float" else str) for f, t in types.items()}
    table = pd.read_csv(path, delimiter="\t", usecols=list(dtype), dtype=dtype, encoding="utf-8", engine="python")
    table.columns = list(types)
    for field, ftype in types.items():
        if ftype.endswith("seq"):
            table[field] = [
                [x for x in ("" if isinstance(v, float) else v).split(SEQ_SEPARATOR) if x] for v in table[field]
            ]
    return types, table


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runner.Simulation]:
    out = tmp_path_factory.mktemp("sim") / "run"
    sim = runner.start(make_config("simulation.rounds=2"), out, llm=make_llm(), embedder=make_embedder())
    sim.run()
    return out, sim


@pytest.mark.slow
def test_export_is_in_recboles_layout_with_documented_types(run: tuple[Path, runner.Simulation]) -> None:
    out, sim = run
    folder = recbole_dataset_folder(out / "recbole", "simulation")
    assert sorted(p.name for p in folder.iterdir()) == ["simulation.inter", "simulation.item", "simulation.user"]
    inter_types, inter = load_atomic(folder / "simulation.inter")
    assert inter_types == {"user_id": "token", "item_id": "token", "rating": "float", "timestamp": "float"}
    item_types, items = load_atomic(folder / "simulation.item")
    assert item_types == {"item_id": "token", "movie_title": "token_seq", "release_year": "token", "genre": "token_seq"}
    user_types, users = load_atomic(folder / "simulation.user")
    assert user_types == {"user_id": "token", "age": "token", "gender": "token", "occupation": "token"}

    # Every simulated watch, with the dataset's own ids, joining the .user and .item files.
    assert len(inter) == len(sim.interactions) > 0
    assert list(inter["user_id"]) == [str(sim.dataset.users["raw_id"].iloc[r["user_id"]]) for r in sim.interactions]
    assert list(inter["item_id"]) == [str(sim.dataset.items["raw_id"].iloc[r["item_id"]]) for r in sim.interactions]
    assert set(inter["user_id"]) <= set(users["user_id"]) and set(inter["item_id"]) <= set(items["item_id"])
    assert list(inter["timestamp"]) == [float(r["timestamp"]) for r in sim.interactions]
    assert all(1.0 <= r <= 5.0 for r in inter["rating"].dropna())
    assert items["item_id"].is_unique and users["user_id"].is_unique
    assert len(items) == sim.dataset.n_items and len(users) == sim.dataset.n_users
    first = sim.dataset.items.iloc[0]
    assert items["genre"].iloc[0] == list(first.genres) and items["movie_title"].iloc[0] == first.title.split()


def _dataset() -> Dataset:
    items = pd.DataFrame(
        {
            "item_id": [0, 1],
            "raw_id": ["i 1", "i2"],
            "title": ['"Great Performances" Cats', "Tab\tand\nnewline"],
            "genres": [("Science Fiction", "Drama"), ()],
            "year": [1998, -1],
            "description": ["", ""],
            "tags": ["", ""],
        }
    )
    users = pd.DataFrame(
        {
            "user_id": [0],
            "raw_id": ["u1"],
            "name": ["Ann"],
            "gender": ["F"],
            "age": [-1],
            "traits": [""],
            "career": ["film critic"],
            "interests": [()],
            "features": [()],
            "activity": [0.5],
            "diversity": [0.5],
            "conformity": [0.5],
        }
    )
    interactions = pd.DataFrame({"user_id": [], "item_id": [], "rating": [], "timestamp": []})
    return Dataset("odd", items, users, interactions)


def test_odd_values_keep_the_format(tmp_path: Path) -> None:
    rows = [
        {"user_id": 0, "item_id": 0, "rating": 4.0, "timestamp": 3600},
        {"user_id": 0, "item_id": 1, "rating": float("nan"), "timestamp": 7201},
        {"user_id": 0, "item_id": 1, "rating": None, "timestamp": 10_000_000_001},
    ]
    for name, text in recbole_files(_dataset(), rows, "odd").items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    _, inter = load_atomic(tmp_path / "odd.inter")
    assert list(inter["item_id"]) == ["i 1", "i2", "i2"]
    assert inter["rating"].iloc[0] == 4.0 and inter["rating"].iloc[1:].isna().all()
    assert list(inter["timestamp"]) == [3600.0, 7201.0, 10_000_000_001.0]  # no precision lost to short formats
    _, items = load_atomic(tmp_path / "odd.item")
    assert items["movie_title"].tolist() == [["Great", "Performances", "Cats"], ["Tab", "and", "newline"]]
    assert items["genre"].tolist() == [["Science_Fiction", "Drama"], []]
    assert items["release_year"].iloc[0] == "1998" and pd.isna(items["release_year"].iloc[1])
    _, users = load_atomic(tmp_path / "odd.user")
    assert pd.isna(users["age"].iloc[0]) and users["occupation"].iloc[0] == "film critic"
