"""A page as a Plackett-Luce draw: softmax over the candidates' scores, ``page_size`` items without replacement.

The item-scoring policy's scores are logits; a page is sampled slot by slot from the softmax over the candidates
not yet placed (Gumbel top-k draws exactly this), so the log-probability of a page is
``sum_j [s_{a_j} - logsumexp(s over candidates not in a_1..a_{j-1})]``. Compared with a Gaussian over the K scores
(whose top-k the env shows), the policy gradient then credits the items actually shown, and the policy's
randomness is over pages rather than over scores that mostly never reach the user.

The page travels in the env's ``scores`` action (``Box(-1, 1, (K,))``): slot ``j`` of the page gets the score
``1 - j / page_size``, every other candidate -1, so the env's top-k shows exactly the sampled page in its order and
:func:`decode_page` reads it back for the log-probability.
"""

from __future__ import annotations

import torch
from stable_baselines3.common.distributions import Distribution
from torch import nn


def encode_page(page: torch.Tensor, k: int) -> torch.Tensor:
    """``(B, page_size)`` candidate indices -> ``(B, k)`` scores whose top-k is the page, in order."""
    size = page.shape[-1]
    scores = torch.full((*page.shape[:-1], k), -1.0, dtype=torch.float32, device=page.device)
    slot_scores = 1.0 - torch.arange(size, dtype=torch.float32, device=page.device) / size
    return scores.scatter(-1, page.long(), slot_scores.expand_as(page).contiguous())


def decode_page(actions: torch.Tensor, page_size: int) -> torch.Tensor:
    """The inverse of :func:`encode_page`: the ``page_size`` best-scored candidates, best first."""
    return torch.topk(actions, page_size, dim=-1, sorted=True).indices


class PlackettLuceDistribution(Distribution):
    """Pages of ``page_size`` distinct candidates from ``logits`` (see the module docstring)."""

    def __init__(self, page_size: int) -> None:
        super().__init__()
        self.page_size = page_size
        self.logits: torch.Tensor | None = None

    def proba_distribution_net(self, *args: object, **kwargs: object) -> nn.Module:
        raise NotImplementedError("the item-scoring policy builds its own score head")

    def proba_distribution(self, logits: torch.Tensor) -> PlackettLuceDistribution:
        self.logits = logits
        return self

    def _page_log_prob(self, page: torch.Tensor) -> torch.Tensor:
        assert self.logits is not None
        logits = self.logits
        taken = torch.zeros_like(logits, dtype=torch.bool)
        total = torch.zeros(logits.shape[:-1], dtype=logits.dtype, device=logits.device)
        for j in range(page.shape[-1]):
            index = page[..., j : j + 1]
            remaining = logits.masked_fill(taken, float("-inf"))
            total = total + logits.gather(-1, index).squeeze(-1) - torch.logsumexp(remaining, dim=-1)
            taken = taken.scatter(-1, index, True)
        return total

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        return self._page_log_prob(decode_page(actions, self.page_size))

    def entropy(self) -> torch.Tensor:
        """Entropy of the first slot's softmax (the page's exact entropy has no closed form; this bounds its
        spread and is what an entropy bonus should keep from collapsing)."""
        assert self.logits is not None
        log_p = torch.log_softmax(self.logits, dim=-1)
        return -(log_p.exp() * log_p).sum(-1)

    def sample(self) -> torch.Tensor:
        assert self.logits is not None
        exponential = -torch.log(torch.rand_like(self.logits).clamp(1e-20, 1.0))
        gumbel = -torch.log(exponential.clamp(min=1e-20))
        page = torch.topk(self.logits + gumbel, self.page_size, dim=-1, sorted=True).indices
        return encode_page(page, self.logits.shape[-1])

    def mode(self) -> torch.Tensor:
        assert self.logits is not None
        page = torch.topk(self.logits, self.page_size, dim=-1, sorted=True).indices
        return encode_page(page, self.logits.shape[-1])

    def actions_from_params(self, logits: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        self.proba_distribution(logits)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        actions = self.actions_from_params(logits)
        return actions, self.log_prob(actions)
