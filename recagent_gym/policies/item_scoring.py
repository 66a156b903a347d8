"""Score every candidate against the user's encoding with shared weights (for SB3 PPO/A2C on RecAgent-v1).

The same small network scores each candidate (SUBER's one-logit-per-item, KuaiSim's item encodings): a context
vector from the user's encoding and the session, an embedding per candidate from its item features, and a score
from both (concatenation and elementwise product, then a hidden layer). Weights are shared across candidates,
so what is learned is an item-level preference that transfers to unseen users and items.

With SB3, :class:`ItemScoringPolicy` is an ``ActorCriticPolicy`` whose action mean IS the per-candidate score
vector (``tanh``, inside the env's ``Box(-1, 1, (K,))``); the value head reads the context and the mean candidate
embedding. :class:`CandidateScorer` is also SlateQ's item-wise Q and choice network.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn


class CandidateScorer(nn.Module):
    """``forward(obs) -> (scores (B, K), context (B, 2 * dim))``; masked candidates score ``-mask_value``."""

    def __init__(self, observation_space: gym.spaces.Dict, dim: int = 32, mask_value: float = 10.0) -> None:
        super().__init__()
        user = observation_space["user"].shape[0]
        history_f = observation_space["history"].shape[1] - 1
        session = observation_space["session"].shape[0]
        cand = observation_space["candidates"].shape[1]
        self.mask_value = mask_value
        self.context = nn.Sequential(nn.Linear(user + history_f + session, 64), nn.ReLU(), nn.Linear(64, dim))
        self.item = nn.Sequential(nn.Linear(cand, 64), nn.ReLU(), nn.Linear(64, dim))
        self.head = nn.Sequential(nn.Linear(3 * dim, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        history = obs["history"]
        valid = history[..., -1:]
        history_mean = (history[..., :-1] * valid).sum(1) / valid.sum(1).clamp(min=1.0)
        context = self.context(torch.cat([obs["user"], history_mean, obs["session"]], dim=-1))
        items = self.item(obs["candidates"])
        ctx = context.unsqueeze(1).expand_as(items)
        scores = self.head(torch.cat([ctx, items, ctx * items], dim=-1)).squeeze(-1)
        mask = obs["candidate_mask"]
        scores = torch.where(mask > 0, scores, torch.full_like(scores, -self.mask_value))
        pooled = (items * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0)
        return scores, torch.cat([context, pooled], dim=-1)


class ItemScoringExtractor(BaseFeaturesExtractor):
    """Features = ``[scores (K), context (2 * dim)]``: the policy head slices the scores, the value head reads all."""

    def __init__(self, observation_space: gym.spaces.Dict, dim: int = 32) -> None:
        k = observation_space["candidates"].shape[0]
        super().__init__(observation_space, features_dim=k + 2 * dim)
        self.k = k
        self.scorer = CandidateScorer(observation_space, dim)

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        scores, context = self.scorer(observations)
        return torch.cat([scores, context], dim=-1)


class _ScoreHead(nn.Module):
    """The action mean: the first ``k`` features (the candidate scores), squashed into the action box."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return torch.tanh(latent[..., : self.k])


class ItemScoringPolicy(ActorCriticPolicy):
    """``ActorCriticPolicy`` whose action mean is the shared-weight score of each candidate (see module doc)."""

    def __init__(self, *args: Any, dim: int = 32, **kwargs: Any) -> None:
        kwargs.setdefault("features_extractor_class", ItemScoringExtractor)
        kwargs.setdefault("features_extractor_kwargs", {"dim": dim})
        kwargs.setdefault("net_arch", {"pi": [], "vf": [64]})
        kwargs.setdefault("log_std_init", -1.0)
        kwargs.setdefault("ortho_init", False)
        super().__init__(*args, **kwargs)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        k = self.action_space.shape[0]
        self.action_net = _ScoreHead(k)
        # The replaced head changes the parameter set: the optimiser must see the final one.
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)
