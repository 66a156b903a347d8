"""Behaviour cloning of the item-scoring policy on real logs, and PPO fine-tuning with a KL penalty towards the clone.

The standard sim-to-real recipe in recommendation: pre-train on what real users chose, then fine-tune in the
simulator without drifting far from it.

* :func:`clone` fits an :class:`~recagent_gym.policies.item_scoring.ItemScoringPolicy` (its page logits) to logged
  choices: softmax cross-entropy over the valid candidates towards the items the real user went on to watch (a
  uniform target over those present), on observations the env built for the user (``targets[n, k]`` marks
  candidate ``k`` of observation ``n``). Given validation examples (other users' logs) it keeps the epoch whose
  pages hold a logged choice most often on them (:func:`validation_hits`), the start included (:class:`Cloned`): a
  policy that starts from the latent prior keeps the prior where the logs do not improve on it. Not the validation
  loss: the prior's logits are sharp, so its cross-entropy is high while its pages hold the choices more often than
  a clone's of lower loss (development env seed 0 of ``rl_fitted``: the loss fell from 13.0 to 3.1 over 20 epochs
  and the held-out users' real hits from the prior's 0.52 to 0.33).
* :class:`KLPenalisedPolicy` is that policy with ``beta * KL(pi || pi_bc)`` added to PPO's loss, ``pi_bc`` a
  frozen copy of the cloned policy (:meth:`KLPenalisedPolicy.anchor`). The KL is that of the page's first slot
  (the softmax of the logits; the Plackett-Luce page's KL has no closed form, as its entropy has none), zero when
  the two policies agree. stable-baselines3's PPO adds ``ent_coef * -mean(entropy)`` to its loss and has no other
  hook: the policy returns ``entropy_coef * entropy - kl_beta * KL`` as the "entropy" and PPO runs with
  ``ent_coef=1`` (:data:`PPO_ENT_COEF`), which adds exactly ``-entropy_coef * H + kl_beta * KL``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from recagent_gym.policies.item_scoring import ItemScoringPolicy

PPO_ENT_COEF = 1.0
"""The ``ent_coef`` PPO must run :class:`KLPenalisedPolicy` with (its own ``entropy_coef`` is the real one)."""


def first_slot_kl(logits: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """``(B,)`` KL(softmax(logits) || softmax(reference)) over the last axis."""
    log_p = torch.log_softmax(logits, dim=-1)
    log_q = torch.log_softmax(reference, dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def page_logits(policy: ItemScoringPolicy, obs: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(B, K)`` the Plackett-Luce logits of ``policy`` (built with ``page_size``) for a batch of observations."""
    return policy.get_distribution(obs).logits  # type: ignore[attr-defined]


def cloning_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean softmax cross-entropy over valid candidates (``mask``) towards a uniform target over ``targets``."""
    logits = logits.masked_fill(mask <= 0, float("-inf"))
    log_p = torch.log_softmax(logits, dim=-1)
    wanted = targets * (mask > 0)
    wanted = wanted / wanted.sum(-1, keepdim=True).clamp(min=1.0)
    return -(wanted * log_p.masked_fill(mask <= 0, 0.0)).sum(-1).mean()


@dataclass(frozen=True)
class Cloned:
    """What :func:`clone` did: the mean training loss of each epoch, the validation hit rate before training and
    after each epoch (:func:`validation_hits`; empty without validation examples), and the epoch kept (0: the policy
    as it started)."""

    losses: list[float]
    validation: list[float]
    kept: int


def _tensors(observations: dict[str, np.ndarray], targets: np.ndarray) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    keep = targets.reshape(len(targets), -1).sum(1) > 0
    if not keep.any():
        raise ValueError("behaviour cloning: no observation holds a logged choice among its candidates")
    obs = {k: torch.as_tensor(np.asarray(v)[keep], dtype=torch.float32) for k, v in observations.items()}
    return obs, torch.as_tensor(targets[keep], dtype=torch.float32)


def validation_hits(policy: ItemScoringPolicy, obs: dict[str, torch.Tensor], wanted: torch.Tensor) -> float:
    """The share of examples whose page (the ``page_size`` highest logits among the valid candidates) holds a logged
    choice: the real hit rate's counterpart on logged pages (in batches, no gradient)."""
    policy.set_training_mode(False)
    k = int(policy.page_size or 1)
    hits = 0.0
    with torch.no_grad():
        for batch in torch.arange(len(wanted)).split(512):
            part = {key: v[batch] for key, v in obs.items()}
            logits = page_logits(policy, part).masked_fill(part["candidate_mask"] <= 0, float("-inf"))
            page = logits.topk(min(k, logits.shape[-1]), dim=-1).indices
            hits += float((wanted[batch].gather(-1, page) > 0).any(-1).float().sum())
    return hits / max(len(wanted), 1)


def clone(
    policy: ItemScoringPolicy,
    observations: dict[str, np.ndarray],
    targets: np.ndarray,
    *,
    epochs: int = 20,
    batch_size: int = 64,
    learning_rate: float = 1e-3,
    seed: int = 0,
    validation: tuple[dict[str, np.ndarray], np.ndarray] | None = None,
) -> Cloned:
    """Fit ``policy``'s page logits to ``targets`` (``(N, K)``, 1 for a logged choice) on ``observations`` (each
    value ``(N, ...)``); rows without a target are dropped. With ``validation`` (examples of other users) the policy
    ends at the epoch whose pages hold their logged choices most often (the earliest of ties), its start included."""
    obs, wanted = _tensors(observations, targets)
    held = _tensors(*validation) if validation is not None else None
    scores = [validation_hits(policy, *held)] if held is not None else []
    best = copy.deepcopy(policy.state_dict()) if held is not None else None
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    n, losses = len(wanted), []
    for _ in range(epochs):
        policy.set_training_mode(True)
        total = 0.0
        for batch in torch.randperm(n, generator=generator).split(batch_size):
            part = {k: v[batch] for k, v in obs.items()}
            loss = cloning_loss(page_logits(policy, part), wanted[batch], part["candidate_mask"])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(batch)
        losses.append(total / n)
        if held is not None:
            scores.append(validation_hits(policy, *held))
            if scores[-1] > max(scores[:-1]):
                best = copy.deepcopy(policy.state_dict())
    policy.set_training_mode(False)
    if best is None:
        return Cloned(losses, [], epochs)
    policy.load_state_dict(best)
    return Cloned(losses, scores, int(np.argmax(scores)))


class KLPenalisedPolicy(ItemScoringPolicy):
    """:class:`ItemScoringPolicy` whose PPO loss carries ``kl_beta * KL(pi || pi_bc)`` (see the module docstring;
    run PPO with ``ent_coef=PPO_ENT_COEF``). Without an anchor it is the plain policy with ``entropy_coef``."""

    def __init__(self, *args: Any, kl_beta: float = 0.0, entropy_coef: float = 0.0, **kwargs: Any) -> None:
        self.kl_beta, self.entropy_coef = float(kl_beta), float(entropy_coef)
        super().__init__(*args, **kwargs)
        self.__dict__["reference"] = None  # not a submodule: neither trained, nor saved with the policy

    def anchor(self) -> None:
        """Freeze a copy of the policy as it is now (the cloned one) as ``pi_bc``."""
        self.__dict__["reference"] = None
        self.action_dist.logits = None  # type: ignore[attr-defined]  # a graph's tensor cannot be copied
        reference = copy.deepcopy(self)
        for parameter in reference.parameters():
            parameter.requires_grad_(False)
        reference.set_training_mode(False)
        self.__dict__["reference"] = reference

    def kl_to_reference(self, obs: dict[str, torch.Tensor], logits: torch.Tensor) -> torch.Tensor:
        """``(B,)`` the first-slot KL from ``logits`` (this policy's, on ``obs``) to the anchor's (0 without one)."""
        reference: KLPenalisedPolicy | None = self.__dict__.get("reference")
        if reference is None:
            return torch.zeros(logits.shape[0], dtype=logits.dtype)
        with torch.no_grad():
            target = page_logits(reference, obs)
        return first_slot_kl(logits, target)

    def evaluate_actions(self, obs: Any, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        values, log_prob, entropy = super().evaluate_actions(obs, actions)
        # SB3's distributions return themselves from proba_distribution: the one just used holds this batch's logits.
        logits = self.action_dist.logits  # type: ignore[attr-defined]
        bonus = self.entropy_coef * entropy  # type: ignore[operator]
        return values, log_prob, bonus - self.kl_beta * self.kl_to_reference(obs, logits)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "kl_beta": self.kl_beta, "entropy_coef": self.entropy_coef}
