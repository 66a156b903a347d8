"""Small inputs of the file-hardening tests, written by the tests themselves: decision-log parts of the bundled
dataset's users (valid, then damaged), the bundled distilled model's folder, and byte-level damage."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from recagent_gym.runs.cli import main
from recagent_gym.runs.distill import logs
from recagent_gym.users.distilled.user import BUNDLED_DIR

BUNDLED_ITEMS = 9742
"""Items of the bundled dataset (the default config's)."""


def bundled_users() -> list[int]:
    """Two held-out and two training users of the bundled distilled model."""
    meta = json.loads((BUNDLED_DIR / "model.json").read_text())
    return [*meta["test_users"][:2], *meta["train_users"][:2]]


def decision_rows(users: list[int], n_items: int, *, pages: int = 3, seed: int = 0) -> list[dict[str, Any]]:
    """Plausible decision rows (the columns of ``users collect``): one session per user and source."""
    rng = np.random.default_rng(seed)
    rows, session = [], 0
    for user in users:
        for source in ("random", "popular"):
            for page in range(pages):
                shown = [int(i) for i in rng.choice(n_items, 5, replace=False)]
                scores = [float(s) for s in rng.normal(0.0, 1.0, 5)]
                last = page == pages - 1
                action = str(rng.choice(["watch", "next", "search", "leave"] if last else ["watch", "next"]))
                position = int(np.argmax(scores)) if action == "watch" else -1
                rows.append({
                    "session_id": session, "user_id": user, "source": source, "page_index": page,
                    "page_source": "recommender", "watched_count": 0, "patience_before": 3.0, "patience_left": 2.0,
                    "items": shown, "shown": shown, "permutation": list(range(5)), "scores": scores,
                    "llm_scores": scores, "embedding_scores": [0.0] * 5, "threshold": 0.5, "p_watch": 0.4,
                    "action": action, "item": shown[position] if position >= 0 else -1, "position": position,
                    "rating": 4.0 if action == "watch" else float("nan"), "query": "", "fallback": False,
                    "reward": 1.0 if action == "watch" else 0.0,
                })  # fmt: skip
            session += 1
    return rows


def bundled_logs(folder: Path, seed: int = 0) -> Path:
    """A valid collection of the bundled dataset: one part and its ``collect.json``."""
    logs.write_part(folder, decision_rows(bundled_users(), BUNDLED_ITEMS, seed=seed))
    meta = {"dataset": "ml-latest-small (bundled)", "sources": ["random", "popular"], "seed": 0, "page_size": 5,
            "max_pages": 3, "model": "test", "sessions": 8}  # fmt: skip
    logs.write_meta(folder, meta)
    return folder


def model_copy(folder: Path) -> Path:
    """The bundled distilled model's two files, copied (to be damaged)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("model.json", "weights.npz"):
        shutil.copy(BUNDLED_DIR / name, folder / name)
    return folder


def write_frame(path: Path, frame: pd.DataFrame) -> Path:
    frame.to_parquet(path, index=False)
    return path


def flip_bit(path: Path, offset: int, bit: int = 0) -> Path:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))
    return path


def truncate(path: Path, keep: float = 0.5) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def one_error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the command in process: exit 2, one ``recagent-gym:`` line on stderr, no traceback; the line."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("recagent-gym: "), err
    return lines[0]
