"""The schema of a behavioural-prior weights file (``prior.json`` of ``recagent-gym calibrate``), checked whole, once.

``user.prior_weights`` is checked when the configuration is loaded (:func:`recagent_gym.runs.config.config_from_dict`),
so a missing file, a weight that is NaN or infinite, or a ``window_days`` that is no positive number stops every
command before it creates a run folder, instead of ending a run with 0 watches or failing mid-round. The prior itself
(``users/agent/prior.py``) reads its weights through :func:`read_prior_file` too. Kept apart from the prior so that
the configuration's loader can check a file without importing the LLM agent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recagent_gym.data.schema import DataError

FEATURES: tuple[str, ...] = ("popularity", "popularity_x_mainstream", "trend", "recency", "rating_scale", "affinity")
"""The prior's features, in the order of its feature rows (files written before ``affinity`` existed weigh it 0)."""
PORTABLE_FEATURES: frozenset[str] = frozenset({"affinity"})
"""Prior terms whose fitted weight carries to another dataset: the user's collaborative affinity is read from each
dataset's own history and ranks items within a user's own catalogue, whereas the other terms price one catalogue's
popularity, fashion and rating scale."""
LLM = "llm"
"""Key of the LLM score's weight in a weights file."""
PARTS: tuple[str, ...] = ("llm_score", "embedding")
"""The LLM agent's item score taken apart: the LLM's own score and the embedding relevance (before their config
weights ``user.score_llm_weight`` / ``score_embedding_weight``)."""
BLOCKS: tuple[str, ...] = ("both", "prior_only")
"""The fits a calibrate file holds: ``both`` (LLM + prior; absent when calibrated without the LLM), ``prior_only``."""
INTERCEPT = "intercept"
"""Optional weight of the ``parts`` fit: a constant added to every item's choice score (a shift of the watch
threshold), fitted by ``recagent-gym users fit-agreement``; 0 where absent (``calibrate``'s files)."""
PARTS_BLOCK = "parts"
"""The fit with the agent's score taken apart (:data:`PARTS`, each its own weight, with the features): stored under
``parts_fits.parts.weights`` by ``recagent-gym calibrate`` with the LLM; ``user.prior_fit: parts`` uses it."""
FIT_MADE_BY = "recagent-gym users fit-agreement"
"""``meta.made_by`` of the files ``users fit-agreement`` writes (else a ``calibrate`` file)."""
DEFAULT_WINDOW_DAYS = 180.0


@dataclass(frozen=True)
class PriorFile:
    """A checked weights file: each fit present (weight name to finite number), the trend window, the rest."""

    path: Path
    fits: Mapping[str, Mapping[str, float]]
    window_days: float
    meta: Mapping[str, Any]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_fit(file: Path, name: str, block: Any, scores: tuple[str, ...] = (LLM,)) -> dict[str, float]:
    if not isinstance(block, dict):
        raise DataError(f"prior weights {file}: {name!r} must map weight names to numbers, got {type(block).__name__}")
    known = [*scores, *FEATURES]
    unknown = sorted(set(block) - set(known))
    if unknown:
        raise DataError(f"prior weights {file}: unknown weights {unknown} in {name!r} (known: {known})")
    for key, value in block.items():
        if not _is_number(value) or not math.isfinite(value):
            raise DataError(f"prior weights {file}: {name}.{key} is {value!r}, not a finite number")
    return {key: float(value) for key, value in block.items()}


def read_prior_file(path: str | Path) -> PriorFile:
    """The whole file checked (see the module docstring); a :class:`DataError` naming the file and the field."""
    file = Path(path)
    if file.exists() and not file.is_file():  # a folder, or a pipe or device that would block the read
        raise DataError(f"prior weights {file}: not a file")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"prior weights {file}: no such file (write one with `recagent-gym calibrate`)") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"prior weights {file}: not a calibrate file ({exc})") from None
    if not isinstance(data, dict):
        raise DataError(f"prior weights {file}: not a calibrate file (a JSON object with {list(BLOCKS)})")
    fits = {name: _check_fit(file, name, data[name]) for name in BLOCKS if name in data}
    parts = data.get("parts_fits", {})
    if not isinstance(parts, dict) or not isinstance(parts.get(PARTS_BLOCK, {}), dict):
        raise DataError(f"prior weights {file}: parts_fits must map fit names to {{'weights': ...}}")
    if PARTS_BLOCK in parts:
        weights = parts[PARTS_BLOCK].get("weights")
        fits[PARTS_BLOCK] = _check_fit(file, f"parts_fits.{PARTS_BLOCK}.weights", weights, (*PARTS, INTERCEPT))
    if not fits:
        raise DataError(f"prior weights {file}: no weights (a calibrate file holds {' and/or '.join(BLOCKS)})")
    window = data.get("window_days", DEFAULT_WINDOW_DAYS)
    if not _is_number(window) or not math.isfinite(window) or window <= 0:
        raise DataError(f"prior weights {file}: window_days is {window!r}, not a number of days > 0")
    meta = {key: value for key, value in data.items() if key not in (*BLOCKS, "parts_fits")}
    return PriorFile(file, fits, float(window), meta)


def is_fit_file(path: str | Path | None) -> bool:
    """Whether ``path`` is a ``users fit-agreement`` file (else a ``calibrate`` file, or none)."""
    return path is not None and read_prior_file(path).meta.get("made_by") == FIT_MADE_BY
