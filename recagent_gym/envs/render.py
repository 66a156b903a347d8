"""The env's renderings of the last step: a text line (``ansi``) and a small picture (``rgb_array``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.session import SessionTables

CELL = 8
"""Pixels per genre column and per page row of the picture."""


def render_ansi(dataset: Dataset, info: dict[str, Any], user: int | None) -> str:
    """``user U page P: [titles] -> response item (rating)``."""
    if not info:
        return f"user {user}: session started"
    titles = dataset.items["title"]
    page = ", ".join(str(titles.iloc[i]) for i in info["page"])
    line = f"user {info['user_id']} page {info['page_index']}: [{page}] -> {info['response']}"
    if info.get("item") is not None:
        line += f" {titles.iloc[info['item']]!s} ({info.get('rating')})"
    return line


def render_rgb(tables: SessionTables, info: dict[str, Any], page_size: int) -> np.ndarray:
    """One row per page slot, one column per genre (grey level: the item's genre share); the watched item's row
    green, the page's rows red when the user left. ``(page_size * CELL, n_genres * CELL, 3)`` uint8."""
    rows = np.zeros((page_size, tables.n_genres, 3), dtype=np.uint8)
    for slot, item in enumerate(info.get("page", ())):
        shade = (255 * np.clip(tables.topics[item] * 2.0, 0.0, 1.0)).astype(np.uint8)
        rows[slot] = shade[:, None]
        if item == info.get("item"):
            rows[slot, :, 0] = rows[slot, :, 2] = 0
        elif info.get("response") == "leave":
            rows[slot, :, 1] = rows[slot, :, 2] = 0
    return np.repeat(np.repeat(rows, CELL, axis=0), CELL, axis=1)
