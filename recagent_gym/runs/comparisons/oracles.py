"""The oracle rows of the RL comparison and the reference of its ``/ oracle`` ratio.

``oracle`` is the heuristic oracle (:class:`~recagent_gym.policies.candidate_baselines.OracleCandidates`: the known
state, the time budget priced at ``train.oracle_minute_value``; it does not plan). ``oracle_rollout`` is the
rollout oracle (:class:`~recagent_gym.policies.rollout_oracle.RolloutOracle`: one-step policy improvement over the
heuristic by simulating the rest of the session on a copy of the known state). The ratio is to the rollout oracle
where it runs; users without a state copy (distilled, embedding users) get the heuristic instead, and the report
says so and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recagent_gym.policies.candidate_baselines import OracleCandidates
from recagent_gym.policies.config import TrainConfig
from recagent_gym.policies.rollout_oracle import RolloutOracle, rollout_unsupported
from recagent_gym.runs.policies.protocol import bootstrap_mean

ORACLES: tuple[str, ...] = ("oracle", "oracle_rollout")
"""Reference rows (they read the simulated users' hidden state): never a baseline nor a learner."""


@dataclass
class OracleRows:
    """The oracle rows built so far, and why a rollout oracle could not run (None when it could)."""

    rows: dict[str, Any] = field(default_factory=dict)
    fallback: str | None = None
    heuristic: str = "the heuristic oracle (`oracle`)"
    """What the heuristic oracle ranks by, for the report."""

    def add(self, name: str, env: Any, train: TrainConfig) -> None:
        """Build the row ``name`` (one of :data:`ORACLES`); an ``oracle_rollout`` the users cannot support becomes
        the heuristic ``oracle`` row (once), with the reason kept for the report."""
        heuristic = lambda: OracleCandidates(env, minute_value=train.oracle_minute_value)  # noqa: E731
        self.heuristic = _heuristic_text(env.unwrapped.user_model, train.oracle_minute_value)
        if name == "oracle":
            self.rows.setdefault("oracle", heuristic())
            return
        reason = rollout_unsupported(env.unwrapped.user_model)
        if reason is None:
            self.rows[name] = RolloutOracle(
                env,
                minute_value=train.oracle_minute_value,
                rollouts=train.oracle_rollouts,
                n_pages=train.oracle_rollout_pages,
                seed=train.seeds[0],
            )
        else:
            self.fallback = reason
            self.rows.setdefault("oracle", heuristic())

    @property
    def reference(self) -> str | None:
        """The row the ``/ oracle`` ratio and correlation are against."""
        return next((name for name in ("oracle_rollout", "oracle") if name in self.rows), None)

    def note(self, train: TrainConfig, per_user: Mapping[str, np.ndarray]) -> str:
        """One sentence for the report: which oracle the ratio uses (with the rollout oracle's paired gain over the
        heuristic where both ran: ``per_user`` holds each row's per-user mean return), or the fallback's reason."""
        heuristic = self.heuristic
        rollout = self.rows.get("oracle_rollout")
        if rollout is not None:
            total = max(sum(rollout.picks.values()), 1)
            picks = ", ".join(f"{kind} {n / total:.0%}" for kind, n in rollout.picks.items())
            return (
                f"The `/ oracle` ratio is to the rollout oracle (`oracle_rollout`: at each page the best of "
                f"{train.oracle_rollout_pages} candidate pages by the mean return of {train.oracle_rollouts} "
                f"simulated rests of the session on a copy of the known state, with {heuristic} choosing the "
                f"later pages; the pages it showed: {picks}){self._gain(per_user, train.n_bootstrap)}."
            )
        if self.fallback is not None:
            return f"No rollout oracle for these users ({self.fallback}): the `/ oracle` ratio is to {heuristic}."
        if self.reference == "oracle":
            return f"The `/ oracle` ratio is to {heuristic}."
        return ""

    @staticmethod
    def _gain(per_user: Mapping[str, np.ndarray], n_boot: int) -> str:
        if not {"oracle", "oracle_rollout"} <= set(per_user):
            return ""
        gain = bootstrap_mean(per_user["oracle_rollout"] - per_user["oracle"], n_boot=n_boot, seed=31)
        return (
            f"; rollout minus heuristic oracle, paired over users: {gain.mean:+.3f} [{gain.low:+.3f}, {gain.high:+.3f}]"
        )


def _heuristic_text(model: Any, minute_value: float) -> str:
    """The heuristic oracle in words: what :func:`~recagent_gym.policies.candidate_baselines.oracle_scores` reads."""
    if getattr(model, "oracle_values", None) is not None and minute_value > 0:
        what = f"appeal with the time budget priced at {minute_value} reward per minute, from the known state"
    else:
        what = "the users' noise-free score of each candidate, myopic"
    return f"the heuristic oracle (`oracle`: {what}; it does not plan)"
