"""SlateQ (Ie et al., IJCAI 2019) on RecAgent-v1, compact torch.

The value of a slate decomposes through the user's choice: ``Q(s, A) = sum_{i in A} P(i | s, A) Qbar(s, i) +
P(none | s, A) Qbar(s, none)``. Three pieces, each a small network over the v1 observation:

- the choice model ``P(i | s, A) = exp(v(s, i)) / (exp(v_none) + sum_{j in A} exp(v(s, j)))`` (conditional logit,
  as the paper's user model), learned by maximum likelihood from the observed clicks;
- the item-wise long-term value ``Qbar(s, i)`` learned by TD on the clicked item only (the paper's
  decomposition): ``Qbar(s, i) <- r + gamma * Q(s', A')``, and ``Qbar(s, none)`` from the steps without a click;
  with ``n_step > 1`` the target is the n-step return ``r_t + ... + gamma^(n-1) r_(t+n-1) + gamma^n Q(s_(t+n),
  A')`` (the Monte-Carlo return when the session ends sooner): budget effects that end a session several pages
  later reach the clicked item's value in one update instead of n;
- the slate: the paper's top-k heuristic on the gain over no click, the ``page_size`` candidates with the largest
  ``exp(v) * (Qbar(s, i) - Qbar(s, none))`` (``Q(s, A) = Qbar(none) + sum_i P(i | A) (Qbar(i) - Qbar(none))``, so
  this ranks by each item's contribution; an appealing item worth less than no click hurts the slate); the next
  slate ``A'`` of the target is the greedy one under the target network (Q-learning form).

Exploration is epsilon-greedy per slot. Candidates shown earlier this session are ranked last at acting time.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from recagent_gym.policies.candidate_baselines import SHOWN_COLUMN, rank_action
from recagent_gym.policies.item_scoring import CandidateScorer

OBS_KEYS: tuple[str, ...] = ("user", "history", "session", "candidates", "candidate_mask")


class _Heads(nn.Module):
    """Item-wise Q with a no-click value, and the choice logits with a learned no-click logit."""

    def __init__(self, space: gym.spaces.Dict, dim: int) -> None:
        super().__init__()
        self.q = CandidateScorer(space, dim)
        self.q_none = nn.Linear(2 * dim, 1)
        self.choice = CandidateScorer(space, dim)
        self.none_logit = nn.Parameter(torch.zeros(1))

    def forward(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, context = self.q(obs)
        v, _ = self.choice(obs)
        return q, self.q_none(context).squeeze(-1), v


def _tensors(obs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(np.asarray(obs[k]), dtype=torch.float32) for k in OBS_KEYS}


class SlateQ:
    """SlateQ agent; :meth:`predict` answers SB3's call with a score per candidate (the env takes the top-k)."""

    def __init__(
        self,
        space: gym.spaces.Dict,
        page_size: int,
        *,
        gamma: float = 0.9,
        lr: float = 1e-3,
        dim: int = 32,
        seed: int = 0,
    ) -> None:
        torch.manual_seed(seed)
        self.page_size, self.gamma = page_size, gamma
        self.net = _Heads(space, dim)
        self.target = copy.deepcopy(self.net)
        self.optimiser = torch.optim.Adam(self.net.parameters(), lr=lr)

    # ------------------------------------------------------------------------------------------------------ acting
    def slate_scores(self, obs: dict[str, torch.Tensor], net: _Heads | None = None) -> torch.Tensor:
        q, q_none, v = (net or self.net)(obs)
        return self._scores(q, q_none, v, obs["candidate_mask"])

    @staticmethod
    def _scores(q: torch.Tensor, q_none: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # Q(s, A) = Qbar(none) + sum_i P(i | A) (Qbar(i) - Qbar(none)): an item helps the slate by exp(v) times its
        # gain over no click, so an appealing item whose watch costs the session more than it earns (junk that
        # drains the time budget) scores below zero instead of high (the paper's exp(v) * Qbar ignores the sign).
        score = torch.exp(v.clamp(-20.0, 20.0)) * (q - q_none.unsqueeze(-1))
        return torch.where(mask > 0, score, torch.full_like(score, -1e9))

    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, None]:
        with torch.no_grad():
            batch = {k: v.unsqueeze(0) for k, v in _tensors(observation).items()}
            scores = self.slate_scores(batch)[0].numpy()
        shown = observation["candidates"][:, SHOWN_COLUMN] * observation["candidate_mask"]
        return rank_action(scores, shown), None

    # ---------------------------------------------------------------------------------------------------- learning
    def _slate_value(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``Q(s', A')`` under the target network for the greedy slate ``A'``."""
        q, q_none, v = self.target(obs)
        scores = self._scores(q, q_none, v, obs["candidate_mask"])  # one target pass for the slate and its value
        top = scores.topk(self.page_size, dim=-1).indices
        logits = torch.cat([v.gather(1, top), self.target.none_logit.expand(len(top), 1)], dim=1)
        p = torch.softmax(logits, dim=1)
        return (p[:, :-1] * q.gather(1, top)).sum(1) + p[:, -1] * q_none

    def update(self, batch: dict[str, Any]) -> tuple[float, float]:
        """One gradient step on a replay batch; returns (TD loss, choice NLL)."""
        obs, next_obs = batch["obs"], batch["next_obs"]
        slate, clicked = batch["slate"], batch["clicked"]  # (B, k) long, (B,) long with -1 for no click
        q, q_none, v = self.net(obs)
        with torch.no_grad():
            target = batch["reward"] + batch["discount"] * (1.0 - batch["done"]) * self._slate_value(next_obs)
        has_click = clicked >= 0
        chosen_q = q.gather(1, clicked.clamp(min=0).unsqueeze(1)).squeeze(1)
        prediction = torch.where(has_click, chosen_q, q_none)
        td = nn.functional.smooth_l1_loss(prediction, target)
        logits = torch.cat([v.gather(1, slate), self.net.none_logit.expand(len(slate), 1)], dim=1)
        position = (slate == clicked.unsqueeze(1)).float().argmax(1)
        label = torch.where(has_click, position, torch.full_like(position, slate.shape[1]))
        nll = nn.functional.cross_entropy(logits, label)
        self.optimiser.zero_grad()
        (td + nll).backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), 10.0)
        self.optimiser.step()
        return td.item(), nll.item()

    def sync_target(self) -> None:
        self.target.load_state_dict(self.net.state_dict())


class _Replay:
    def __init__(self, capacity: int) -> None:
        self.capacity, self.cursor = capacity, 0
        self.items: list[tuple] = []

    def add(self, item: tuple) -> None:
        if len(self.items) < self.capacity:
            self.items.append(item)
        else:
            self.items[self.cursor] = item
        self.cursor = (self.cursor + 1) % self.capacity

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, Any]:
        picks = [self.items[i] for i in rng.integers(0, len(self.items), size=n)]
        stack = lambda j: {k: torch.as_tensor(np.stack([p[j][k] for p in picks])) for k in OBS_KEYS}  # noqa: E731
        return {
            "obs": stack(0),
            "next_obs": stack(4),
            "slate": torch.as_tensor(np.stack([p[1] for p in picks]), dtype=torch.long),
            "clicked": torch.as_tensor([p[2] for p in picks], dtype=torch.long),
            "reward": torch.as_tensor([p[3] for p in picks], dtype=torch.float32),
            "done": torch.as_tensor([p[5] for p in picks], dtype=torch.float32),
            "discount": torch.as_tensor([p[6] for p in picks], dtype=torch.float32),
        }


def _flush(episode: list[tuple], replay: _Replay, *, gamma: float, n_step: int, final: bool) -> None:
    """Move n-step transitions from the head of ``episode`` into ``replay``: all of them at the session's end
    (shorter returns, Monte-Carlo when nothing is left to bootstrap), else the one whose n steps are complete."""
    while episode and (final or len(episode) >= n_step):
        window = episode[:n_step]
        ret = sum(gamma**k * step[3] for k, step in enumerate(window))
        last = window[-1]
        # Bootstrap from the state after the window unless the session ended in it.
        replay.add((window[0][0], window[0][1], window[0][2], ret, last[4], last[5], gamma ** len(window)))
        episode.pop(0)


def train_slateq(
    env: Any,
    *,
    steps: int,
    seed: int,
    batch_size: int = 64,
    warmup: int = 500,
    target_every: int = 250,
    train_every: int = 4,
    epsilon: tuple[float, float] = (0.3, 0.02),
    gamma: float = 0.9,
    lr: float = 1e-3,
    n_step: int = 1,
    callback: Any = None,
) -> SlateQ:
    """SlateQ trained for ``steps`` env steps on ``env`` (its users: the training users), one gradient step every
    ``train_every`` env steps, ``n_step`` returns (module doc); ``callback(agent, step)`` is called every step
    (the held-out learning curve)."""
    core = env.unwrapped
    rng = np.random.default_rng(seed)
    agent = SlateQ(core.observation_space, core.page_size, gamma=gamma, lr=lr, seed=seed)
    replay = _Replay(max(steps, 1))
    warmup = min(warmup, steps // 4)  # short runs still learn
    obs, _ = env.reset(seed=seed)
    episode: list[tuple] = []
    for step in range(steps):
        eps = epsilon[0] + (epsilon[1] - epsilon[0]) * min(step / max(0.5 * steps, 1), 1.0)
        action, _ = agent.predict(obs)
        if rng.random() < eps:
            action = rng.random(len(action)).astype(np.float32) * 2 - 1
        next_obs, reward, terminated, truncated, info = env.step(action)
        slate = np.asarray(info["slate"], dtype=np.int64)
        ids = np.asarray(info["candidates"])[slate].tolist()
        clicked = -1
        if info.get("item") is not None and not info.get("from_search", False) and info["item"] in ids:
            clicked = int(slate[ids.index(info["item"])])
        done = bool(terminated or truncated)
        # The session's end (left, or its last page) ends the return: nothing to bootstrap after it.
        episode.append(({k: obs[k] for k in OBS_KEYS}, slate, clicked, float(reward), next_obs, float(done)))
        if done or len(episode) >= n_step:
            _flush(episode, replay, gamma=gamma, n_step=n_step, final=done)
        obs = env.reset()[0] if done else next_obs
        if step >= warmup and step % train_every == 0:  # as DQN's train_freq: one update per few env steps
            agent.update(replay.sample(batch_size, rng))
            if step % target_every == 0:
                agent.sync_target()
        if callback is not None:
            callback(agent, step + 1)
    return agent
