"""``recagent-gym evaluate sim2real``: which simulator's policies hold up on real behaviour.

The RL comparison (:mod:`.rl_comparison`) at the same env seeds for several configurations, one per shipped user
model (``rl_recsim``: RecSim-style users, ``rl_fitted``: the same users with the fit's choice model, ``rl_distilled``,
``rl_embedding``). An env seed fixes the split (``train.split_seed``), so at one seed every configuration's learners
are evaluated on the same held-out users' real next items (``real_hits.csv``); their history recommenders (MF,
item-kNN) are fitted on the same history and are the same rows in every configuration.

For each configuration, env seed and sampler of negatives: the learner with the best simulated return on the
validation users (what a user of the simulator would ship, chosen without the held-out users), its real hit rate
and its paired differences with popularity and with the best history recommender; then pooled over env seeds
(every held-out user at every seed one unit), and which simulator's shipped learner transfers best (paired with the
next one on the same units). ``sim2real.md``, ``sim2real.csv``, ``sim2real.png``.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import yaml

from recagent_gym.runs.comparisons.headroom import HISTORY_RECOMMENDERS
from recagent_gym.runs.policies.protocol import bootstrap_mean
from recagent_gym.runs.policies.validation_file import validation_curves

SAMPLERS: tuple[str, ...] = ("popularity-matched", "uniform")
LEARNER_NAMES: tuple[str, ...] = ("ppo", "a2c", "slateq", "bandit", "bc", "bc_ppo")
"""The learners of the RL comparison (:data:`.rl_comparison.LEARNERS`, not imported: that module loads torch)."""

Hits = dict[str, dict[str, dict[int, float]]]
"""``hits[sampler][recommender][user]``: one env seed's real hit rates."""


@dataclass(frozen=True)
class SeedRun:
    """One configuration's comparison at one env seed, as its folder holds it."""

    config: str
    seed: int
    user_model: str
    pool: int
    """Candidates per page decision (``train.n_candidates``), also the real side's pool."""
    real_side: tuple[tuple[str, str], ...]
    """How the real side was played (:data:`REAL_SIDE_KEYS`: pool, page size, the agreement test's settings): real hit
    rates compare across simulators only where it is the same."""
    returns: dict[str, float]
    """Mean held-out simulated return per row (``policies.csv``)."""
    hits: Hits
    validation: dict[str, float]
    """Each learner's simulated return on the validation users (training users set aside) at the point it was kept,
    mean over training seeds (``<learner>_<seed>/validation.csv``); learners trained without them are absent."""

    @property
    def shipped(self) -> str | None:
        """The learner with the best simulated return on the validation users (never on the held-out users it is
        reported on); on held-out users only where no learner has validation users."""
        if self.validation:
            return max(self.validation, key=lambda n: self.validation[n])
        learners = [n for n in self.returns if n in LEARNER_NAMES]
        return max(learners, key=lambda n: self.returns[n]) if learners else None


@dataclass(frozen=True)
class Row:
    """One line of the report: a configuration's shipped learner at one env seed (or ``pooled``) and sampler."""

    config: str
    user_model: str
    pool: int
    env_seed: str
    sampler: str
    learner: str
    learner_return: float
    real_hit: float
    real_ci_low: float
    real_ci_high: float
    vs_popularity: float
    vs_popularity_low: float
    vs_popularity_high: float
    history: str
    vs_history: float
    vs_history_low: float
    vs_history_high: float
    n_units: int
    n_users: int


REAL_SIDE_KEYS: tuple[tuple[str, str], ...] = (
    ("train", "n_candidates"), ("env", "page_size"), ("evaluation", "agreement_pages"),
    ("evaluation", "agreement_future"), ("evaluation", "agreement_min_history"), ("evaluation", "agreement_split"),
    ("evaluation", "seed"),
)  # fmt: skip
"""The settings the real side's pools and pages follow (:func:`~recagent_gym.runs.evaluation.agreement.sim2real.
real_metrics`)."""


def read_seed_run(config: str, seed: int, folder: Path) -> SeedRun:
    """The folder ``env_seed_<seed>`` of an ``evaluate rl-comparison --env-seeds`` run."""
    saved = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    real_side = tuple((f"{s}.{k}", str(saved[s][k])) for s, k in REAL_SIDE_KEYS)
    with (folder / "policies.csv").open(encoding="utf-8") as handle:
        returns = {row["recommender"]: float(row["mean_return"]) for row in csv.DictReader(handle)}
    hits: Hits = {}
    with (folder / "real_hits.csv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            hits.setdefault(row["sampler"], {}).setdefault(row["recommender"], {})[int(row["user"])] = float(row["hit"])
    curves = validation_curves(folder, [n for n in returns if n in LEARNER_NAMES])
    validation = {name: float(np.mean([v for _, v in kept])) for name, (_, kept) in curves.items() if kept}
    model, pool = saved["user"]["model"], int(saved["train"]["n_candidates"])
    return SeedRun(config, seed, model, pool, real_side, returns, hits, validation)


def _units(runs: Sequence[SeedRun], sampler: str, names: Sequence[str]) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The (seed, user) units every run has for every name, and their hit rates (one row per name)."""
    units: list[tuple[int, int]] = []
    for run in runs:
        rows = run.hits.get(sampler, {})
        if any(n not in rows for n in names):
            continue
        users = set.intersection(*(set(rows[n]) for n in names))
        units.extend((run.seed, u) for u in sorted(users))
    by_seed = {run.seed: run.hits.get(sampler, {}) for run in runs}
    values = np.array([[by_seed[s][n][u] for s, u in units] for n in names]).reshape(len(names), len(units))
    return units, values


def _interval(values: np.ndarray, n_boot: int) -> tuple[float, float, float]:
    est = bootstrap_mean(values, n_boot=n_boot, seed=17)
    return est.mean, est.low, est.high


def shipped_row(runs: Sequence[SeedRun], sampler: str, label: str, n_boot: int) -> Row | None:
    """One configuration's shipped learner (per env seed its own) on ``sampler``, over ``runs`` pooled: its real hit
    rate and paired differences with popularity and the best history recommender (highest pooled hit rate). None
    where no run has those rows' real hits."""
    runs = [r for r in runs if r.shipped is not None and {r.shipped, "popularity"} <= set(r.hits.get(sampler, {}))]
    if not runs:
        return None
    history = [n for n in HISTORY_RECOMMENDERS if all(n in run.hits[sampler] for run in runs)]
    best_history = max(history, key=lambda n: _units(runs, sampler, [n])[1].mean()) if history else "popularity"
    units: list[tuple[int, int]] = []
    parts = []
    for run in runs:
        got, values = _units([run], sampler, [run.shipped or "", "popularity", best_history])
        units.extend(got)
        parts.append(values)
    if not units:
        return None
    hits, pop, hist = np.concatenate(parts, axis=1)
    learners = sorted({run.shipped or "" for run in runs})
    return Row(
        runs[0].config, runs[0].user_model, runs[0].pool, label, sampler, "/".join(learners),
        float(np.mean([run.returns[run.shipped or ""] for run in runs])),
        *_interval(hits, n_boot), *_interval(hits - pop, n_boot), best_history, *_interval(hits - hist, n_boot),
        len(units), len({u for _, u in units}),
    )  # fmt: skip


def rows_for(runs_by_config: Mapping[str, Sequence[SeedRun]], n_boot: int) -> list[Row]:
    """Per configuration and sampler: a row per env seed, then the pooled row (``env_seed`` ``pooled``)."""
    rows: list[Row] = []
    for runs in runs_by_config.values():
        for sampler in SAMPLERS:
            made = [shipped_row([run], sampler, str(run.seed), n_boot) for run in runs]
            made.append(shipped_row(runs, sampler, "pooled", n_boot))
            rows.extend(row for row in made if row is not None)
    return rows


def verdicts(runs_by_config: Mapping[str, Sequence[SeedRun]], n_boot: int) -> list[str]:
    """:func:`best_transfer` per sampler among the configurations whose real side is played alike, and a line for
    each configuration played otherwise (its real hits are not comparable with the others')."""
    groups: dict[tuple[tuple[str, str], ...], dict[str, Sequence[SeedRun]]] = {}
    for config, runs in runs_by_config.items():
        sides = {run.real_side for run in runs}
        key = sides.pop() if len(sides) == 1 else (("env seeds", config),)
        groups.setdefault(key, {})[config] = runs
    lines: list[str] = []
    for side, group in groups.items():
        if len(group) >= 2:
            lines.extend(best_transfer(group, sampler, n_boot) for sampler in SAMPLERS)
            continue
        others = [dict(other) for other in groups if other != side]
        differs = [f"{k} {v}" for k, v in side if any(o.get(k) != v for o in others)]
        lines.append(
            f"`{next(iter(group))}`'s real side is played with {', '.join(differs) or 'other settings'}, unlike the "
            "others': its real hit rates are compared with its own history recommenders only."
        )
    return [line for line in lines if line]


def best_transfer(runs_by_config: Mapping[str, Sequence[SeedRun]], sampler: str, n_boot: int) -> str:
    """Which configuration's shipped learners hold the most real hits on ``sampler``, paired with the runner-up on the
    units both have (same env seed, same user); call it on configurations whose real side is played alike."""
    pooled: dict[str, dict[tuple[int, int], float]] = {}
    for config, runs in runs_by_config.items():
        units: dict[tuple[int, int], float] = {}
        for run in runs:
            name = run.shipped
            if name is not None and name in run.hits.get(sampler, {}):
                units.update({(run.seed, u): h for u, h in run.hits[sampler][name].items()})
        if units:
            pooled[config] = units
    if len(pooled) < 2:
        return ""
    order = sorted(pooled, key=lambda c: -float(np.mean(list(pooled[c].values()))))
    top, second = order[0], order[1]
    common = sorted(set(pooled[top]) & set(pooled[second]))
    diff = np.array([pooled[top][k] - pooled[second][k] for k in common])
    mean, low, high = _interval(diff, n_boot)
    verdict = "above it" if low > 0 else "not separable from it"
    return (
        f"With {sampler} negatives the shipped learners of `{top}` hold the most real hits; minus `{second}`'s, paired "
        f"over {len(common)} (env seed, user) units: {mean:+.3f} [{low:+.3f}, {high:+.3f}] ({verdict})."
    )


COLUMNS = list(Row.__dataclass_fields__)


def _fmt(mean: float, low: float, high: float, signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(mean)} [{f.format(low)}, {f.format(high)}]"


def markdown(rows: Sequence[Row]) -> str:
    head = (
        "| simulator (config) | users | pool | env seed | negatives | shipped learner (sim return) "
        "| real hit rate [95% CI] | minus popularity [95% CI] | minus best history recommender [95% CI] "
        "| units (distinct users) |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        seed = "**pooled**" if r.env_seed == "pooled" else r.env_seed
        lines.append(
            f"| {r.config} | {r.user_model} | {r.pool} | {seed} | {r.sampler} | {r.learner} ({r.learner_return:.2f}) "
            f"| {_fmt(r.real_hit, r.real_ci_low, r.real_ci_high)} "
            f"| {_fmt(r.vs_popularity, r.vs_popularity_low, r.vs_popularity_high, True)} "
            f"| {r.history}: {_fmt(r.vs_history, r.vs_history_low, r.vs_history_high, True)} "
            f"| {r.n_units} ({r.n_users}) |"
        )
    return "\n".join(lines)


def write(rows: Sequence[Row], verdicts: Sequence[str], out: Path, intro: str) -> Path:
    """``sim2real.md`` (returned), ``sim2real.csv`` and ``sim2real.png`` in ``out``."""
    text = f"# Sim-to-real: which simulator's policies hold up on real behaviour\n\n{intro}\n\n{markdown(rows)}\n"
    text += "".join(f"\n{v}\n" for v in verdicts if v) + "\n![sim2real](sim2real.png)\n"
    (out / "sim2real.md").write_text(text, encoding="utf-8")
    with (out / "sim2real.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    _plot([r for r in rows if r.env_seed == "pooled"], out / "sim2real.png")
    return out / "sim2real.md"


def _plot(rows: Sequence[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = list(dict.fromkeys(r.config for r in rows))
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * max(len(configs), 1), 3.6))
    width = 0.38
    for k, sampler in enumerate(SAMPLERS):
        got = {r.config: r for r in rows if r.sampler == sampler}
        xs = [i + (k - 0.5) * width for i, c in enumerate(configs) if c in got]
        mids = [got[c].vs_history for c in configs if c in got]
        errs = np.array([[got[c].vs_history - got[c].vs_history_low, got[c].vs_history_high - got[c].vs_history]
                         for c in configs if c in got]).T.reshape(2, -1)  # fmt: skip
        ax.bar(xs, mids, width, yerr=errs, capsize=3, label=f"{sampler} negatives")
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(configs)), [f"{c}\n({next(r.user_model for r in rows if r.config == c)})" for c in configs])
    ax.set_ylabel("real hit rate minus best history rec.")
    ax.set_title("shipped learner on held-out users' real next items (pooled, 95% CI)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
