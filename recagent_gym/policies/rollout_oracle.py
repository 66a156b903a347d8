"""The rollout oracle: one-step policy improvement over the heuristic oracle (Bertsekas' rollout).

At every page it knows the user model's full state (hidden taste, interest, time budget, fatigue). It builds a few
candidate pages (:data:`PAGE_KINDS`, the first ``n_pages`` of them, duplicates dropped) and, for each, simulates the
rest of the session ``rollouts`` times on copies of the state (:meth:`RecSimUser.fork
<recagent_gym.users.recsim.RecSimUser.fork>`, :meth:`RecommenderSession.fork
<recagent_gym.session.state.RecommenderSession.fork>`) through the env's own kernel, retriever and reward, with the
heuristic oracle (:class:`~recagent_gym.policies.candidate_baselines.OracleCandidates`) choosing every later page.
It shows the page with the highest mean rollout return (a tie goes to the earlier kind: the heuristic's page first).

Common random numbers: rollout ``m`` of every candidate page draws the user's choices and the later candidates from
the same two seeds, so the pages are compared on the same luck. The seeds come from the oracle's own generator
(``seed``); the real session's generators, the env's and the user model's state are never touched, so the other
recommenders' returns are the same whether or not the oracle ran. Deterministic given ``seed``.

Because the heuristic's page is always a candidate, the rollout oracle is at least as good as the heuristic in
expectation, up to the noise of picking the best of a few estimates from ``rollouts`` samples each.

Cost: ``n_pages x rollouts x remaining pages`` simulated pages per decision (about 0.1 ms each with RecSim-style
users and 50 candidates); it needs a user model with ``fork`` (RecSim-style users): :func:`rollout_unsupported`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from recagent_gym.policies.candidate_baselines import _CandidateRecommender, oracle_scores, rank_action

PAGE_KINDS: tuple[str, ...] = ("heuristic", "patient", "quality", "mix", "appeal", "eager")
"""The candidate pages, in order (``n_pages`` takes the first ones); items shown earlier this session rank last in
each. ``heuristic``: the heuristic oracle's page (``oracle_values`` at ``minute_value``); ``patient`` and ``eager``:
the heuristic at twice and half ``minute_value``; ``quality``: the most nutritious candidates (the quality-greedy
page, from the user's true nutrition, :meth:`RecSimUser.nutrition_for`); ``mix``: the heuristic's top half, the rest
the most nutritious of the others; ``appeal``: the most appealing (the myopic oracle). The order is by use: on 60 of
``rl_recsim``'s training users (8 rollouts) with all six, ``patient`` was the page most often chosen after the
heuristic's, ``eager`` the least."""


def rollout_unsupported(model: Any) -> str | None:
    """Why the rollout oracle cannot simulate these users (None when it can): it needs a cheap state copy."""
    if callable(getattr(model, "fork", None)) and callable(getattr(model, "oracle_utilities", None)):
        return None
    return f"{type(model).__name__} has no state copy (fork) to simulate sessions on"


def top_page(scores: np.ndarray, shown: np.ndarray, size: int) -> np.ndarray:
    """Indices of the ``size`` best ``scores``, items ``shown`` last (stable): the page the env takes from
    :func:`~recagent_gym.policies.candidate_baselines.rank_action`'s action."""
    ranked = np.where(shown, -np.inf, np.asarray(scores, dtype=np.float64))
    return np.argsort(-ranked, kind="stable")[: min(size, len(ranked))]


class RolloutOracle(_CandidateRecommender):
    """The page of the few candidates with the best mean simulated return; see the module docstring."""

    def __init__(
        self, env: Any, *, minute_value: float = 0.2, rollouts: int = 8, n_pages: int = 4, seed: int = 0
    ) -> None:
        super().__init__(env)
        reason = rollout_unsupported(self.env.user_model)
        if reason is not None:
            raise TypeError(f"no rollout oracle: {reason}")
        if rollouts < 1 or not 1 <= n_pages <= len(PAGE_KINDS):
            raise ValueError(f"rollouts must be >= 1 and n_pages in 1..{len(PAGE_KINDS)}, got {rollouts}, {n_pages}")
        self.minute_value, self.rollouts, self.kinds = minute_value, rollouts, PAGE_KINDS[:n_pages]
        self.rng = np.random.default_rng(seed)
        self.picks = dict.fromkeys(self.kinds, 0)
        """How often each kind of page was shown (a diagnostic)."""

    def get_state(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state, "picks": dict(self.picks)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.picks = dict(state["picks"])

    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, None]:
        page = self.page()
        scores = np.full(len(observation["candidate_mask"]), -1.0)
        scores[page] = 1.0 - np.arange(len(page)) / max(len(page), 1)  # the page first, in its order
        return rank_action(scores), None

    def page(self) -> np.ndarray:
        """Candidate indices of the page to show now."""
        env = self.env
        ids = np.asarray(env.candidate_ids)
        shown_counts = env.shown_this_session
        shown = np.fromiter((i in shown_counts for i in ids.tolist()), bool, len(ids))
        pages = self.candidate_pages(ids, shown)
        if len(pages) == 1:
            kind, best = pages[0]
        else:
            seeds = self.rng.integers(0, 2**63, size=self.rollouts).tolist()
            means = [np.mean([self._rollout(ids[page], seed, shown_counts) for seed in seeds]) for _, page in pages]
            kind, best = pages[int(np.argmax(means))]  # the first of equal means: the heuristic's page wins ties
        self.picks[kind] += 1
        return best

    def candidate_pages(self, ids: np.ndarray, shown: np.ndarray) -> list[tuple[str, np.ndarray]]:
        """``(kind, candidate indices)`` for each kind in use, a page equal (as a set) to an earlier one dropped."""
        model, user, size = self.env.user_model, self.env.current_user, self.env.page_size
        heuristic = oracle_scores(model, user, ids, self.minute_value)
        nutrition = np.asarray(model.nutrition_for(user, ids))
        pages: list[tuple[str, np.ndarray]] = []
        for kind in self.kinds:
            if kind == "heuristic":
                page = top_page(heuristic, shown, size)
            elif kind == "quality":
                page = top_page(nutrition, shown, size)
            elif kind == "appeal":
                page = top_page(model.oracle_utilities(user, ids), shown, size)
            elif kind == "mix":
                head = top_page(heuristic, shown, math.ceil(size / 2))
                taken = shown.copy()
                taken[head] = True
                page = np.concatenate([head, top_page(nutrition, taken, size - len(head))])
            else:
                factor = 2.0 if kind == "patient" else 0.5
                page = top_page(oracle_scores(model, user, ids, factor * self.minute_value), shown, size)
            if all(set(page.tolist()) != set(p.tolist()) for _, p in pages):
                pages.append((kind, page))
        return pages

    def _rollout(self, first: np.ndarray, seed: int, shown_counts: dict[int, int]) -> float:
        """Return of one simulated rest of the session: ``first`` (item ids) now, the heuristic's pages after."""
        env = self.env
        user, size = env.current_user, env.page_size
        session_rng, retrieval_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
        twin = env.user_model.fork(user)
        session = env.session.fork(session_rng)
        shown = set(shown_counts)
        page, total = first, 0.0
        while True:
            [result] = env.kernel.step_sessions([session], [page], twin)
            total += float(env.reward_fn(result.outcome))
            if result.done:
                return total
            shown.update(result.page.items)
            ids = env.retriever.retrieve(user, session.seen, retrieval_rng)
            flags = np.fromiter((i in shown for i in ids.tolist()), bool, len(ids))
            page = ids[top_page(oracle_scores(twin, user, ids, self.minute_value), flags, size)]
