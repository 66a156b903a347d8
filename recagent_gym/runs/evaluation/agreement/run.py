"""Play every recommender of the zoo on every user model over the same pools; the real users are one more model.

For each sampler, each user model (``real``: :class:`~recagent_gym.users.replay.ReplayUser`, then the simulated
ones) gets a RecAgent-v1 env over the **history** (the training split) whose retrieval stage is the users' fixed
pools (:class:`~.pools.PoolRetriever`), with ``pages`` pages per session and no social round. Each held-out user
plays one session per recommender from the same restored state (``reset(seed=seed + k)``), through
:func:`~recagent_gym.runs.policies.evaluate_policies.run_sessions`, i.e. the session kernel; a simulated user model
plays ``evaluation.agreement_sessions`` (its return is their mean; the later ones continue the env's generator).
Per session:

- the **return** (the env's reward summed);
- per page, the real future items on it (the dose), **hit@k** (any on the page) and **NDCG@k** (their positions,
  against the ideal page of ``min(k, |future|)`` of them), averaged over the session's pages;
- over the session's pages read as one list (positions 1 .. pages x k): **session NDCG** (against the ideal list
  of ``min(pages x k, |future|)`` future items first) and **recall** (the share of the future items shown).

A user watches at most one item per page, real or simulated. The per-page hit rate is therefore the replayed
real users' watches per page: the real counterpart of a simulated user's return, and the default real metric
(``evaluation.agreement_real_metric``). It rewards a future item on every page, not several on the first (the
future oracle spreads them for that reason); session NDCG rewards showing them early, whatever the pages.

The real ranking is the ``real`` model's real metric; each simulated model's ranking is its mean return.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from recagent_gym.runs.evaluation.agreement.zoo import SWAPPED

REAL = "real"
METRICS: tuple[str, ...] = ("returns", "hit", "ndcg", "session_ndcg", "recall", "per_page", "first_page")
"""Per-user values of an :class:`Arm`: the simulated return, the real metrics of the pages shown, and the reward per
page shown (the return without the session's length: watches per page, the real hit's unit) and on the first page
only (no session length at all)."""


@dataclass
class Arm:
    """One recommender on one user model under one sampler: per-user values (seeds of a policy pooled)."""

    sampler: str
    user_model: str
    recommender: str
    returns: np.ndarray
    hit: np.ndarray
    ndcg: np.ndarray
    session_ndcg: np.ndarray
    recall: np.ndarray
    per_page: np.ndarray
    first_page: np.ndarray
    dose: np.ndarray
    """``(steps, 3)``: user index, real future items on the page, the step's reward."""
    seconds: float = 0.0
    fallbacks: int = 0
    watches: float = 0.0
    pages: float = 0.0
    expected_watch: np.ndarray | None = None
    """Per user: the user model's own watch probability (``info["extra"]["p_watch"]``) averaged over the pages it
    was shown, or None where the model reports none (the real replay, RecSim-style and embedding users)."""


@dataclass
class PageScorer:
    """Per-page hit@k and NDCG@k against each user's real future items, accumulated per user."""

    users: Sequence[int]
    future: Mapping[int, Sequence[int]]
    k: int
    pages: int
    hits: list[list[float]] = field(default_factory=list)
    ndcgs: list[list[float]] = field(default_factory=list)
    shown: list[list[int]] = field(default_factory=list)
    dose: list[tuple[int, int, float]] = field(default_factory=list)
    rewards: list[list[float]] = field(default_factory=list)
    """Per user, the reward of every page of the first session."""
    ended: list[int] = field(default_factory=list)
    """Sessions each user has ended: hit@k, NDCG@k and the dose count every session's pages, session NDCG and
    recall the first session's."""
    expected: list[list[float]] = field(default_factory=list)
    """Per user, the user model's ``p_watch`` of each page that reported one."""

    def __post_init__(self) -> None:
        self.ended = [0 for _ in self.users]
        self.expected = [[] for _ in self.users]
        self.hits = [[] for _ in self.users]
        self.ndcgs = [[] for _ in self.users]
        self.shown = [[] for _ in self.users]
        self.rewards = [[] for _ in self.users]
        self._discount = 1.0 / np.log2(np.arange(self.k * self.pages) + 2.0)

    def __call__(self, index: int, info: dict[str, Any], reward: float, done: bool) -> None:
        future = set(self.future[int(self.users[index])])
        page = [int(i) for i in info["page"]][: self.k]
        relevant = np.array([i in future for i in page], dtype=np.float64)
        ideal = float(self._discount[: min(self.k, len(future))].sum())
        self.hits[index].append(float(relevant.any()))
        self.ndcgs[index].append(float(relevant @ self._discount[: len(page)]) / ideal if ideal > 0 else 0.0)
        if not self.ended[index]:
            self.shown[index].extend(page)
            self.rewards[index].append(float(reward))
        self.ended[index] += int(done)
        p_watch = (info.get("extra") or {}).get("p_watch")
        if isinstance(p_watch, numbers.Real) and math.isfinite(p_watch):
            self.expected[index].append(float(p_watch))
        self.dose.append((index, int(relevant.sum()), reward))

    def expected_per_user(self) -> np.ndarray | None:
        """Per user, the mean ``p_watch`` of its pages; None unless every user's every page reported one."""
        if not all(len(e) == len(h) and e for e, h in zip(self.expected, self.hits, strict=True)):
            return None
        return np.array([np.mean(e) for e in self.expected])

    def per_user(self) -> tuple[np.ndarray, ...]:
        """Per user: hit@k, NDCG@k (page averages), session NDCG and recall (the real side)."""
        mean = lambda rows: np.array([np.mean(r) if r else math.nan for r in rows])  # noqa: E731
        session, recall = [], []
        for user, shown in zip(self.users, self.shown, strict=True):
            future = set(self.future[int(user)])
            relevant = np.array([i in future for i in shown[: len(self._discount)]], dtype=np.float64)
            ideal = float(self._discount[: min(len(self._discount), len(future))].sum())
            session.append(float(relevant @ self._discount[: len(relevant)]) / ideal if ideal > 0 else math.nan)
            recall.append(len(future & set(shown)) / len(future) if future else math.nan)
        return mean(self.hits), mean(self.ndcgs), np.array(session), np.array(recall)

    def per_page(self) -> tuple[np.ndarray, np.ndarray]:
        """Per user, over the first session: the reward per page shown, and the first page's reward."""
        mean = np.array([np.mean(r) if r else math.nan for r in self.rewards])
        return mean, np.array([r[0] if r else math.nan for r in self.rewards])


def play(
    env: Any,
    recommenders: Sequence[Any],
    users: np.ndarray,
    future: Mapping[int, Sequence[int]],
    *,
    seed: int,
    k: int,
    pages: int,
    tick: Callable[[int], None] | None = None,
    first_obs_out: dict[int, Any] | None = None,
    swap_from: Mapping[int, Any] | None = None,
    sessions: int = 1,
    on_page: Callable[[int, dict[str, Any], float], None] | None = None,
) -> tuple[dict[str, Any], np.ndarray, int, float, float]:
    """Each recommender (a policy's seeds) on ``users``, ``sessions`` sessions per user: per-user ``returns`` (the
    sessions' mean), ``hit``, ``ndcg``, ``session_ndcg``, ``recall`` and ``expected_watch`` (or None; seeds pooled),
    the dose rows, fallbacks, watches and pages per session. ``first_obs_out`` receives each user's first
    observation; with ``swap_from`` (those of an earlier call) every recommender sees another user's encoding (a
    fixed derangement of ``users``), the rest of the session unchanged. ``on_page(user index, info, reward)`` sees
    every page."""
    from recagent_gym.envs.encoding import ENCODING_KEYS
    from recagent_gym.runs.policies.evaluate_policies import EvalProtocol, run_sessions
    from recagent_gym.runs.policies.protocol import derangement

    protocol = EvalProtocol(
        users=users, sessions_per_user=sessions, seed=seed, swapped=False, encoding_keys=ENCODING_KEYS
    )
    partners = derangement(len(users), seed) if swap_from is not None else None
    values: dict[str, list[np.ndarray]] = {name: [] for name in METRICS}
    expected: list[np.ndarray | None] = []
    doses: list[np.ndarray] = []
    fallbacks, watches, shown_pages = 0, [], []
    for recommender in recommenders:
        scorer = PageScorer(users.tolist(), future, k, pages)

        def on_step(index: int, info: dict[str, Any], reward: float, done: bool, scorer: PageScorer = scorer) -> None:
            scorer(index, info, reward, done)
            if on_page is not None:
                on_page(index, info, reward)
            if done and tick is not None:
                tick(1)

        record = run_sessions(recommender, env, protocol, on_step=on_step, swap_from=swap_from, partners=partners)
        if first_obs_out is not None:
            first_obs_out.update(record.first_obs)
        per_user_values = (record.returns.mean(axis=1), *scorer.per_user(), *scorer.per_page())
        for name, per_user in zip(METRICS, per_user_values, strict=True):
            values[name].append(per_user)
        expected.append(scorer.expected_per_user())
        doses.append(np.asarray(scorer.dose, dtype=np.float64).reshape(-1, 3))
        fallbacks += record.fallbacks
        watches += record.watches
        shown_pages += record.pages
    pooled: dict[str, Any] = {name: np.mean(v, axis=0) for name, v in values.items()}
    pooled["expected_watch"] = None if any(e is None for e in expected) else np.mean(expected, axis=0)
    return pooled, np.vstack(doses), fallbacks, float(np.mean(watches)), float(np.mean(shown_pages))


def run_arms(
    envs: Mapping[str, Callable[[], Any]],
    zoo: Any,
    users: np.ndarray,
    future: Mapping[int, Sequence[int]],
    *,
    sampler: str,
    seed: int,
    k: int,
    pages: int,
    prefetch: Mapping[int, Sequence[int]] | None = None,
    progress: bool = True,
    sessions: int = 1,
    on_page: Callable[[str, str, int, dict[str, Any], float], None] | None = None,
) -> tuple[list[Arm], dict[str, float]]:
    """Every recommender of ``zoo`` on every user model's env (``envs``: name -> builder), one sampler.

    ``prefetch[u]``: items a user model that can (the LLM agents with a score cache) scores for user ``u`` in one
    call before the sessions, in the very session context the sessions will have (the same reset seed): every page
    is then answered from the cache (one long batch instead of many page-sized ones). Returns the arms and the
    seconds each user model spent outside them (the prefetch). ``sessions``: per user and recommender for every
    simulated user model (the real replay is deterministic: one). ``on_page(user model, recommender row, user
    index, info, reward)`` sees every page of every session (``benchmarks/probe_page_calibration.py`` records the
    real replay's pages with it)."""
    per_model = {name: 1 if name == REAL else sessions for name in envs}
    total = sum(per_model.values()) * zoo.sessions_per_user() * len(users)
    arms: list[Arm] = []
    extra: dict[str, float] = {}
    with tqdm(total=total, desc=f"agreement ({sampler})", unit="session", disable=not progress) as bar:
        for model_name, build in envs.items():
            env = build()
            warm = getattr(env.unwrapped.user_model, "prefetch_scores", None)
            if warm is not None and prefetch:
                started = time.perf_counter()
                for index, user in enumerate(users.tolist()):
                    bar.set_postfix_str(f"{model_name}: scoring the pools of user {index + 1}/{len(users)}")
                    env.reset(seed=seed + index, options={"user_id": int(user)})
                    warm(int(user), prefetch[int(user)])
                extra[model_name] = time.perf_counter() - started
            for rec_name, recommenders in zoo.for_env(env).items():
                first: dict[int, Any] = {}
                plays = [(rec_name, recommenders, None)]
                if rec_name in zoo.swapped:
                    plays.append((rec_name + SWAPPED, zoo.swapped_for_env(env, rec_name), first))
                for name, players, swap_from in plays:
                    bar.set_postfix_str(f"{model_name} / {name}")
                    started = time.perf_counter()
                    values, dose, fallbacks, watches, shown = play(
                        env, players, users, future, seed=seed, k=k, pages=pages, tick=bar.update,
                        first_obs_out=first if swap_from is None else None, swap_from=swap_from,
                        sessions=per_model[model_name],
                        on_page=None if on_page is None else partial(on_page, model_name, name),
                    )  # fmt: skip
                    seconds = time.perf_counter() - started
                    arm = Arm(sampler, model_name, name, dose=dose, seconds=seconds, fallbacks=fallbacks,
                              watches=watches, pages=shown, **values)  # fmt: skip
                    arms.append(arm)
            env.close()
    return arms, extra
