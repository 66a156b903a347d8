"""Score every candidate against the user's encoding with shared weights (for SB3 PPO/A2C on RecAgent-v1).

The same small network scores each candidate (SUBER's one-logit-per-item, KuaiSim's item encodings): a context
vector from the user's encoding and the session, an embedding per candidate, and a score from both (concatenation
and elementwise product, then a hidden layer). The candidate's embedding reads its item features AND their
products with who the user is and what the session showed (:func:`interaction_features`: genre membership x the
user's relative genre shares, item features x the mean of the history, of this session's watched and of its
skipped items; the LinUCB bandit's features). Without them the only user x item term is the product of two learned
embeddings, which PPO did not learn to use: its return did not change when another user's encoding was swapped in.
Weights are shared across candidates, so what is learned is an item-level preference that transfers to unseen
users and items.

With ``prior`` (``train.latent_prior``) each candidate's score also carries ``prior_weight * z``, ``z`` the
candidate's item vector dotted with the history's mean item vector, standardised over the page's candidates
(:func:`~recagent_gym.policies.candidate_baselines.history_latent_scores`, the ``latent`` baseline's ranking), and
``prior_weight`` a trained scalar that starts at ``prior``: the policy starts as MF read off the observed history
and learns what to change. Without it the network has to discover the collaborative score from the elementwise
products alone, and PPO and behaviour cloning ranked below MF in the simulator and on real users.

With SB3, :class:`ItemScoringPolicy` is an ``ActorCriticPolicy`` over the env's ``Box(-1, 1, (K,))`` score action.
Given ``page_size`` (what the RL comparison uses), the scores are the logits of a Plackett-Luce page
(:mod:`recagent_gym.policies.slate_distribution`: ``page_size`` candidates drawn without replacement), so the policy
gradient credits the items shown; without it the action mean IS the score vector (``tanh``) under a Gaussian, whose
noise mostly moves scores that never reach the page. The value head reads the context and the mean candidate
embedding. :class:`CandidateScorer` is also SlateQ's item-wise Q and choice network.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from recagent_gym.envs.encoding import latent_columns
from recagent_gym.policies.candidate_baselines import SHOWN_COLUMN
from recagent_gym.policies.slate_distribution import PlackettLuceDistribution


def interaction_features(obs: dict[str, torch.Tensor], history_mean: torch.Tensor) -> torch.Tensor:
    """``(B, K, G + 3F)`` user x item products per candidate (layouts of :mod:`recagent_gym.envs.encoding`).

    Genre membership times the user's genre shares relative to the user's top genre (shares sum to 1 and topics
    to 1, so their raw product is too small to learn from), then the item features times the history mean, the
    session's watched mean and its skipped mean.
    """
    cands = obs["candidates"]
    f = obs["history"].shape[-1] - 1
    n_genres = obs["user"].shape[-1] - 3
    items = cands[..., :f]
    shares = obs["user"][..., :n_genres]
    relative = shares / shares.amax(-1, keepdim=True).clamp(min=1e-6)
    session = obs["session"]
    watched, skipped = session[..., -2 * f : -f], session[..., -f:]
    return torch.cat(
        [
            (items[..., :n_genres] > 0).float() * relative.unsqueeze(1),
            items * history_mean.unsqueeze(1),
            items * watched.unsqueeze(1),
            items * skipped.unsqueeze(1),
        ],
        dim=-1,
    )


class CandidateScorer(nn.Module):
    """``forward(obs) -> (scores (B, K), context (B, 2 * dim))``; masked candidates score ``-mask_value``."""

    def __init__(
        self, observation_space: gym.spaces.Dict, dim: int = 32, mask_value: float = 10.0, prior: float = 0.0
    ) -> None:
        super().__init__()
        user = observation_space["user"].shape[0]
        history_f = observation_space["history"].shape[1] - 1
        session = observation_space["session"].shape[0]
        cand = observation_space["candidates"].shape[1]
        interactions = (user - 3) + 3 * history_f
        self.mask_value = mask_value
        self.context = nn.Sequential(nn.Linear(user + history_f + session, 64), nn.ReLU(), nn.Linear(64, dim))
        self.item = nn.Sequential(nn.Linear(cand + interactions, 64), nn.ReLU(), nn.Linear(64, dim))
        self.head = nn.Sequential(nn.Linear(3 * dim, 32), nn.ReLU(), nn.Linear(32, 1))
        self.n_genres, self.f = user - 3, history_f
        self.prior_weight = nn.Parameter(torch.tensor(float(prior))) if prior else None

    def forward(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        history = obs["history"]
        valid = history[..., -1:]
        history_mean = (history[..., :-1] * valid).sum(1) / valid.sum(1).clamp(min=1.0)
        context = self.context(torch.cat([obs["user"], history_mean, obs["session"]], dim=-1))
        items = self.item(torch.cat([obs["candidates"], interaction_features(obs, history_mean)], dim=-1))
        ctx = context.unsqueeze(1).expand_as(items)
        scores = self.head(torch.cat([ctx, items, ctx * items], dim=-1)).squeeze(-1)
        mask = obs["candidate_mask"]
        if self.prior_weight is not None:
            scores = scores + self.prior_weight * self._latent_prior(obs["candidates"], history_mean, mask)
        scores = torch.where(mask > 0, scores, torch.full_like(scores, -self.mask_value))
        pooled = (items * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0)
        return scores, torch.cat([context, pooled], dim=-1)

    def _latent_prior(self, cands: torch.Tensor, history_mean: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``(B, K)``: the candidates' item vectors dotted with the history's mean one, standardised over the valid
        candidates (0 where they do not vary, e.g. without a history)."""
        block = latent_columns(self.n_genres, self.f)
        dot = (cands[..., block] * history_mean[..., block].unsqueeze(1)).sum(-1)
        count = mask.sum(-1, keepdim=True).clamp(min=1.0)
        mean = (dot * mask).sum(-1, keepdim=True) / count
        std = (((dot - mean) ** 2 * mask).sum(-1, keepdim=True) / count).sqrt()
        return torch.where(std > 1e-6, (dot - mean) / std.clamp(min=1e-6), torch.zeros_like(dot))


class ItemScoringExtractor(BaseFeaturesExtractor):
    """Features = ``[scores (K), context (2 * dim)]``: the policy head slices the scores, the value head reads all.

    With ``exclude_shown`` (the Plackett-Luce pages') a candidate shown earlier this session scores just above the
    masked ones, so pages hold unshown candidates while any remain: the rule every baseline, the bandit and SlateQ
    follow (``candidate_baselines.rank_action``). Without it PPO's deterministic page (the top scores) re-showed
    the same unwatched items page after page on fitted RecSim users: 70% of its slots after 24,000 steps, its return
    falling while its sampled pages' rose (README, the RL comparison)."""

    def __init__(
        self, observation_space: gym.spaces.Dict, dim: int = 32, exclude_shown: bool = False, prior: float = 0.0
    ) -> None:
        k = observation_space["candidates"].shape[0]
        super().__init__(observation_space, features_dim=k + 2 * dim)
        self.k = k
        self.scorer = CandidateScorer(observation_space, dim, prior=prior)
        self.exclude_shown = exclude_shown

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        scores, context = self.scorer(observations)
        if self.exclude_shown:
            shown = (observations["candidates"][..., SHOWN_COLUMN] > 0) & (observations["candidate_mask"] > 0)
            scores = torch.where(shown, torch.full_like(scores, 1.0 - self.scorer.mask_value), scores)
        return torch.cat([scores, context], dim=-1)


class _ScoreHead(nn.Module):
    """The action mean: the first ``k`` features (the candidate scores), squashed into the action box."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return torch.tanh(latent[..., : self.k])


class _LogitHead(nn.Module):
    """The Plackett-Luce logits: the first ``k`` features (the candidate scores), unsquashed."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return latent[..., : self.k]


class ItemScoringPolicy(ActorCriticPolicy):
    """``ActorCriticPolicy`` scoring each candidate with shared weights (see module doc); ``page_size`` turns on
    the Plackett-Luce page distribution; ``prior`` the latent prior's starting weight (see the module doc)."""

    def __init__(
        self, *args: Any, dim: int = 32, page_size: int | None = None, prior: float = 0.0, **kwargs: Any
    ) -> None:
        self.page_size, self.prior = page_size, float(prior)
        kwargs.setdefault("features_extractor_class", ItemScoringExtractor)
        kwargs.setdefault(
            "features_extractor_kwargs", {"dim": dim, "exclude_shown": page_size is not None, "prior": self.prior}
        )
        kwargs.setdefault("net_arch", {"pi": [], "vf": [64]})
        kwargs.setdefault("log_std_init", -1.0)
        kwargs.setdefault("ortho_init", False)
        super().__init__(*args, **kwargs)

    def _build(self, lr_schedule: Any) -> None:
        k = self.action_space.shape[0]
        if self.page_size is None:
            super()._build(lr_schedule)
            self.action_net = _ScoreHead(k)
        else:
            self._build_mlp_extractor()
            self.action_dist = PlackettLuceDistribution(self.page_size)
            self.action_net = _LogitHead(k)
            self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, 1)
        # The replaced head changes the parameter set: the optimiser must see the final one.
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_action_dist_from_latent(self, latent_pi: torch.Tensor) -> Any:
        if isinstance(self.action_dist, PlackettLuceDistribution):
            return self.action_dist.proba_distribution(self.action_net(latent_pi))
        return super()._get_action_dist_from_latent(latent_pi)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "page_size": self.page_size, "prior": self.prior}
