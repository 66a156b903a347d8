"""The held-out evaluation's results as people read them: the markdown table with intervals, the one-line summary,
and the CSV beside it."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.runs.policies.evaluate_policies import PolicyMetrics


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def _interval_cell(mean: float, low: float, high: float) -> str:
    if math.isnan(mean):
        return ""
    if math.isnan(low):
        return f"{mean:.3f}"
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def markdown_table(results: list[PolicyMetrics], oracle: str | None = None) -> str:
    """Return, swapped-encoding drop and oracle ratio with their 95% intervals, then the behaviour columns; ``oracle``
    names the ratio's reference row in its column header."""
    against = "oracle" if oracle is None or oracle == "oracle" else f"oracle ({oracle})"
    header = [
        "recommender",
        "return [95% CI]",
        "users",
        "sessions",
        "seeds",
        "swapped drop [95% CI]",
        "vs frozen own [95% CI]",
        f"/ {against} [95% CI]",
        f"corr w/ {against}",
        "watches",
        "pages",
        "leave rate",
        "coverage",
        "genre entropy",
        "fallbacks",
        "real hit rate [95% CI]",
        "real swapped drop [95% CI]",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in results:
        cells = [
            r.recommender,
            _interval_cell(r.mean_return, r.ci_low, r.ci_high),
            str(r.n_users),
            str(r.sessions),
            str(r.seeds),
            _interval_cell(r.swapped_drop, r.swapped_ci_low, r.swapped_ci_high),
            _interval_cell(r.frozen_drop, r.frozen_ci_low, r.frozen_ci_high),
            _interval_cell(r.oracle_ratio, r.oracle_ratio_ci_low, r.oracle_ratio_ci_high),
            _cell(r.oracle_corr),
            _cell(r.watches_per_session),
            _cell(r.pages_per_session),
            _cell(r.leave_rate),
            _cell(r.coverage),
            _cell(r.genre_entropy),
            str(r.fallbacks),
            _interval_cell(r.real_hit, r.real_ci_low, r.real_ci_high),
            _interval_cell(r.real_swapped_drop, r.real_swapped_ci_low, r.real_swapped_ci_high),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_line(results: list[PolicyMetrics], *, learned: Sequence[str] = (), oracle: str | None = None) -> str:
    """One line on what the run shows and what it does not, read off the intervals (not written in advance)."""
    rows = [r for r in results if r.recommender != oracle and not math.isnan(r.ci_low)]
    if not rows:
        return "Too few users for intervals: this run shows that the pipeline runs, nothing about which is better."
    best = max(rows, key=lambda r: r.mean_return)
    tied = [r.recommender for r in rows if r is not best and r.interval.overlaps(best.interval)]
    below = [r.recommender for r in rows if r is not best and not r.interval.overlaps(best.interval)]
    n = best.n_users
    parts = [f"On {n} held-out users: {best.recommender} has the highest mean return"]
    if below:
        parts.append(f"and is above {', '.join(below)} (95% intervals apart)")
    if tied:
        parts.append(f"but is not separable from {', '.join(tied)} (intervals overlap)")
    shows = " ".join(parts) + "."
    caveat = " It does not show what longer training reaches, nor how these results carry to other users."
    if any(name in tied or name == best.recommender for name in learned) and tied:
        caveat = " It does not show whether the learned policy is better or worse: train longer, evaluate more users."
    return shows + caveat


def write_results(
    results: list[PolicyMetrics], output_dir: str | Path, title: str = "", summary: str = "", oracle: str | None = None
) -> dict[str, Path]:
    """``policies.md``, ``policies.csv`` and ``policies.png`` (return and swapped drop with 95% intervals); ``oracle``
    as :func:`markdown_table`'s."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "policies.md", "csv": out / "policies.csv", "plot": out / "policies.png"}
    text = (
        (f"{title}\n\n" if title else "")
        + markdown_table(results, oracle)
        + "\n"
        + (f"\n{summary}\n" if summary else "")
    )
    paths["markdown"].write_text(text, "utf-8")
    names = [f.name for f in fields(PolicyMetrics)]
    with paths["csv"].open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        for r in results:
            writer.writerow({k: _csv_value(v) for k, v in asdict(r).items()})
    labels = [f"{r.recommender}\n(n={r.n_users})" for r in results]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, (mean, low, high), label in zip(
        axes,
        (("mean_return", "ci_low", "ci_high"), ("swapped_drop", "swapped_ci_low", "swapped_ci_high")),
        ("return per session (95% CI over users)", "drop with another user's encoding (95% CI)"),
        strict=True,
    ):
        values = np.array([getattr(r, mean) for r in results], dtype=np.float64)
        lows = np.array([getattr(r, low) for r in results], dtype=np.float64)
        highs = np.array([getattr(r, high) for r in results], dtype=np.float64)
        err = np.vstack([np.nan_to_num(values - lows), np.nan_to_num(highs - values)])
        ax.bar(labels, np.nan_to_num(values), yerr=err, capsize=4, color="tab:blue")
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_title(label, fontsize=11)
        ax.tick_params(axis="x", rotation=30, labelsize=9)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(paths["plot"], dpi=100)
    plt.close(fig)
    return paths


def _csv_value(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return ""
    return value
