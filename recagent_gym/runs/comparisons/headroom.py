"""The RL comparison's two headline lines: each learner's share of the planning headroom, and how its pages do on
the held-out users' real next items beside the recommenders that read only the history (sim-to-real).

Headroom: the oracle's margin over the best non-learning baseline, ``oracle - best``; a learner's fraction is
``(learner - best) / (oracle - best)``, its interval from a bootstrap over held-out users (the same resample for the
three rows). Real hits: per sampler, each learner's real hit rate minus random's, popularity's and the best history
recommender's (MF, item-kNN: the highest real hit rate), paired over the same users.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from recagent_gym.runs.metrics import bootstrap_replicates
from recagent_gym.runs.policies.protocol import bootstrap_mean

HISTORY_RECOMMENDERS: tuple[str, ...] = ("mf", "itemknn")


def headroom_fraction(
    learner: np.ndarray, best: np.ndarray, oracle: np.ndarray, *, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """``(fraction, low, high)``: ``(learner - best) / (oracle - best)`` of per-user means, 95% bootstrap interval
    over users (resampled together)."""
    rows = np.stack([learner, best, oracle])
    point = _fraction(rows.mean(axis=1))
    boots = bootstrap_replicates(lambda d: _fraction(rows[:, d].mean(axis=1)), rows.shape[1],
                                 np.random.default_rng(seed), n_boot=n_boot)  # fmt: skip
    boots = boots[np.isfinite(boots)]
    if not len(boots):
        return point, float("nan"), float("nan")
    return point, float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def _fraction(means: np.ndarray) -> float:
    margin = means[2] - means[1]
    return float((means[0] - means[1]) / margin) if abs(margin) > 1e-12 else float("nan")


def headroom_line(
    per_user: Mapping[str, np.ndarray], learners: Sequence[str], baselines: Sequence[str], oracle: str | None,
    n_boot: int,
) -> str:  # fmt: skip
    """One sentence: every learner's fraction of the oracle's margin over the best non-learning baseline."""
    present = [b for b in baselines if b in per_user]
    if oracle is None or oracle not in per_user or not present or not learners:
        return ""
    best = max(present, key=lambda b: float(per_user[b].mean()))
    gap = bootstrap_mean(per_user[oracle] - per_user[best], n_boot=n_boot, seed=23)
    margin = f"{gap.mean:+.3f} [{gap.low:+.3f}, {gap.high:+.3f}]"
    if gap.low <= 0:
        return (f"Headroom: {oracle} minus the best non-learning baseline ({best}) is {margin} per session, paired "
                "over users: not above zero, so no learner's fraction of it is read.")  # fmt: skip
    parts = []
    for name in learners:
        f, low, high = headroom_fraction(per_user[name], per_user[best], per_user[oracle], n_boot=n_boot)
        parts.append(f"{name} {f:+.0%} [{low:+.0%}, {high:+.0%}]")
    return (
        f"Headroom: {oracle} minus the best non-learning baseline ({best}) is {margin} per session; each "
        f"learner's fraction of it (95% bootstrap over users): {'; '.join(parts)}."
    )


def real_transfer_lines(
    real: Mapping[str, Mapping[str, np.ndarray]], learners: Sequence[str], n_boot: int, best_simulated: str | None
) -> list[str]:
    """Per sampler (``real[sampler][row]``: per-user real hit rates, the same users for every row), each learner's
    real hit rate and its paired differences with random, popularity and the best history recommender; and which
    learner transfers best."""
    lines = []
    for sampler, rows in real.items():
        present = [n for n in learners if n in rows]
        if not present:
            continue
        history = [n for n in HISTORY_RECOMMENDERS if n in rows]
        best_history = max(history, key=lambda n: float(rows[n].mean())) if history else None
        against = [n for n in ("random", "popularity", best_history) if n is not None and n in rows]
        parts = []
        for name in present:
            diffs = []
            for other in against:
                d = bootstrap_mean(rows[name] - rows[other], n_boot=n_boot, seed=17)
                diffs.append(f"vs {other} {d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
            parts.append(f"{name} {rows[name].mean():.3f} ({', '.join(diffs)})")
        top = max(present, key=lambda n: float(rows[n].mean()))
        line = f"Real hits, {sampler} negatives (paired over users): {'; '.join(parts)}. Best transfer: {top}"
        if best_simulated is not None and best_simulated in rows:
            held = rows[best_simulated].mean()
            line += f"; the learner with the best simulated return ({best_simulated}) holds {held:.3f}"
        lines.append(line + ".")
    return lines
