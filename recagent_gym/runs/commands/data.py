"""``recagent-gym data info DATASET`` (counts) and ``recagent-gym data download ml-1m|ml-100k``."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

import numpy as np

from recagent_gym.data.download import ARCHIVES, URL_ENV, download
from recagent_gym.data.load import FORMATS, load_dataset, resolve
from recagent_gym.data.schema import Dataset


def register(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("data", help="inspect and download datasets")
    commands = data.add_subparsers(dest="data_command", required=True)

    info = commands.add_parser("info", help="print the counts of a dataset")
    info.add_argument("dataset", help="'bundled' or a MovieLens-1M, MovieLens-100K, latest or RecAgent-CSV folder")
    info.add_argument("--format", default="auto", choices=("auto", *FORMATS))
    info.add_argument(
        "--on-bad-row",
        default="error",
        choices=("error", "skip"),
        help="stop at the first malformed row (default) or skip and count malformed rows",
    )
    info.add_argument(
        "--min-user-interactions",
        type=int,
        default=0,
        metavar="N",
        help="drop users with fewer interactions (default 0: count every user)",
    )
    info.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    info.set_defaults(func=_info)

    fetch = commands.add_parser("download", help="download and unpack an official MovieLens archive")
    fetch.add_argument("name", choices=tuple(ARCHIVES))
    fetch.add_argument("--dir", default=".", help="parent folder; the data lands in DIR/<name> (default: .)")
    fetch.add_argument("--url", default=None, help=f"archive URL (default: ${URL_ENV}/<name>.zip, else GroupLens)")
    fetch.add_argument("--sha256", default=None, help="expected SHA-256 of the archive (for a mirror's own bytes)")
    fetch.add_argument("--force", action="store_true", help="replace an existing DIR/<name>")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bar")
    fetch.set_defaults(func=_download)


def summarize(dataset: Dataset) -> dict[str, Any]:
    """The counts ``data info`` prints, as plain data."""
    inter = dataset.interactions
    ratings = inter["rating"].dropna()
    stamps = inter["timestamp"]
    per_user = np.bincount(inter["user_id"].to_numpy(np.int64), minlength=dataset.n_users)
    return {
        "name": dataset.name,
        "users": dataset.n_users,
        "users_with_interactions": int((per_user > 0).sum()),
        "items": dataset.n_items,
        "interactions": len(inter),
        "explicit_ratings": len(ratings),
        "rating_min": float(ratings.min()) if len(ratings) else None,
        "rating_max": float(ratings.max()) if len(ratings) else None,
        "interactions_per_user_median": float(np.median(per_user)) if dataset.n_users else None,
        "genres": list(dataset.genres),
        "time_start": _date(stamps.min()) if len(inter) else None,
        "time_end": _date(stamps.max()) if len(inter) else None,
        "items_with_tags": int((dataset.items["tags"] != "").sum()),
        "items_with_description": int((dataset.items["description"] != "").sum()),
        "social_links": len(dataset.social),
        "skipped_rows": dataset.skipped_rows,
    }


def _date(timestamp: int) -> str:
    return datetime.fromtimestamp(int(timestamp), tz=UTC).strftime("%Y-%m-%d")


def _info(args: argparse.Namespace) -> int:
    folder, fmt = resolve(args.dataset, args.format)
    dataset = load_dataset(
        args.dataset, args.format, on_bad_row=args.on_bad_row, min_user_interactions=args.min_user_interactions
    )
    summary = {"path": str(folder), "format": fmt, **summarize(dataset)}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    rating_range = (
        f"{summary['rating_min']:g} .. {summary['rating_max']:g}" if summary["rating_min"] is not None else "none"
    )
    rows = [
        ("dataset", f"{summary['name']} ({fmt}, {folder})"),
        ("users", f"{summary['users']} ({summary['users_with_interactions']} with interactions)"),
        ("items", summary["items"]),
        ("interactions", f"{summary['interactions']} ({summary['explicit_ratings']} explicit ratings)"),
        ("ratings range", rating_range),
        ("per user (median)", summary["interactions_per_user_median"]),
        ("time span", f"{summary['time_start']} .. {summary['time_end']}" if summary["time_start"] else "none"),
        ("genres", f"{len(summary['genres'])}: {', '.join(summary['genres'])}"),
        ("items with tags", summary["items_with_tags"]),
        ("items with text", summary["items_with_description"]),
        ("social links", summary["social_links"]),
        ("skipped rows", summary["skipped_rows"]),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def _download(args: argparse.Namespace) -> int:
    folder = download(
        args.name, args.dir, url=args.url, sha256=args.sha256, force=args.force, progress=not args.no_progress
    )
    print(folder)
    return 0
