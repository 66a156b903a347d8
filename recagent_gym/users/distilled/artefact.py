"""The distilled model on disk, as plain data: ``weights.npz`` (arrays, loaded with ``allow_pickle=False``) and
``model.json`` (dataset, logs hash, settings, rule parameters, metrics). No pickle anywhere."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.users.distilled.errors import DistillError

FORMAT = 1
WEIGHTS = "weights.npz"
META = "model.json"
TABLES = ("user_table", "item_table", "item_offset", "threshold", "search_interest")


@dataclass
class Artefact:
    arrays: dict[str, np.ndarray]
    meta: dict[str, Any]

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(folder / WEIGHTS, **self.arrays)
        (folder / META).write_text(json.dumps(self.meta, indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, folder: str | Path) -> Artefact:
        folder = Path(folder)
        if not (folder / WEIGHTS).is_file() or not (folder / META).is_file():
            raise DistillError(f"{folder}: not a distilled user model (needs {WEIGHTS} and {META})")
        meta = json.loads((folder / META).read_text())
        if meta.get("format") != FORMAT:
            raise DistillError(f"{folder}: distilled model format {meta.get('format')!r}, this version reads {FORMAT}")
        with np.load(folder / WEIGHTS, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        missing = [k for k in TABLES if k not in arrays]
        if missing:
            raise DistillError(f"{folder}/{WEIGHTS} lacks {', '.join(missing)}")
        return cls(arrays, meta)
