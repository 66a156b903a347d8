"""Small synthetic datasets (built in memory, following ``data/schema.py``) for the env and baseline tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from recagent_gym.data.schema import Dataset

GENRES = ("Action", "Comedy", "Drama", "Horror", "Romance", "Sci-Fi")


def make_dataset(n_users: int = 40, n_items: int = 150, per_user: int = 12, seed: int = 0) -> Dataset:
    """Users with a favourite genre who rate that genre's items higher; dense ids; no social links."""
    rng = np.random.default_rng(seed)
    item_genres = [
        tuple(sorted({GENRES[g] for g in rng.choice(len(GENRES), size=rng.integers(1, 3), replace=False)}))
        for _ in range(n_items)
    ]
    items = pd.DataFrame(
        {
            "item_id": np.arange(n_items),
            "raw_id": [str(1000 + i) for i in range(n_items)],
            "title": [f"Movie {i}" for i in range(n_items)],
            "genres": item_genres,
            "year": rng.integers(1950, 2020, size=n_items),
            "description": ["" for _ in range(n_items)],
            "tags": ["space robots" if "Sci-Fi" in g else "" for g in item_genres],
        }
    )
    favourite = rng.integers(0, len(GENRES), size=n_users)
    rows = []
    for u in range(n_users):
        fav_items = [i for i, g in enumerate(item_genres) if GENRES[favourite[u]] in g]
        pool = np.concatenate([rng.choice(fav_items, size=per_user // 2), rng.integers(0, n_items, size=per_user)])
        for t, i in enumerate(dict.fromkeys(pool.tolist())):
            liked = GENRES[favourite[u]] in item_genres[i]
            rows.append((u, i, float(np.clip(rng.normal(4.2 if liked else 2.6, 0.6), 1, 5)), 1_000_000 + 60 * t))
    interactions = pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])
    users = pd.DataFrame(
        {
            "user_id": np.arange(n_users),
            "raw_id": [str(u + 1) for u in range(n_users)],
            "name": [f"User {u}" for u in range(n_users)],
            "gender": ["F" if u % 2 else "M" for u in range(n_users)],
            "age": rng.integers(18, 70, size=n_users),
            "traits": ["curious"] * n_users,
            "career": ["engineer"] * n_users,
            "interests": [(GENRES[f],) for f in favourite],
            "features": [("Watcher",)] * n_users,
            "activity": rng.random(n_users),
            "diversity": rng.random(n_users),
            "conformity": rng.random(n_users),
        }
    )
    dataset = Dataset(name="synthetic", items=items, users=users, interactions=interactions)
    dataset.validate()
    return dataset
