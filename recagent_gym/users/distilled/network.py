"""The distilled user network: a two-tower scorer, ``score(u, i) = <f(user_u), g(item_i)> + b(item_i) + c``.

Both towers are one hidden layer; since users are memory-free between sessions, every user and item is encoded
once after training and the env only gathers rows and takes a dot product per shown item.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class TwoTower(nn.Module):
    def __init__(self, user_dim: int, item_dim: int, *, hidden: int = 64, dim: int = 32) -> None:
        super().__init__()
        self.user = nn.Sequential(nn.Linear(user_dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))
        self.item = nn.Sequential(nn.Linear(item_dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))
        self.item_bias = nn.Linear(item_dim, 1)
        self.offset = nn.Parameter(torch.zeros(()))

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """Scores of paired rows ``users[k]``, ``items[k]``."""
        u, i = self.user(users), self.item(items)
        return (u * i).sum(-1) + self.item_bias(items).squeeze(-1) + self.offset

    @torch.no_grad()
    def tables(self, users: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(user_table (n_users, dim), item_table (n_items, dim), item_offset (n_items,))``: the score of any pair
        is ``user_table[u] @ item_table[i] + item_offset[i]`` (the global offset folded in)."""
        item_t = torch.from_numpy(items)
        u = self.user(torch.from_numpy(users)).numpy()
        i = self.item(item_t).numpy()
        b = (self.item_bias(item_t).squeeze(-1) + self.offset).numpy()
        return u.astype(np.float32), i.astype(np.float32), b.astype(np.float32)
