"""More recommenders fitted on a history, for the agreement test's zoo: each scores any ``(user, items)``.

==================  =====================================================================================
``userknn``         user-based kNN: the ``k`` most cosine-similar users' interactions, weighted by similarity
``ease``            EASE (Steck 2019): a closed-form item x item linear model, ``B = I - P / diag(P)`` with
                    ``P = (X'X + l2 I)^-1`` over the items the history holds
``gru4rec``         a small GRU4Rec (Hidasi et al. 2016; cross-entropy over the whole catalogue, as in Hidasi &
                    Czapienko 2023): a GRU over the user's items in time order, trained on next-item prediction
==================  =====================================================================================

BPR-MF is LightGCN with no propagation layer (``history_scorers.LightGCN(layers=0)``); the recent-popularity row
is ``history_scorers.RecentPopularity``.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from recagent_gym.data.schema import Dataset
from recagent_gym.recommenders.history_scorers import interaction_matrix


class UserKNN:
    """``score(u, j) = sum_{v in N_k(u)} cos(u, v) x_vj`` over the ``k`` nearest other users."""

    def __init__(self, dataset: Dataset, k: int = 50) -> None:
        x = interaction_matrix(dataset)
        norms = np.sqrt(np.asarray(x.sum(axis=1)).reshape(-1))
        inv = np.where(norms > 0, 1.0 / np.maximum(norms, 1e-12), 0.0)
        self._xn = sparse.diags(inv.astype(np.float32)) @ x
        self._x = x
        self.k = k
        self._cache: dict[int, np.ndarray] = {}

    def _neighbour_scores(self, user: int) -> np.ndarray:
        if user not in self._cache:
            sims = np.asarray((self._xn @ self._xn.getrow(user).T).todense()).reshape(-1)
            sims[user] = 0.0
            k = min(self.k, len(sims) - 1)
            top = np.argpartition(-sims, k)[:k] if k > 0 else np.zeros(0, np.int64)
            weights = np.zeros_like(sims)
            weights[top] = sims[top]
            self._cache[user] = np.asarray(self._x.T @ weights).reshape(-1)
        return self._cache[user]

    def scores(self, user: int, items: np.ndarray) -> np.ndarray:
        return self._neighbour_scores(int(user))[np.asarray(items, np.int64)]


class EASE:
    """EASE over the items with at least one interaction in the history (the others score 0, below any seen item's
    positive score only when the user's row reaches it)."""

    def __init__(self, dataset: Dataset, l2: float = 200.0) -> None:
        x = interaction_matrix(dataset)
        self._x = x
        self._items = np.flatnonzero(np.asarray(x.sum(axis=0)).reshape(-1) > 0)
        sub = x[:, self._items]
        gram = np.asarray((sub.T @ sub).todense(), dtype=np.float32)  # float32: half the time of float64
        gram[np.diag_indices_from(gram)] += l2
        p = np.linalg.inv(gram)
        b = -p / np.diag(p)[None, :]
        b[np.diag_indices_from(b)] = 0.0
        self._b = b.astype(np.float32)
        self._position = np.full(dataset.n_items, -1, np.int64)
        self._position[self._items] = np.arange(len(self._items))

    def scores(self, user: int, items: np.ndarray) -> np.ndarray:
        items = np.asarray(items, np.int64)
        row = self._x.getrow(int(user))
        history = self._position[row.indices]
        history = history[history >= 0]
        pos = self._position[items]
        out = np.zeros(len(items), np.float64)
        known = pos >= 0
        out[known] = self._b[np.ix_(history, pos[known])].sum(axis=0) if len(history) else 0.0
        return out


class GRU4Rec:
    """A GRU over each user's history in time order (the last ``max_len`` items), trained on next-item prediction
    with a softmax over every item (item embeddings tied between input and output); a user's score of an item is
    the dot product of the GRU's last state with the item's embedding. Deterministic for a seed (one torch
    thread)."""

    def __init__(
        self, dataset: Dataset, *, dim: int = 64, max_len: int = 30, epochs: int = 15, batch: int = 32,
        lr: float = 0.003, seed: int = 0,
    ) -> None:  # fmt: skip
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            self._fit(dataset, dim, max_len, epochs, batch, lr, seed)
        finally:
            torch.set_num_threads(threads)

    def _fit(self, dataset: Dataset, dim: int, max_len: int, epochs: int, batch: int, lr: float, seed: int) -> None:
        import torch

        inter = dataset.interactions.sort_values(["user_id", "timestamp"], kind="stable")
        n_items = dataset.n_items
        seqs = np.zeros((dataset.n_users, max_len + 1), np.int64)  # 0 pads; items are shifted by one
        for user, items in inter.groupby("user_id")["item_id"]:
            tail = items.to_numpy(np.int64)[-(max_len + 1) :] + 1
            seqs[int(user), -len(tail) :] = tail
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        emb = torch.nn.Embedding(n_items + 1, dim, padding_idx=0)
        gru = torch.nn.GRU(dim, dim, batch_first=True)
        params = [*emb.parameters(), *gru.parameters()]
        optimiser = torch.optim.Adam(params, lr=lr)
        data = torch.from_numpy(seqs)
        rows = torch.nonzero((data[:, 1:] > 0).sum(dim=1) > 0).reshape(-1)
        for _ in range(epochs):
            for idx in rows[torch.randperm(len(rows), generator=generator)].split(batch):
                inputs, targets = data[idx, :-1], data[idx, 1:].clone()
                targets[inputs == 0] = 0  # no prediction from padding
                states, _ = gru(emb(inputs))
                logits = states @ emb.weight.T  # (b, len, n_items + 1); index 0 (padding) is never a target
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, n_items + 1), targets.reshape(-1),
                                                         ignore_index=0)  # fmt: skip
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        with torch.no_grad():
            last, _ = gru(emb(data[:, 1:]))
            self.user_factors = last[:, -1].numpy().copy()
            self.item_factors = emb.weight[1:].numpy().copy()

    def scores(self, user: int, items: np.ndarray) -> np.ndarray:
        return self.item_factors[np.asarray(items, np.int64)] @ self.user_factors[int(user)]
