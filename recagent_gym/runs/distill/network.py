"""The distilled user network: a two-tower scorer,
``score(u, i) = <f(user_u), g(item_i)> + alpha * <taste_u, text_i> + b(item_i) + c``.

``taste_u`` and ``text_i`` are the leading ``text_dim`` features of both sides (the user's mean history embedding
and the item's text embedding): the LLM agent's own score adds an embedding relevance of this form, which the
projected towers would need many logs to learn. With ``collab_dim > 0`` the last ``collab_dim`` features of both
sides (the user's collaborative taste and the item's collaborative vector) add ``beta * <collab_u, collab_i>`` the
same way: the affinity collaborative filtering reads, which real choices follow and the LLM's scores barely do.
Both towers are one hidden layer; since users are memory-free between sessions, every user and item is encoded once
after training and the env only gathers rows and takes a dot product per shown item.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class TwoTower(nn.Module):
    def __init__(
        self,
        user_dim: int,
        item_dim: int,
        *,
        text_dim: int = 0,
        alpha: float = 0.0,
        hidden: int = 64,
        dim: int = 32,
        collab_dim: int = 0,
    ) -> None:
        super().__init__()
        self.text_dim = text_dim
        self.collab_dim = collab_dim
        self.alpha = nn.Parameter(torch.tensor(float(alpha)))
        if collab_dim:  # registered only then: a model without the collaborative part loads as it was saved
            self.beta = nn.Parameter(torch.zeros(()))
        self.user = nn.Sequential(nn.Linear(user_dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))
        self.item = nn.Sequential(nn.Linear(item_dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))
        self.item_bias = nn.Linear(item_dim, 1)
        self.offset = nn.Parameter(torch.zeros(()))

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """Scores of paired rows ``users[k]``, ``items[k]``."""
        u, i = self.user(users), self.item(items)
        text = (users[:, : self.text_dim] * items[:, : self.text_dim]).sum(-1)
        out = (u * i).sum(-1) + self.alpha * text + self.item_bias(items).squeeze(-1) + self.offset
        if self.collab_dim:
            c = self.collab_dim
            out = out + self.beta * (users[:, -c:] * items[:, -c:]).sum(-1)
        return out

    @torch.no_grad()
    def tables(self, users: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(user_table (n_users, dim), item_table (n_items, dim), item_offset (n_items,))``: the score of any pair
        is ``user_table[u] @ item_table[i] + item_offset[i]`` (the global offset folded in)."""
        item_t = torch.from_numpy(items)
        user_t = torch.from_numpy(users)
        u_parts = [self.user(user_t), self.alpha * user_t[:, : self.text_dim]]
        i_parts = [self.item(item_t), item_t[:, : self.text_dim]]
        if self.collab_dim:
            u_parts.append(self.beta * user_t[:, -self.collab_dim :])
            i_parts.append(item_t[:, -self.collab_dim :])
        u, i = torch.cat(u_parts, dim=1).numpy(), torch.cat(i_parts, dim=1).numpy()
        b = (self.item_bias(item_t).squeeze(-1) + self.offset).numpy()
        return u.astype(np.float32), i.astype(np.float32), b.astype(np.float32)
