"""The RL comparison at several env seeds (``evaluate rl-comparison --env-seeds 0,1,2``): does a result survive
another population of simulated users and another split?

Env seed ``s`` sets the user model's seed (``user.recsim_seed``: the RecSim-style users' hidden state) and the
train/held-out split (``train.split_seed``); each seed is a whole comparison in ``env_seed_<s>/``. Per seed,
``env_seeds.md`` / ``env_seeds.csv`` give the best learner (highest mean return) minus the best non-learning
baseline (the oracles excluded: they read the hidden state) as a paired interval over the same held-out users, the
learner's swapped-encoding drop, the drop against its own frozen encoding (the control), and its ratio to the
oracle. Settings are whatever the config says, the same at every seed: fix them before the run.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.comparisons.oracles import ORACLES
from recagent_gym.runs.comparisons.rl_comparison import LEARNERS, REAL_HITS_FILE, check_compare, run_comparison
from recagent_gym.runs.config import Config, dump_config
from recagent_gym.runs.policies.evaluate_policies import PolicyMetrics
from recagent_gym.runs.policies.protocol import bootstrap_mean
from recagent_gym.settings_section import ConfigError, check_seed

COLUMNS = ("env_seed", "learner", "learner_return", "baseline", "baseline_return", "difference", "diff_ci_low",
           "diff_ci_high", "swapped_drop", "swapped_ci_low", "swapped_ci_high", "frozen_drop", "frozen_ci_low",
           "frozen_ci_high", "oracle_ratio", "oracle_ratio_ci_low", "oracle_ratio_ci_high", "n_users")  # fmt: skip


def seed_row(seed: int, results: Sequence[PolicyMetrics], per_user: dict[str, np.ndarray], n_boot: int) -> dict:
    """The best learner against the best non-learning baseline at one env seed (paired over users)."""
    learners = [r for r in results if r.recommender in LEARNERS]
    baselines = [r for r in results if r.recommender not in (*LEARNERS, *ORACLES)]
    if not learners or not baselines:
        raise ValueError("--env-seeds needs at least one learner and one non-learning baseline in train.compare")
    best = max(learners, key=lambda r: r.mean_return)
    base = max(baselines, key=lambda r: r.mean_return)
    diff = bootstrap_mean(per_user[best.recommender] - per_user[base.recommender], n_boot=n_boot, seed=seed)
    return {
        "env_seed": seed, "learner": best.recommender, "learner_return": best.mean_return,
        "baseline": base.recommender, "baseline_return": base.mean_return, "difference": diff.mean,
        "diff_ci_low": diff.low, "diff_ci_high": diff.high, "swapped_drop": best.swapped_drop,
        "swapped_ci_low": best.swapped_ci_low, "swapped_ci_high": best.swapped_ci_high,
        "frozen_drop": best.frozen_drop, "frozen_ci_low": best.frozen_ci_low, "frozen_ci_high": best.frozen_ci_high,
        "oracle_ratio": best.oracle_ratio, "oracle_ratio_ci_low": best.oracle_ratio_ci_low,
        "oracle_ratio_ci_high": best.oracle_ratio_ci_high, "n_users": best.n_users,
    }  # fmt: skip


INTERVALS = {"difference": "diff", "swapped_drop": "swapped", "frozen_drop": "frozen", "oracle_ratio": "oracle_ratio"}
"""The prefix of each column's interval bounds (``<prefix>_ci_low``, ``<prefix>_ci_high``)."""


def _cell(row: dict[str, Any], name: str) -> str:
    prefix = INTERVALS[name]
    mean, low, high = (float(row[k]) for k in (name, f"{prefix}_ci_low", f"{prefix}_ci_high"))
    if np.isnan(mean):
        return ""
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]" if np.isfinite(low) else f"{mean:+.3f}"


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| env seed | best learner | best baseline | learner - baseline [95% CI] | swapped drop [95% CI] | "
        "vs frozen own [95% CI] | / oracle [95% CI] | users |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['env_seed']} | {r['learner']} ({r['learner_return']:.3f}) | {r['baseline']} "
            f"({r['baseline_return']:.3f}) | {_cell(r, 'difference')} | {_cell(r, 'swapped_drop')} | "
            f"{_cell(r, 'frozen_drop')} | {_cell(r, 'oracle_ratio')} | {r['n_users']} |"
        )
    held = [r for r in rows if r["diff_ci_low"] > 0]
    lines += ["", f"The best learner is above the best non-learning baseline (paired 95% interval above 0) at "
              f"{len(held)} of {len(rows)} env seeds."]  # fmt: skip
    return "\n".join(lines) + "\n"


def _seed_section(seed: int, report: Path) -> str:
    """Each env seed's own report (its table, headroom and real-hit lines), its title one level down."""
    if not report.exists():
        return ""
    body = report.read_text(encoding="utf-8").strip()
    start = body.find("RecAgent-v1")  # after a provenance block, if the report has one
    body = body[start:] if start > 0 else body
    section = f"\n## Env seed {seed}\n\n" + body.replace("\n# ", "\n### ").removeprefix("# ") + "\n"
    if (report.parent / "learning_curves.png").is_file():
        section += f"\n![learning curves, env seed {seed}]({report.parent.name}/learning_curves.png)\n"
    return section


def seed_config(config: Config, seed: int, out: Path) -> Config:
    """The configuration the comparison at env ``seed`` runs with (its folder ``out/env_seed_<seed>``)."""
    cfg = config.model_copy(deep=True)
    cfg.user.recsim_seed = int(seed)
    cfg.train.split_seed = int(seed)
    return cfg.in_run_folder(out / f"env_seed_{seed}")


ROW_FILE = "env_seed_row.json"
"""Each seed's row of ``env_seeds.csv``, written when its comparison ends: a later run reads it instead of running
that seed again."""
SEED_TABLES = ("policies.csv", REAL_HITS_FILE)
"""The tables a finished seed's comparison holds (the second only with ``train.real_metric``)."""


def holds_comparison(config: Config, seed: int, out: Path, *, strict: bool) -> bool:
    """Whether ``out/env_seed_<seed>`` holds the finished comparison that ``config`` runs at ``seed`` (its
    ``config.yaml`` equal to :func:`seed_config`'s, its tables written). A finished comparison of another
    configuration is refused with the keys that differ when ``strict`` (it would be mixed up with this one), else it
    is not this one (and is run again over it)."""
    here = out / f"env_seed_{seed}"
    tables = ("config.yaml", *SEED_TABLES[: 2 if config.train.real_metric else 1])
    if not all((here / name).is_file() for name in tables):
        return False
    saved = yaml.safe_load((here / "config.yaml").read_text(encoding="utf-8"))
    wanted = yaml.safe_load(dump_config(seed_config(config, seed, out)))
    if saved == wanted:
        return True
    if strict:
        saved = saved if isinstance(saved, dict) else {}
        keys = sorted(f"{s}.{k}" for s in wanted for k in (wanted[s] or {})
                      if isinstance(wanted[s], dict) and (saved.get(s) or {}).get(k) != wanted[s][k])  # fmt: skip
        raise ConfigError(
            f"{here} holds a comparison run with another configuration (differs in {', '.join(keys) or 'layout'}); "
            "remove it or choose another --output-dir"
        )
    return False


def _one_seed(config: Config, seed: int, out: Path, dataset: Dataset | None) -> dict[str, Any]:
    """The whole comparison at env ``seed`` in ``out/env_seed_<seed>``, and its row (in a worker with ``jobs > 1``);
    a seed that an earlier run finished with the same configuration is read, not run again."""
    row_file = out / f"env_seed_{seed}" / ROW_FILE
    if row_file.is_file() and holds_comparison(config, seed, out, strict=False):
        print(f"env seed {seed}: {row_file.parent} holds this comparison already: read, not run again", flush=True)
        row: dict[str, Any] = json.loads(row_file.read_text(encoding="utf-8"))
        return row
    for name in (ROW_FILE, *SEED_TABLES):  # a run stopped part-way must not look finished
        (row_file.parent / name).unlink(missing_ok=True)
    per_user: dict[str, np.ndarray] = {}
    results = run_comparison(seed_config(config, seed, out), output_dir=out / f"env_seed_{seed}", dataset=dataset,
                             per_user=per_user)  # fmt: skip
    row = seed_row(int(seed), results, per_user, config.train.n_bootstrap)
    row_file.write_text(json.dumps({k: _plain(v) for k, v in row.items()}, indent=1), encoding="utf-8")
    return row


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers (JSON); a row read back equals the row written."""
    return value.item() if isinstance(value, np.generic) else value


def run_env_seeds(
    config: Config, seeds: Sequence[int], *, output_dir: str | Path, dataset: Dataset | None = None, jobs: int = 1
) -> list[dict[str, Any]]:
    """One comparison per env seed, then ``env_seeds.md`` / ``env_seeds.csv`` in ``output_dir``; a seed whose folder
    holds this configuration's finished comparison (an interrupted run's) is read, not run again. With ``jobs`` > 1
    the seeds run in that many worker processes at once (each seed is independent and single-threaded at
    ``train.torch_threads`` 1, so two seeds on two cores take about the time of one); the rows are the same as one
    after another: every seed's randomness comes from its own configuration."""
    check_compare(config, env_seeds=True)
    for seed in seeds:
        try:
            check_seed(int(seed), "an env seed")
        except ValueError as exc:
            raise ConfigError(f"--env-seeds: {exc}") from None
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ConfigError(f"--jobs wants a whole number of worker processes >= 1, got {jobs!r}")
    out = Path(output_dir)
    workers = min(jobs, len(seeds))
    if workers == 1:
        rows = [_one_seed(config, int(seed), out, dataset) for seed in seeds]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: a fresh interpreter per worker (forking a process that has started torch's threads can hang)
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_one_seed, config, int(seed), out, dataset) for seed in seeds]
            rows = [f.result() for f in futures]
    text = f"# RL comparison at env seeds {', '.join(str(s) for s in seeds)}\n\n{markdown(rows)}"
    text += "".join(_seed_section(seed, out / f"env_seed_{seed}" / "policies.md") for seed in seeds)
    (out / "env_seeds.md").write_text(text, encoding="utf-8")
    with (out / "env_seeds.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(text, flush=True)
    return rows
