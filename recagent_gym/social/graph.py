"""The friendship graph between users: undirected, with a relationship label per link.

Sources, in the order :func:`graph_from_config` tries them: the dataset's own links (RecAgent CSV), a CSV file
(:func:`load_graph`), or a generated graph (:func:`generate_graph`):

- ``similarity``: each user's genre-preference vector is the genre distribution of their history (an item counts
  once per genre). Users are linked to their ``k`` most cosine-similar users, ``k`` chosen so that the symmetric
  union's mean degree is closest to ``mean_friends``. Users without a history have no preference vector: they get
  ``round(mean_friends)`` uniformly random friends instead.
- ``random``: an Erdős-Rényi graph G(n, p) with ``p = mean_friends / (n - 1)``.

Then every user gets ``random_k`` more friends uniformly at random (the paper's ``social_random_k``). All random
draws come from the ``rng`` passed in.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from recagent_gym.data.reader import BadRowMode, BadRows, read_table
from recagent_gym.data.schema import Dataset

if TYPE_CHECKING:
    from recagent_gym.data.config import DataConfig
    from recagent_gym.social.config import SocialConfig

DEFAULT_RELATIONSHIP = "friend"
_CHUNK = 1024


class SocialGraph:
    """Undirected links between dense user ids ``0..n_users-1``, each with a relationship label."""

    def __init__(self, n_users: int, links: Iterable[tuple[int, int, str]] = ()) -> None:
        if n_users < 0:
            raise ValueError(f"n_users must be >= 0, not {n_users}")
        self.n_users = n_users
        self._adj: list[dict[int, str]] = [{} for _ in range(n_users)]
        for u, v, relationship in links:
            self.add(u, v, relationship)

    def add(self, u: int, v: int, relationship: str = DEFAULT_RELATIONSHIP) -> None:
        """Link ``u`` and ``v`` (both directions); re-adding a link replaces its label."""
        u, v = int(u), int(v)
        for x in (u, v):
            if not 0 <= x < self.n_users:
                raise ValueError(f"user {x} is outside 0..{self.n_users - 1}")
        if u == v:
            raise ValueError(f"user {u} cannot be their own friend")
        self._adj[u][v] = relationship
        self._adj[v][u] = relationship

    def friends(self, u: int) -> tuple[int, ...]:
        """The user's friends, sorted by id."""
        return tuple(sorted(self._adj[u]))

    def relationship(self, u: int, v: int) -> str | None:
        return self._adj[u].get(v)

    def degree(self, u: int) -> int:
        return len(self._adj[u])

    def degrees(self) -> np.ndarray:
        return np.array([len(a) for a in self._adj], dtype=np.int64)

    @property
    def n_links(self) -> int:
        return int(self.degrees().sum()) // 2

    def to_frame(self) -> pd.DataFrame:
        """One row per link, ``user_1 < user_2``, sorted (the dataset's ``social`` table layout)."""
        rows = [(u, v, rel) for u in range(self.n_users) for v, rel in sorted(self._adj[u].items()) if u < v]
        return pd.DataFrame(
            {
                "user_1": np.array([r[0] for r in rows], dtype=np.int64),
                "user_2": np.array([r[1] for r in rows], dtype=np.int64),
                "relationship": [r[2] for r in rows],
            }
        )

    def get_state(self) -> dict[str, Any]:
        frame = self.to_frame()
        return {
            "n_users": self.n_users,
            "links": [[int(a), int(b), str(r)] for a, b, r in frame.itertuples(index=False)],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        fresh = SocialGraph(int(state["n_users"]), ((a, b, r) for a, b, r in state["links"]))
        self.n_users, self._adj = fresh.n_users, fresh._adj

    @classmethod
    def from_dataset(cls, dataset: Dataset) -> SocialGraph:
        """The dataset's own ``social`` table (links listed in both directions merge into one)."""
        social = dataset.social
        return cls(dataset.n_users, zip(social["user_1"], social["user_2"], social["relationship"], strict=True))


def generate_graph(
    dataset: Dataset,
    method: Literal["similarity", "random"] = "similarity",
    mean_friends: float = 4,
    random_k: int = 0,
    *,
    rng: np.random.Generator,
) -> SocialGraph:
    """A seeded friendship graph for a dataset without links (see the module docstring)."""
    n = dataset.n_users
    if mean_friends < 0 or random_k < 0:
        raise ValueError("mean_friends and random_k must be >= 0")
    graph = SocialGraph(n)
    if n < 2:
        return graph
    if method == "similarity":
        _similarity_links(graph, dataset, mean_friends, rng)
    elif method == "random":
        p = min(mean_friends / (n - 1), 1.0)
        for u in range(n - 1):
            for v in np.flatnonzero(rng.random(n - u - 1) < p) + u + 1:
                graph.add(u, int(v))
    else:
        raise ValueError(f"unknown graph method {method!r} (similarity or random)")
    for u in range(n):
        _random_friends(graph, u, random_k, rng)
    return graph


def _similarity_links(graph: SocialGraph, dataset: Dataset, mean_friends: float, rng: np.random.Generator) -> None:
    n = dataset.n_users
    genre = dataset.genre_matrix()
    inter = dataset.interactions
    users = inter["user_id"].to_numpy(np.int64)
    prefs = (
        np.stack(
            [
                np.bincount(users, weights=genre[inter["item_id"].to_numpy(np.int64), j], minlength=n)
                for j in range(genre.shape[1])
            ],
            axis=1,
        )
        if genre.shape[1]
        else np.zeros((n, 0))
    )
    prefs = prefs.astype(np.float64)  # bincount of no rows is int64
    norms = np.linalg.norm(prefs, axis=1)
    has = norms > 0
    vectors = np.divide(prefs, norms[:, None], out=np.zeros_like(prefs), where=has[:, None]).astype(np.float32)
    active = np.flatnonzero(has)
    k_max = min(max(int(np.ceil(mean_friends)), 1), len(active) - 1)
    neighbours = np.zeros((len(active), max(k_max, 0)), dtype=np.int64)
    if k_max > 0:
        sub = vectors[active]
        for start in range(0, len(active), _CHUNK):
            sims = sub[start : start + _CHUNK] @ sub.T
            rows = np.arange(sims.shape[0])
            sims[rows, rows + start] = -np.inf  # never oneself
            top = np.argpartition(-sims, k_max - 1, axis=1)[:, :k_max]
            order = _sort_top(sims, top)
            neighbours[start : start + len(rows)] = active[order]
        best_k, best_gap = 1, np.inf
        for k in range(1, k_max + 1):
            pairs = {(min(a, b), max(a, b)) for a, row in zip(active, neighbours[:, :k], strict=True) for b in row}
            gap = abs(2 * len(pairs) / len(active) - mean_friends)
            if gap < best_gap:
                best_k, best_gap = k, gap
        for a, row in zip(active, neighbours[:, :best_k], strict=True):
            for b in row:
                graph.add(int(a), int(b))
    for u in np.flatnonzero(~has):
        _random_friends(graph, int(u), round(mean_friends), rng)


def _sort_top(sims: np.ndarray, top: np.ndarray) -> np.ndarray:
    """The top columns of each row sorted by similarity, ties by user id (independent of the partition order)."""
    values = np.take_along_axis(sims, top, axis=1)
    order = np.lexsort((top, -values), axis=1)
    return np.take_along_axis(top, order, axis=1)


def _random_friends(graph: SocialGraph, u: int, k: int, rng: np.random.Generator) -> None:
    """Link ``u`` to ``k`` random users that are not yet its friends (fewer if too few remain)."""
    if k <= 0:
        return
    blocked = set(graph.friends(u)) | {u}
    candidates = np.array([v for v in range(graph.n_users) if v not in blocked], dtype=np.int64)
    for v in rng.choice(candidates, size=min(k, len(candidates)), replace=False):
        graph.add(u, int(v))


def load_graph(csv_path: str | Path, dataset: Dataset, *, on_bad_row: BadRowMode = "error") -> SocialGraph:
    """Links from a CSV ``user_1,user_2,relationship`` with the dataset's raw user ids (``relationship`` optional,
    default ``friend``; extra columns ignored). Unknown users and self-links name the file and line."""
    path = Path(csv_path)
    bad = BadRows(on_bad_row)
    table = read_table(
        path, ("user_1", "user_2"), sep=",", header=True, quoted=True, optional=("relationship",), bad=bad
    )
    index = pd.Index(dataset.users["raw_id"].astype(str))
    u1 = table.positions("user_1", table.text("user_1"), index, "user id (not in the dataset)")
    u2 = table.positions("user_2", table.text("user_2"), index, "user id (not in the dataset)")
    table.reject((u1 == u2) & (u1 >= 0), lambda r: f"user {table.columns['user_1'][r].strip()!r} linked to themself")
    bad.log_summary(str(path))
    ok = table.ok
    labels = [r or DEFAULT_RELATIONSHIP for r in table.text("relationship")[ok]]
    return SocialGraph(dataset.n_users, zip(u1[ok], u2[ok], labels, strict=True))


def graph_from_config(
    dataset: Dataset, data: DataConfig, social: SocialConfig, rng: np.random.Generator
) -> SocialGraph:
    """The dataset's links if it has any, else ``data.social_path`` if set, else a generated graph."""
    if len(dataset.social):
        return SocialGraph.from_dataset(dataset)
    if data.social_path:
        return load_graph(data.social_path, dataset, on_bad_row=data.on_bad_row)
    return generate_graph(dataset, social.generator, social.mean_friends, social.social_random_k, rng=rng)
