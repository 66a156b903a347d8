"""Recommenders fitted on a history (a training split): each scores any ``(user, items)``.

They rank a candidate pool (``evaluate agreement``) through :class:`~recagent_gym.policies.candidate_baselines.
ScoredCandidates`, which answers SB3's ``predict`` on RecAgent-v1. Higher scores come first.

==============  =========================================================================================
``itemknn``     item-based kNN: cosine between items' user columns, summed over the user's history items
``mf``          rank-``dim`` SVD of the binary user x item matrix (RecAgent-v1's retrieval MF)
``lightgcn``    LightGCN (He et al. 2020): ``layers`` rounds of neighbourhood averaging over the user-item graph,
                embeddings trained with a softmax over every item (cross-entropy; with BPR's one sampled negative
                it trails the plain MF on full-ranking recall at any budget affordable here:
                ``benchmarks/bench_history_recall.py``), or with BPR (``loss="bpr"``; with ``layers=0`` that is
                BPR-MF); torch, one thread: a model this small is fastest on one
``anti-oracle`` the user's real future items last (:class:`FutureLast`; the agreement test's oracle, which spreads
                the future over the pages, and popularity read the env: ``policies.candidate_baselines``)
==============  =========================================================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy import sparse

from recagent_gym.data.schema import Dataset


def interaction_matrix(dataset: Dataset) -> sparse.csr_matrix:
    """Binary ``(n_users, n_items)`` matrix of the dataset's interactions."""
    inter = dataset.interactions
    rows, cols = inter["user_id"].to_numpy(np.int64), inter["item_id"].to_numpy(np.int64)
    matrix = sparse.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(dataset.n_users, dataset.n_items))
    matrix.data[:] = 1.0  # duplicates summed above: binary again
    return matrix


class ItemKNN:
    """``score(u, j) = sum_{h in H_u} cos(h, j)``, computed as ``X_j . (X @ (x_u / |X|)) / |X_j|`` (no item x item
    matrix is ever formed)."""

    def __init__(self, dataset: Dataset) -> None:
        self._x = interaction_matrix(dataset)
        self._xt = self._x.T.tocsr()
        norms = np.sqrt(np.asarray(self._x.sum(axis=0)).reshape(-1))
        self._inv_norm = np.where(norms > 0, 1.0 / np.maximum(norms, 1e-12), 0.0)

    def scores(self, user: int, items: np.ndarray) -> np.ndarray:
        row = self._x.getrow(user)
        weights = row.multiply(self._inv_norm[None, :]).tocsr()  # (1, n_items)
        per_user = np.asarray((self._x @ weights.T).todense()).reshape(-1)  # (n_users,)
        sub = self._xt[items]  # (len(items), n_users)
        return np.asarray(sub @ per_user).reshape(-1) * self._inv_norm[items]


class RecentPopularity:
    """``score(u, j)``: ratings item ``j`` got, from anyone, in the ``days`` before user ``u``'s last rating of the
    history (nothing later is read): what was being watched at the user's time (``benchmarks/
    probe_user_time_popularity.py``, ``benchmarks/probe_page_calibration.py``)."""

    def __init__(self, dataset: Dataset, days: float = 365.0) -> None:
        inter = dataset.interactions
        stamps = inter["timestamp"].to_numpy(np.int64)
        order = np.argsort(stamps, kind="stable")
        self._stamps, self._items = stamps[order], inter["item_id"].to_numpy(np.int64)[order]
        self._last = inter.groupby("user_id")["timestamp"].max()
        self._window = int(days * 86_400)
        self.n_items = dataset.n_items

    def counts(self, user: int) -> np.ndarray:
        """``(n_items,)`` rating counts in the user's window (zeros for a user without history)."""
        if user not in self._last.index:
            return np.zeros(self.n_items)
        now = int(self._last[user])
        lo = np.searchsorted(self._stamps, now - self._window, "left")
        hi = np.searchsorted(self._stamps, now, "right")
        return np.bincount(self._items[lo:hi], minlength=self.n_items).astype(np.float64)

    def scores(self, user: int, items: np.ndarray) -> np.ndarray:
        return self.counts(user)[items]


class SVDScores:
    def __init__(self, dataset: Dataset, dim: int = 32) -> None:
        from recagent_gym.recommenders.svd import svd_factors

        self.user_factors, self.item_factors = svd_factors(dataset, dim)

    def scores(self, user: int, items: np.ndarray) -> np.ndarray:
        return self.item_factors[items] @ self.user_factors[user]


class LightGCN:
    """LightGCN on the history; see the module docstring. Deterministic for a seed. ``loss``: ``softmax`` (every
    item a negative; ``epochs``, ``batch`` default to 10 and 1,024) or ``bpr`` (one uniform negative per positive,
    an L2 penalty ``l2``; 30 and 8,192)."""

    def __init__(
        self,
        dataset: Dataset,
        *,
        dim: int = 64,
        layers: int = 2,
        loss: str = "softmax",
        epochs: int | None = None,
        batch: int | None = None,
        lr: float = 0.005,
        l2: float = 1e-4,
        seed: int = 0,
    ) -> None:
        import torch

        if loss not in ("softmax", "bpr"):
            raise ValueError(f"LightGCN loss must be 'softmax' or 'bpr', not {loss!r}")
        softmax = loss == "softmax"
        epochs = epochs if epochs is not None else (10 if softmax else 30)
        batch = batch if batch is not None else (1024 if softmax else 8192)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            self.user_factors, self.item_factors = self._fit(
                dataset, dim, layers, epochs, batch, lr, l2 if not softmax else 0.0, seed, softmax
            )
        finally:
            torch.set_num_threads(threads)

    @staticmethod
    def _fit(
        dataset: Dataset, dim: int, layers: int, epochs: int, batch: int, lr: float, l2: float, seed: int,
        softmax: bool,
    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        import torch

        n_users, n_items = dataset.n_users, dataset.n_items
        x = interaction_matrix(dataset).tocoo()
        users, items = x.row.astype(np.int64), x.col.astype(np.int64)
        deg = np.concatenate([np.asarray(x.sum(axis=1)).reshape(-1), np.asarray(x.sum(axis=0)).reshape(-1)])
        inv = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-12)), 0.0)
        rows = np.concatenate([users, items + n_users])
        cols = np.concatenate([items + n_users, users])
        values = inv[rows] * inv[cols]
        adj = torch.sparse_coo_tensor(
            torch.from_numpy(np.vstack([rows, cols])), torch.from_numpy(values.astype(np.float32)),
            (n_users + n_items, n_users + n_items), check_invariants=False,
        ).coalesce()  # fmt: skip
        generator = torch.Generator().manual_seed(seed)
        emb = torch.nn.Parameter(torch.randn(n_users + n_items, dim, generator=generator) * 0.1)
        optimiser = torch.optim.Adam([emb], lr=lr)
        seen = np.unique(users * n_items + items)
        rng = np.random.default_rng(seed)
        # at most 20 (BPR) or 100 (softmax) propagations per epoch on large histories
        batch = max(batch, len(users) // (100 if softmax else 20))

        def propagate() -> torch.Tensor:
            out, layer = emb, emb
            for _ in range(layers):
                layer = torch.sparse.mm(adj, layer)
                out = out + layer
            return out / (layers + 1)

        tu, ti = torch.from_numpy(users), torch.from_numpy(items)
        for _ in range(epochs):
            order = torch.randperm(len(users), generator=generator)
            if not softmax:  # BPR's one negative per positive (the softmax reads every item)
                negatives = rng.integers(0, n_items, size=len(users))
                clash = np.isin(users * n_items + negatives, seen)  # negatives that are positives: redrawn once
                negatives[clash] = rng.integers(0, n_items, size=int(clash.sum()))
                tn = torch.from_numpy(negatives)
            for idx in order.split(batch):
                final = propagate()
                if softmax:
                    logits = final[tu[idx]] @ final[n_users:].T
                    loss = torch.nn.functional.cross_entropy(logits, ti[idx])
                else:
                    u, p, n = final[tu[idx]], final[n_users + ti[idx]], final[n_users + tn[idx]]
                    loss = -torch.nn.functional.logsigmoid((u * p).sum(-1) - (u * n).sum(-1)).mean()
                    loss = loss + l2 * (emb[tu[idx]].pow(2).sum() + emb[n_users + ti[idx]].pow(2).sum()) / len(idx)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        with torch.no_grad():
            final = propagate().numpy()
        return final[:n_users].copy(), final[n_users:].copy()

    def scores(self, user: int, items: np.ndarray) -> np.ndarray:
        return self.item_factors[items] @ self.user_factors[user]


class FutureLast:
    """Knows each user's real future and ranks it last (the agreement test's anti-oracle)."""

    def __init__(self, future: Mapping[int, Sequence[int]]) -> None:
        self.future = {int(u): {int(i) for i in f} for u, f in future.items()}

    def scores(self, user: int, items: np.ndarray) -> np.ndarray:
        future = self.future.get(int(user), set())
        return np.array([-1.0 if int(i) in future else 0.0 for i in items], dtype=np.float64)
