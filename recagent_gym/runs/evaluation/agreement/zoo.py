"""The recommenders of the agreement test, each fitted on the history only, all answering SB3's ``predict`` on
RecAgent-v1 through :mod:`recagent_gym.policies.candidate_baselines`.

``random``, ``popularity``, ``quality`` (the candidates' observed quality column: no user information), the
scored history models of :data:`recagent_gym.recommenders.history_zoo.HISTORY_MODELS` (recent popularity, item- and
user-kNN, MF at three ranks, BPR-MF, LightGCN, EASE, GRU4Rec), ``oracle`` (one of the
user's real future items on every page: :class:`~recagent_gym.policies.candidate_baselines.FutureOracleCandidates`)
and ``anti-oracle`` (the real future last), and trained RecAgent-v1 policies (``--policy NAME=PATH``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.config.evaluation_section import AGREEMENT_RECOMMENDERS

RECOMMENDERS: tuple[str, ...] = AGREEMENT_RECOMMENDERS
SWAPPED = "~swapped"
"""Suffix of a recommender's row when it reads another held-out user's encoding (``evaluation.agreement_swapped``)."""
SWAPPABLE: tuple[str, ...] = ("itemknn", "userknn", "mf", "mf-8", "mf-128", "bpr", "lightgcn", "ease", "gru4rec")
"""The zoo's recommenders that read who the user is (the others rank by the candidates or by the real future)."""


class Zoo:
    """Fits each history model once and hands out per-env recommenders."""

    def __init__(
        self,
        names: Sequence[str],
        history: Dataset,
        future: Mapping[int, Sequence[int]],
        *,
        policies: Mapping[str, Sequence[Path]] | None = None,
        ready: Mapping[str, Sequence[Any]] | None = None,
        seed: int = 0,
        swapped: Sequence[str] = (),
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        from recagent_gym.recommenders import history_scorers as hs
        from recagent_gym.recommenders.history_zoo import HISTORY_MODELS

        unknown = sorted(set(names) - set(RECOMMENDERS))
        if unknown:
            raise ValueError(f"unknown recommenders {unknown}; expected among {', '.join(RECOMMENDERS)}")
        self.names = list(names)
        self.seed = seed
        self.policies = {name: [Path(p) for p in paths] for name, paths in (policies or {}).items()}
        self.ready = {name: list(models) for name, models in (ready or {}).items()}
        """Recommenders already built (trained learners of ``rl-comparison``), answering ``predict`` on any
        RecAgent-v1 observation of the same shape."""
        readers = {*(n for n in self.names if n in SWAPPABLE), *self.policies, *self.ready}
        wrong = [name for name in swapped if name not in readers]
        if wrong:
            raise ValueError(
                f"agreement_swapped: {wrong} do not read the user's encoding in this run; expected among "
                f"{sorted(readers) or 'none (add itemknn, mf, lightgcn or a policy)'}"
            )
        self.swapped = list(dict.fromkeys(swapped))
        """Recommenders also played on another user's encoding (rows ``<name>~swapped``)."""
        builders: dict[str, Callable[[], Any]] = {
            **{name: partial(build, history, seed) for name, build in HISTORY_MODELS.items()},
            "anti-oracle": lambda: hs.FutureLast(future),
        }
        self.future = future
        self.scorers: dict[str, Any] = {}
        for name in self.names:
            if name in builders:
                started = time.perf_counter()
                self.scorers[name] = builders[name]()
                say(f"fitted {name} on the history ({time.perf_counter() - started:.1f} s)")
        self._loaded: dict[str, list[Any]] = {}

    def all_names(self) -> list[str]:
        return [*self.names, *self.policies, *self.ready, *(name + SWAPPED for name in self.swapped)]

    def sessions_per_user(self) -> int:
        per_name = {**{n: 1 for n in self.names}, **{n: len(p) for n, p in self.policies.items()},
                    **{n: len(r) for n, r in self.ready.items()}}  # fmt: skip
        return sum(per_name.values()) + sum(per_name[name] for name in self.swapped)

    def swapped_for_env(self, env: Any, name: str) -> list[Any]:
        """``name``'s recommenders for the swapped sessions: the zoo's history models identify the user from the
        observed encoding (:class:`~recagent_gym.policies.candidate_baselines.EncodedUserCandidates`), so another
        user's encoding makes them rank for that user; policies read the observation anyway."""
        if name in self.scorers:
            from recagent_gym.policies.candidate_baselines import EncodedUserCandidates

            return [EncodedUserCandidates(env, self.scorers[name])]
        return self.ready[name] if name in self.ready else self._policy(name, self.policies[name], env)

    def for_env(self, env: Any) -> dict[str, list[Any]]:
        """Every recommender bound to ``env`` (a list per name: a policy given for several seeds)."""
        from recagent_gym.policies.candidate_baselines import (
            FutureOracleCandidates,
            PopularCandidates,
            QualityCandidates,
            RandomCandidates,
            ScoredCandidates,
        )

        out: dict[str, list[Any]] = {}
        for name in self.names:
            if name == "random":
                out[name] = [RandomCandidates(env, seed=self.seed)]
            elif name == "popularity":  # the env is built on the history: its popularity is the history's
                out[name] = [PopularCandidates(env)]
            elif name == "quality":
                out[name] = [QualityCandidates(env)]
            elif name == "oracle":
                out[name] = [FutureOracleCandidates(env, self.future)]
            else:
                out[name] = [ScoredCandidates(env, self.scorers[name])]
        for name, paths in self.policies.items():
            out[name] = self._policy(name, paths, env)
        out.update(self.ready)
        return out

    def _policy(self, name: str, paths: list[Path], env: Any) -> list[Any]:
        """The item-scoring PPOs of ``paths``, checked against ``env``'s spaces (a clear error for a missing,
        damaged or foreign zip, or a policy of another env)."""
        if name not in self._loaded:
            from recagent_gym.runs.policies.policy_files import load_policy

            spaces = {"observation_space": env.observation_space, "action_space": env.action_space}
            self._loaded[name] = [load_policy(path, "ppo", **spaces) for path in paths]
        return self._loaded[name]
