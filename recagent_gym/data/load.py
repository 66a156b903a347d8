"""``load_dataset``: one entry point for every supported format, with format detection from the files present."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from recagent_gym.data.build import LoadOptions, Parsed, assemble
from recagent_gym.data.descriptions import attach_descriptions
from recagent_gym.data.loaders.ml_1m import parse_ml_1m, ratings_files
from recagent_gym.data.loaders.ml_100k import parse_ml_100k
from recagent_gym.data.loaders.ml_latest import parse_ml_latest
from recagent_gym.data.loaders.recagent_csv import ITEM_FILES, find_file, parse_recagent_csv
from recagent_gym.data.reader import BadRowMode, BadRows
from recagent_gym.data.schema import DataError, Dataset

if TYPE_CHECKING:  # the config package imports every section, this one included: no import cycle at run time
    from recagent_gym.data.config import DataConfig

logger = logging.getLogger(__name__)

Format = Literal["auto", "ml-latest", "ml-1m", "ml-100k", "recagent-csv"]
FORMATS: tuple[str, ...] = ("ml-latest", "ml-1m", "ml-100k", "recagent-csv")

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled" / "ml-latest-small"
"""MovieLens latest-small, shipped with the package (its README, with the licence, is beside the data)."""

_PARSERS: dict[str, Callable[[Path, str, BadRows], Parsed]] = {
    "ml-latest": parse_ml_latest,
    "ml-1m": parse_ml_1m,
    "ml-100k": parse_ml_100k,
    "recagent-csv": parse_recagent_csv,
}


def resolve(spec: str, format: Format = "auto") -> tuple[Path, str]:
    """The folder and the format of a dataset argument (``bundled`` or a path)."""
    if spec == "bundled":
        if format not in ("auto", "ml-latest"):
            raise DataError(f"the bundled dataset is in the ml-latest format, not {format!r}")
        return BUNDLED_DIR, "ml-latest"
    folder = Path(spec).expanduser()
    if not folder.exists():
        raise DataError(f"dataset {spec!r}: no such folder (give 'bundled' or a dataset folder)")
    if not folder.is_dir():
        raise DataError(f"dataset {spec!r}: not a folder (give the folder that holds the data files)")
    if format == "auto":
        return folder, detect_format(folder)
    if format not in FORMATS:
        raise DataError(f"unknown dataset format {format!r} (known: auto, {', '.join(FORMATS)})")
    return folder, format


def detect_format(folder: Path) -> str:
    """The format whose files are present: ``movies.csv``+``ratings.csv`` (ml-latest), ``movies.dat``+
    ``ratings*.dat`` (ml-1m), ``u.data``+``u.item`` (ml-100k), ``item*.csv`` (recagent-csv)."""
    found = []
    if (folder / "movies.csv").is_file() and (folder / "ratings.csv").is_file():
        found.append("ml-latest")
    if (folder / "movies.dat").is_file() and ratings_files(folder):
        found.append("ml-1m")
    if (folder / "u.data").is_file() and (folder / "u.item").is_file():
        found.append("ml-100k")
    if "ml-latest" not in found and find_file(folder, *ITEM_FILES) is not None:
        found.append("recagent-csv")
    if len(found) == 1:
        return found[0]
    if found:
        raise DataError(f"{folder}: files of several formats ({', '.join(found)}); choose one with format=")
    present = sorted(p.name for p in folder.iterdir())[:12]
    raise DataError(
        f"{folder}: no known dataset format (expected movies.csv+ratings.csv, movies.dat+ratings.dat, "
        f"u.data+u.item, or item.csv); found {present}"
    )


def load_dataset(
    spec: str,
    format: Format = "auto",
    *,
    on_bad_row: BadRowMode = "error",
    min_user_interactions: int = 0,
    max_users: int | None = None,
    seed: int = 0,
) -> Dataset:
    """Load ``bundled`` or a dataset folder into a :class:`Dataset` with dense ids.

    ``on_bad_row='error'`` raises :class:`DataError` (naming file, line and problem) at the first malformed row;
    ``'skip'`` skips such rows, counts them in ``Dataset.skipped_rows`` and logs the count per file. Users with fewer
    than ``min_user_interactions`` interactions are dropped, then only the first ``max_users`` are kept. ``seed``
    drives the random part of derived behaviour features (see :mod:`recagent_gym.data.stats`).
    """
    if min_user_interactions < 0:
        raise ValueError(f"min_user_interactions must be >= 0, not {min_user_interactions}")
    if max_users is not None and max_users < 1:
        raise ValueError(f"max_users must be >= 1 or None, not {max_users}")
    folder, fmt = resolve(spec, format)
    name = "ml-latest-small (bundled)" if spec == "bundled" else folder.name or str(folder)
    start = time.perf_counter()
    bad = BadRows(on_bad_row)
    parsed = _PARSERS[fmt](folder, name, bad)
    bad.log_summary(name)
    options = LoadOptions(min_user_interactions=min_user_interactions, max_users=max_users, seed=seed)
    dataset = assemble(parsed, options, skipped_rows=bad.total)
    logger.debug(
        "loaded %s (%s): %d users, %d items, %d interactions in %.2fs",
        name,
        fmt,
        dataset.n_users,
        dataset.n_items,
        len(dataset.interactions),
        time.perf_counter() - start,
    )
    return dataset


def load_dataset_from_config(cfg: DataConfig) -> Dataset:
    """:func:`load_dataset` with the options of the ``data`` configuration section (and ``descriptions_path``)."""
    dataset = load_dataset(
        cfg.dataset,
        cfg.format,
        on_bad_row=cfg.on_bad_row,
        min_user_interactions=cfg.min_user_interactions,
        max_users=cfg.max_users,
        seed=cfg.seed,
    )
    if cfg.descriptions_path is None:
        return dataset
    return attach_descriptions(dataset, cfg.descriptions_path, on_bad_row=cfg.on_bad_row)
