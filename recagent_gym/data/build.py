"""Turn a loader's tables (positions into its own item and user tables) into a :class:`Dataset` with dense ids.

Every loader ends here, so filtering, statistics and behaviour features are computed the same way for all formats.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from recagent_gym.data.schema import (
    INTERACTION_COLUMNS,
    ITEM_COLUMNS,
    SOCIAL_COLUMNS,
    USER_COLUMNS,
    Dataset,
)
from recagent_gym.data.stats import behaviour_features, user_statistics

logger = logging.getLogger(__name__)

_PROFILE_DEFAULTS: dict[str, object] = {
    "name": "",
    "gender": "",
    "age": -1,
    "traits": "",
    "career": "",
    "interests": (),
    "features": (),
}


@dataclass
class LoadOptions:
    """What every loader is asked to do besides parsing."""

    min_user_interactions: int = 0
    max_users: int | None = None
    seed: int = 0
    """Seeds the random part of derived behaviour features (see :mod:`recagent_gym.data.stats`)."""


@dataclass
class Parsed:
    """A loader's output before dense ids: ``interactions.user``/``item`` and ``social.user_1``/``user_2`` are row
    positions in ``users``/``items``. ``users`` has ``raw_id`` and any profile columns the format provides (given
    ``interests``/``features`` win over derived ones when non-empty)."""

    name: str
    items: pd.DataFrame
    users: pd.DataFrame
    interactions: pd.DataFrame
    social: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({"user_1": [], "user_2": [], "relationship": []}))
    user_tag_counts: np.ndarray | None = None
    """Tags written per user (datasets with tags), for the Poster feature."""


def assemble(parsed: Parsed, options: LoadOptions, skipped_rows: int) -> Dataset:
    """Filter users, assign dense ids, compute statistics and features, and validate."""
    users = parsed.users.reset_index(drop=True)
    inter = parsed.interactions
    counts = np.bincount(inter["user"].to_numpy(np.int64), minlength=len(users))
    minimum = options.min_user_interactions
    if inter.empty and minimum > 0:
        # A profiles-only dataset (RecAgent CSV without interactions) would otherwise lose every user.
        logger.info("%s: no interactions, so min_user_interactions=%d is not applied", parsed.name, minimum)
        minimum = 0
    keep = counts >= minimum
    if options.max_users is not None:
        keep &= np.cumsum(keep) <= options.max_users
    dropped = int((~keep).sum())
    if dropped:
        logger.info(
            "%s: kept %d of %d users (min_user_interactions=%d, max_users=%s)",
            parsed.name,
            int(keep.sum()),
            len(users),
            minimum,
            options.max_users,
        )
    new_id = np.where(keep, np.cumsum(keep) - 1, -1)

    user_ids = new_id[inter["user"].to_numpy(np.int64)]
    kept_rows = user_ids >= 0
    interactions = pd.DataFrame(
        {
            "user_id": user_ids[kept_rows].astype(np.int64),
            "item_id": inter["item"].to_numpy(np.int64)[kept_rows],
            "rating": inter["rating"].to_numpy(np.float64)[kept_rows],
            "timestamp": inter["timestamp"].to_numpy(np.int64)[kept_rows],
        },
        columns=list(INTERACTION_COLUMNS),
    )
    interactions = interactions.sort_values(["user_id", "timestamp"], kind="stable").reset_index(drop=True)

    items = parsed.items.reset_index(drop=True).copy()
    items.insert(0, "item_id", np.arange(len(items), dtype=np.int64))
    items = items[list(ITEM_COLUMNS)]
    genres = tuple(sorted({g for gs in items["genres"] for g in gs}))

    users = users[keep].reset_index(drop=True)
    for column, default in _PROFILE_DEFAULTS.items():
        if column not in users:
            users[column] = [default] * len(users)
    users.insert(0, "user_id", np.arange(len(users), dtype=np.int64))
    stats = user_statistics(interactions, items["genres"], len(users), genres)
    tags = parsed.user_tag_counts[keep] if parsed.user_tag_counts is not None else None
    derived = behaviour_features(stats, tags, np.random.default_rng(options.seed))
    users["interests"] = [given or top for given, top in zip(users["interests"], stats["interests"], strict=True)]
    users["features"] = [given or feats for given, feats in zip(users["features"], derived, strict=True)]
    for column in ("activity", "diversity", "conformity"):
        users[column] = stats[column].to_numpy()
    users["age"] = users["age"].astype(np.int64)
    users = users[list(USER_COLUMNS)]

    social = _remap_social(parsed, new_id)
    dataset = Dataset(parsed.name, items, users, interactions, social, skipped_rows=skipped_rows)
    dataset.validate()
    return dataset


def _remap_social(parsed: Parsed, new_id: np.ndarray) -> pd.DataFrame:
    social = parsed.social
    if social.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "relationship" else np.int64) for c in SOCIAL_COLUMNS})
    u1 = new_id[social["user_1"].to_numpy(np.int64)]
    u2 = new_id[social["user_2"].to_numpy(np.int64)]
    kept = (u1 >= 0) & (u2 >= 0)
    if not kept.all():
        logger.info("%s: %d social links dropped with their filtered-out users", parsed.name, int((~kept).sum()))
    return pd.DataFrame(
        {"user_1": u1[kept], "user_2": u2[kept], "relationship": social["relationship"].to_numpy(object)[kept]}
    )
