"""The distillation's settings, objective and optimisation: the decisions' negative log-likelihood, the real-choice
target beside it, the training loop, and the noise that calibrates the fitted rule."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.distill.decisions import Pages, choice_logits
from recagent_gym.runs.distill.features import model_features
from recagent_gym.runs.distill.real_choices import (
    RealPages,
    choice_probability,
    leave_pages,
    real_loss,
    real_pages,
    real_watch_loss,
    temporal_split,
    top_hit,
    watch_probability,
)
from recagent_gym.users.distilled.errors import DistillError

REAL_TARGETS: tuple[str, ...] = ("order", "watch")
PAGE_BATCH = 64
"""Decision pages per step of the decision target (each page is ``page_size`` item rows)."""


@dataclass(frozen=True)
class FitSettings:
    epochs: int = 60
    seed: int = 0
    split: str = "policy"
    """``policy``: the held-out users are the logged users among the RL split's held-out users (``train.test_fraction``,
    ``train.split_seed``), so a policy trained on these distilled users and evaluated on its held-out users never
    meets a user the model was fitted on; ``own``: a seeded ``test_fraction`` of the logged users."""
    test_fraction: float = 0.2
    hidden: int = 64
    dim: int = 32
    lr: float = 3e-3
    weight_decay: float = 1e-4
    batch: int = 512
    real_weight: float = 0.3
    """Weight of the real-choice objective (0: the LLM users' decisions alone); the default was chosen by
    measurement on the bundled logs (``bundled/README.md``)."""
    real_target: str = "order"
    """``order``: the real item's choice among its page (the scores' order); ``watch``: also a page of negatives
    per real item on which the user watches nothing, under the choice model with the threshold (the scores' level
    against it): :mod:`~recagent_gym.runs.distill.real_choices`."""
    real_choices: int = 10
    """Real next items per user (each user's last ones; the agreement test's future)."""
    real_min_history: int = 10
    """Interactions a user keeps before its real items at least (fewer: no real pages for that user)."""
    real_users: int = 0
    """Users beyond the logged training users whose real next items the real-choice objective also fits (a seeded
    draw among the users with real items that are neither logged nor held out: not the model's held-out users, nor
    the RL split's); 0: the logged training users only. They count as users the model was fitted on (``model.json``'s
    ``train_users``), so no evaluation meets them."""
    collab_dims: int = 8
    """Collaborative item vectors (a truncated SVD of the history before the real items) in both towers' features
    and a direct ``beta * <collab_u, collab_i>`` term (:mod:`~recagent_gym.runs.distill.features`); 0: none. The
    default is the fitted RecSim-style users' latent size, fixed before measuring (``bundled/README.md``)."""


def population_profiles(dataset: Dataset, config: Any) -> list[Any]:
    """The LLM agents' profiles as the factory builds them (dataset-aligned or handwritten)."""
    from recagent_gym.users.profile_source import profiles_from_config

    if config.data.profile_source == "llm":
        raise DistillError("distilled users need dataset-aligned or handwritten profiles (data.profile_source)")
    return profiles_from_config(config.data, dataset, None)


@dataclass
class RealTarget:
    """The real-choice pages of the train users (fitted) and of the held-out users (measured only: the model's
    held-out users and, with the RL protocol's split, all of that split's held-out users, logged or not), with the
    features of the history before them (:mod:`~recagent_gym.runs.distill.real_choices`)."""

    users_x: np.ndarray
    items_x: np.ndarray
    train: RealPages
    test: RealPages
    train_leave: RealPages | None = None
    """The train users' leave pages (:func:`~recagent_gym.runs.distill.real_choices.leave_pages`), fitted with the
    ``watch`` target."""
    test_leave: RealPages | None = None

    @classmethod
    def build(
        cls, dataset: Dataset, config: Any, vectors: np.ndarray, train_users: np.ndarray, test_users: np.ndarray,
        settings: FitSettings, collab: np.ndarray | None = None,
    ) -> RealTarget:  # fmt: skip
        history, real = temporal_split(dataset, settings.real_choices, settings.real_min_history)
        seed = settings.seed
        size = config.env.page_size
        profiles = population_profiles(history, config)
        users_x, items_x = model_features(history, vectors, profiles, config.user.history_shots, collab)
        return cls(
            users_x,
            items_x,
            real_pages(dataset, real, train_users, page_size=size, seed=seed),
            real_pages(dataset, real, test_users, page_size=size, seed=seed + 1),
            # the train users' leave pages are fitted by the ``watch`` target only; the held-out ones are measured
            leave_pages(dataset, real, train_users, page_size=size, seed=seed)
            if settings.real_target == "watch"
            else None,
            leave_pages(dataset, real, test_users, page_size=size, seed=seed + 1),
        )

    def scores(self, net: Any, pages: RealPages) -> np.ndarray:
        import torch

        with torch.no_grad():
            u = torch.from_numpy(self.users_x[pages.user]).repeat_interleave(pages.items.shape[1], 0)
            i = torch.from_numpy(self.items_x[pages.items.reshape(-1)])
            return net(u, i).reshape(pages.items.shape).numpy().astype(np.float64)

    def fitted_pages(self) -> RealPages:
        """The train pages fitted: the real pages, then the leave pages where there are any (the ``watch`` target)."""
        if self.train_leave is None or not len(self.train_leave):
            return self.train
        a, b = self.train, self.train_leave
        return RealPages(*(np.concatenate([x, y]) for x, y in zip(
            (a.user, a.items, a.label, a.sampler), (b.user, b.items, b.label, b.sampler), strict=True)))  # fmt: skip

    def metrics(self, net: Any, temperature: float, threshold: np.ndarray | None = None) -> dict[str, Any]:
        """The real item's mean choice probability and top-score hit rate on the train and held-out users' pages;
        with ``threshold``, the choice model's watch probability on the held-out real pages and on their leave
        pages (a user model that watches as real users do: high on the first, low on the second)."""
        out: dict[str, Any] = {"real_train_pages": len(self.train), "real_test_pages": len(self.test)}
        for name, pages in (("train", self.train), ("test", self.test)):
            if len(pages):
                scores = self.scores(net, pages)
                out[f"real_{name}_choice_p"] = float(choice_probability(scores, pages.label, temperature).mean())
                out[f"real_{name}_hit"] = float(top_hit(scores, pages.label).mean())
        if threshold is not None and len(self.test):
            for name, pages in (("real", self.test), ("leave", self.test_leave)):
                if pages is not None and len(pages):
                    p = watch_probability(self.scores(net, pages), threshold[pages.user], temperature)
                    out[f"real_test_watch_p_{name}"] = float(p.mean())
        return out


def _train(
    net: Any, users_x: np.ndarray, items_x: np.ndarray, train: pd.DataFrame, pages: Pages, threshold: np.ndarray,
    temperature: float, settings: FitSettings, real: RealTarget | None = None,
) -> None:  # fmt: skip
    """``settings.epochs`` passes of Adam: over the scored items (squared error), then over the decision pages
    (the choice model's cross-entropy), each when there is any; with ``settings.real_weight > 0`` each step adds
    ``real_weight`` times the real-choice loss of one share of ``real.train`` (a fresh order every epoch)."""
    import torch

    optimiser = torch.optim.Adam(net.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    u_all, i_all = torch.from_numpy(users_x), torch.from_numpy(items_x)
    tu = torch.from_numpy(train["user_id"].to_numpy(dtype=np.int64, copy=True))
    ti = torch.from_numpy(train["item_id"].to_numpy(dtype=np.int64, copy=True))
    ty = torch.from_numpy(train["score"].to_numpy(dtype=np.float32, copy=True))
    pu, pi = torch.from_numpy(pages.user), torch.from_numpy(pages.items)
    pe, pl = torch.from_numpy(pages.eligible), torch.from_numpy(pages.label)
    pt = torch.from_numpy(threshold.astype(np.float32))
    generator = torch.Generator().manual_seed(settings.seed)

    weight = settings.real_weight if real is not None and len(real.train) else 0.0
    if weight > 0:
        assert real is not None
        fitted = real.fitted_pages()
        ru_x, ri_x = torch.from_numpy(real.users_x), torch.from_numpy(real.items_x)
        ru, ri, rl = (torch.from_numpy(a) for a in (fitted.user, fitted.items, fitted.label))
    n_steps = (math.ceil(len(ty) / settings.batch) if len(ty) else 0) + (
        math.ceil(len(pl) / PAGE_BATCH) if len(pl) else 0
    )
    shares: list[torch.Tensor] = []

    def real_term() -> torch.Tensor | float:
        if weight <= 0 or not shares:
            return 0.0
        batch = shares.pop()
        width = ri.shape[1]
        scores = net(ru_x[ru[batch]].repeat_interleave(width, 0), ri_x[ri[batch].reshape(-1)]).reshape(-1, width)
        if settings.real_target == "watch":
            return weight * real_watch_loss(scores, rl[batch], pt[ru[batch]], temperature)
        return weight * real_loss(scores, rl[batch], temperature)

    def step(loss: torch.Tensor) -> None:
        optimiser.zero_grad()
        (loss + real_term()).backward()
        optimiser.step()

    for _ in range(settings.epochs):
        if weight > 0:  # drawn only with the real objective: a weight of 0 is the LLM-only fit, draw for draw
            shares = list(torch.randperm(len(rl), generator=generator).chunk(max(n_steps, 1)))
            if not n_steps:
                step(torch.zeros(()))
        for batch in torch.randperm(len(ty), generator=generator).split(settings.batch) if len(ty) else ():
            step(torch.nn.functional.mse_loss(net(u_all[tu[batch]], i_all[ti[batch]]), ty[batch]))
        for batch in torch.randperm(len(pl), generator=generator).split(PAGE_BATCH) if len(pl) else ():
            users, items = pu[batch], pi[batch]
            width = items.shape[1]
            scores = net(u_all[users].repeat_interleave(width, 0), i_all[items.reshape(-1)]).reshape(-1, width)
            logits = choice_logits(scores, pe[batch], pt[users], temperature)
            step(torch.nn.functional.cross_entropy(logits, pl[batch]))


def decision_nll(pages: Pages, predict: Any, threshold: np.ndarray, temperature: float) -> float:
    """Mean negative log-likelihood of the logged decisions of ``pages`` under the choice model of ``predict``."""
    import torch

    scores = torch.from_numpy(np.asarray(predict(pages.user[:, None], pages.items), dtype=np.float32))
    limit = torch.from_numpy(threshold[pages.user].astype(np.float32))
    logits = choice_logits(scores, torch.from_numpy(pages.eligible), limit, temperature)
    return float(torch.nn.functional.cross_entropy(logits, torch.from_numpy(pages.label)))


def calibrate_noise(
    train: pd.DataFrame, frame: pd.DataFrame, threshold: np.ndarray, temperature: float, scale: float, seed: int
) -> float:
    """The score noise whose watch probability, through the rule, matches the LLM's logged one on training pages.

    ``train``: item rows with ``pred``; the target is the mean logged ``p_watch`` of their decisions, or whether
    the decision was a watch where no ``p_watch`` was logged (the ``direct`` strategy). Searched on a grid from 0 to
    twice ``scale`` with common random numbers; ``scale`` itself with nothing to match.
    """
    if train.empty or scale <= 0:
        return scale
    decisions = train["decision"].to_numpy()
    target = frame["p_watch"].to_numpy(dtype=float)[np.unique(decisions)]
    watched = (frame["action"] == "watch").to_numpy(dtype=float)[np.unique(decisions)]
    target = np.where(np.isnan(target), watched, target)
    codes, index = np.unique(decisions, return_inverse=True)
    width = int(train.groupby("decision").size().max())
    means = np.full((len(codes), width), -np.inf)
    slot = train.groupby("decision").cumcount().to_numpy()
    means[index, slot] = train["pred"].to_numpy()
    users = frame["user_id"].to_numpy()[codes]
    eps = np.random.default_rng(seed).standard_normal((16, *means.shape))
    best, best_gap = scale, math.inf
    for noise in np.linspace(0.0, 2.0 * scale, 21):
        top = (means[None] + noise * eps).max(axis=2)
        p = 1.0 / (1.0 + np.exp(-(top - threshold[users][None]) / temperature))
        gap = abs(float(p.mean()) - float(target.mean()))
        if gap < best_gap:
            best, best_gap = float(noise), gap
    return best
