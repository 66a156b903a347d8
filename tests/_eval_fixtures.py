"""A small synthetic MovieLens-latest folder for the evaluation tests, written into the test's ``tmp_path``.

Users have two favourite genres and mostly watch movies of those genres (popular ones more often), so both
personal taste and popularity carry signal, as in real data.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from recagent_gym.data.load import load_dataset
from recagent_gym.data.schema import Dataset
from recagent_gym.runs.config import load_config
from recagent_gym.runs.config.evaluation_section import EvaluationConfig
from recagent_gym.runs.evaluation.subjects import Resources

GENRES = ("Action", "Comedy", "Drama", "Horror", "Romance", "Sci-Fi")


def write_movielens(folder: Path, *, n_users: int = 16, n_items: int = 90, per_user: int = 34, seed: int = 7) -> Path:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    item_genres = [sorted(set(rng.choice(len(GENRES), size=rng.integers(1, 3), replace=False).tolist()))
                   for _ in range(n_items)]  # fmt: skip
    appeal = rng.pareto(1.5, size=n_items) + 0.2
    lines = ["movieId,title,genres"]
    for i, genres in enumerate(item_genres):
        lines.append(f"{i + 1},Film Number {i + 1} ({1970 + i % 40}),{'|'.join(GENRES[g] for g in genres)}")
    (folder / "movies.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = ["userId,movieId,rating,timestamp"]
    for u in range(n_users):
        favourites = set(rng.choice(len(GENRES), size=2, replace=False).tolist())
        taste = np.array([3.0 if favourites & set(g) else 0.3 for g in item_genres]) * appeal
        items = rng.choice(n_items, size=per_user, replace=False, p=taste / taste.sum())
        for step, item in enumerate(items):
            rating = 4.5 if favourites & set(item_genres[item]) else 2.5
            rows.append(f"{u + 1},{item + 1},{rating},{1_000_000 + 3600 * step + u}")
    (folder / "ratings.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


@pytest.fixture
def movielens_dir(tmp_path: Path) -> Path:
    return write_movielens(tmp_path / "tiny-ml")


@pytest.fixture
def tiny_ml(movielens_dir: Path) -> Dataset:
    return load_dataset(str(movielens_dir))


def make_resources(
    dataset: Dataset, llm: object = None, *, config_overrides: Sequence[str] = (), **evaluation: object
) -> Resources:
    """Resources with the hashing embedder and small, fast defaults (override any evaluation field;
    ``config_overrides``: ``key=value`` overrides of the rest of the configuration)."""
    defaults: dict[str, object] = {"embedder": "hashing", "users": 6, "min_interactions": 14, "bootstrap_samples": 100}
    config = EvaluationConfig.model_validate({**defaults, **evaluation})
    return Resources(dataset, load_config(None, list(config_overrides)), config, llm=llm, progress=False)


def cli_exit_code(argv: list[str]) -> int:
    """``recagent-gym ARGV`` run in this process (for input refused before any work: no interpreter to start); its
    exit status, from argparse's ``SystemExit`` or the command's return value."""
    from recagent_gym.runs.cli import main

    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
