"""Matrix factorisation (torch) trained on the dataset, retrained online from simulated interactions.

``score(u, i) = p_u . q_i + b_i``, trained with BPR (implicit: a watched item above a random one) or squared error
on ratings. With ``retrain_every = N`` the model is retrained every N finished sessions (the paper's real-time
training; feed it with :meth:`MFRecommender.observe`): by default incrementally, from the current factors on the
watches observed since the last retrain plus a replay of older interactions; ``mf_retrain = "full"`` trains on the
dataset plus every watch observed, as the first fit does.
All randomness (initialisation, batches, negatives) comes from one numpy generator seeded at construction.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from recagent_gym.data.schema import Dataset
from recagent_gym.recommenders.baselines import observation_batch, top_k_excluding
from recagent_gym.recommenders.config import RecommenderConfig


class _MF(torch.nn.Module):
    def __init__(self, users: np.ndarray, items: np.ndarray, bias: np.ndarray) -> None:
        super().__init__()
        self.users = torch.nn.Parameter(torch.from_numpy(users))
        self.items = torch.nn.Parameter(torch.from_numpy(items))
        self.bias = torch.nn.Parameter(torch.from_numpy(bias))

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        return (self.users[users] * self.items[items]).sum(-1) + self.bias[items]


class MFRecommender:
    """MF baseline answering SB3's ``predict``; see the module docstring."""

    def __init__(
        self, dataset: Dataset, page_size: int, config: RecommenderConfig | None = None, seed: int = 0
    ) -> None:
        self.config = config if config is not None else RecommenderConfig()
        self.page_size = page_size
        self.n_users, self.n_items = dataset.n_users, dataset.n_items
        self.rng = np.random.default_rng(seed)
        inter = dataset.interactions
        self._base = (
            inter["user_id"].to_numpy(dtype=np.int64),
            inter["item_id"].to_numpy(dtype=np.int64),
            inter["rating"].to_numpy(dtype=np.float64),
        )
        self._simulated: list[tuple[int, int, float]] = []
        self._seen: list[set[int]] = [set() for _ in range(self.n_users)]
        for u, i in zip(self._base[0].tolist(), self._base[1].tolist(), strict=True):
            self._seen[u].add(i)  # watched items are never recommended again
        self.sessions = 0
        self.retrains = 0
        self._fitted = 0
        """Observed interactions the model has trained on (the first ones of ``_simulated``)."""
        dim = self.config.mf_dim
        self.model = _MF(
            (0.1 * self.rng.standard_normal((self.n_users, dim))).astype(np.float32),
            (0.1 * self.rng.standard_normal((self.n_items, dim))).astype(np.float32),
            np.zeros(self.n_items, dtype=np.float32),
        )
        self.losses: list[float] = []
        self.fit()

    # ------------------------------------------------------------------------------------------------- training
    def _training_data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        users, items, ratings = self._base
        if self._simulated:
            sim = np.asarray(self._simulated, dtype=np.float64)
            users = np.concatenate([users, sim[:, 0].astype(np.int64)])
            items = np.concatenate([items, sim[:, 1].astype(np.int64)])
            ratings = np.concatenate([ratings, sim[:, 2]])
        return users, items, ratings

    def fit(self) -> float:
        """Train ``mf_epochs`` epochs on the dataset and every observed interaction (a full fit); returns the last
        epoch's loss."""
        self._fitted = len(self._simulated)
        return self._train(*self._training_data(), epochs=self.config.mf_epochs, decay=self.config.mf_weight_decay)

    def fit_incremental(self) -> float:
        """Continue from the current factors on the interactions observed since the last fit, each with
        ``mf_replay`` older interactions drawn uniformly (dataset and earlier simulated ones), for
        ``mf_incremental_epochs`` epochs; returns the last epoch's loss (NaN when nothing new was observed)."""
        new = self._simulated[self._fitted :]
        if not new:
            return float("nan")
        users, items, ratings = self._training_data()  # the new interactions are its last rows
        n_old = len(users) - len(new)
        picked = np.arange(n_old, len(users))
        if n_old and self.config.mf_replay:
            replay = self.rng.integers(0, n_old, size=self.config.mf_replay * len(new))
            picked = np.concatenate([picked, replay])
        self._fitted = len(self._simulated)
        # no weight decay here: Adam would turn it into a step of every parameter, moving the factors of every
        # user and item the retrain does not see (a full fit's data gradients outweigh it, a few hundred rows do not)
        cfg = self.config
        return self._train(users[picked], items[picked], ratings[picked], epochs=cfg.mf_incremental_epochs, decay=0.0)

    def retrain(self) -> float:
        """The online retrain, as ``mf_retrain`` says: :meth:`fit_incremental` or a full :meth:`fit`."""
        self.retrains += 1
        return self.fit_incremental() if self.config.mf_retrain == "incremental" else self.fit()

    def _train(self, users: np.ndarray, items: np.ndarray, ratings: np.ndarray, *, epochs: int, decay: float) -> float:
        cfg = self.config
        if cfg.mf_loss == "mse":
            keep = ~np.isnan(ratings)
            users, items, ratings = users[keep], items[keep], ratings[keep]
        if len(users) == 0:
            return float("nan")
        previous = torch.get_num_threads()  # the pool is process-wide: the embedder sets its own before each call
        torch.set_num_threads(cfg.torch_threads)
        try:
            return self._epochs(users, items, ratings, epochs=epochs, decay=decay)
        finally:
            torch.set_num_threads(previous)

    def _epochs(self, users: np.ndarray, items: np.ndarray, ratings: np.ndarray, *, epochs: int, decay: float) -> float:
        cfg = self.config
        optimiser = torch.optim.Adam(self.model.parameters(), lr=cfg.mf_lr, weight_decay=decay)
        epoch_loss = float("nan")
        for _ in range(epochs):
            order = self.rng.permutation(len(users))
            total = 0.0
            for start in range(0, len(order), cfg.mf_batch_size):
                batch = order[start : start + cfg.mf_batch_size]
                u = torch.from_numpy(users[batch])
                i = torch.from_numpy(items[batch])
                if cfg.mf_loss == "bpr":
                    j = torch.from_numpy(self.rng.integers(0, self.n_items, size=len(batch)))
                    loss = -torch.nn.functional.logsigmoid(self.model(u, i) - self.model(u, j)).mean()
                else:
                    target = torch.from_numpy(ratings[batch].astype(np.float32))
                    loss = torch.nn.functional.mse_loss(self.model(u, i), target)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                total += loss.item() * len(batch)
            epoch_loss = total / len(order)
            self.losses.append(epoch_loss)
        return epoch_loss

    def observe(self, info: dict[str, Any], done: bool) -> None:
        """Record a step's watch (from the env's ``info``); count finished sessions and retrain every N."""
        item = info.get("item")
        if item is not None:
            user = int(info["user_id"])
            rating = info.get("rating")
            self._simulated.append((user, int(item), float("nan") if rating is None else float(rating)))
            self._seen[user].add(int(item))
        if done:
            self.sessions += 1
            every = self.config.retrain_every
            if every and self.sessions % every == 0:
                self.retrain()

    # ----------------------------------------------------------------------------------------------- prediction
    def scores(self, user_id: int) -> np.ndarray:
        with torch.no_grad():
            return (self.model.items @ self.model.users[user_id] + self.model.bias).numpy()

    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = False
    ) -> tuple[np.ndarray, None]:
        users, history, batched = observation_batch(observation)
        pages = []
        for user, recent in zip(users.tolist(), history, strict=True):
            exclude = np.concatenate([recent, np.fromiter(self._seen[user], dtype=np.int64)])
            pages.append(top_k_excluding(self.scores(user), exclude, self.page_size))
        stacked = np.stack(pages)
        return (stacked if batched else stacked[0]), None

    # ---------------------------------------------------------------------------------------------------- state
    def get_state(self) -> dict[str, Any]:
        """Weights as nested lists, observed interactions, counters and the generator state."""
        return {
            "weights": {k: v.detach().numpy().tolist() for k, v in self.model.state_dict().items()},
            "simulated": [list(t) for t in self._simulated],
            "sessions": self.sessions,
            "retrains": self.retrains,
            "fitted": self._fitted,
            "rng": self.rng.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(
            {k: torch.tensor(np.asarray(v, dtype=np.float32)) for k, v in state["weights"].items()}
        )
        self._simulated = [(int(u), int(i), float(r)) for u, i, r in state["simulated"]]
        self._seen = [set() for _ in range(self.n_users)]
        for u, i in zip(self._base[0].tolist(), self._base[1].tolist(), strict=True):
            self._seen[u].add(i)
        for user, item, _ in self._simulated:
            self._seen[user].add(item)
        self.sessions = int(state["sessions"])
        self.retrains = int(state["retrains"])
        self._fitted = int(state.get("fitted", len(self._simulated)))  # checkpoints before it: all trained on
        self.rng.bit_generator.state = state["rng"]
