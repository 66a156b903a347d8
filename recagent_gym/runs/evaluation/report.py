"""Writing evaluation results: ``table.md``, ``table.csv``, ``plot.png`` and the redacted ``config.yaml``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import yaml

from recagent_gym.runs.config import Config
from recagent_gym.runs.config.evaluation_section import EvaluationConfig
from recagent_gym.runs.metrics import JUDGE_LABELS, Estimate

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from recagent_gym.runs.evaluation.discrimination_table import DiscriminationResult
    from recagent_gym.runs.evaluation.sequence import SequenceResult


def write_outputs(
    out_dir: str | Path,
    result: DiscriminationResult | SequenceResult | Any,
    config: Config,
    evaluation: EvaluationConfig,
) -> dict[str, Path]:
    """Write the four output files of an evaluation into ``out_dir`` (created); returns their paths."""
    from recagent_gym.runs.evaluation.discrimination_table import DiscriminationResult

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("table.md", "table.csv", "plot.png", "config.yaml")}
    paths["table.md"].write_text(result.markdown(), encoding="utf-8")
    pd.DataFrame(result.rows()).to_csv(paths["table.csv"], index=False)
    if hasattr(result, "plot"):  # the preference and rating results draw their own figure
        result.plot(paths["plot.png"])
    elif isinstance(result, DiscriminationResult):
        plot_discrimination(result, paths["plot.png"])
    else:
        plot_sequence(result, paths["plot.png"])
    paths["config.yaml"].write_text(redacted_yaml(config, evaluation), encoding="utf-8")
    prior = getattr(result, "prior", None) or getattr(getattr(result, "base", None), "prior", None)
    if prior:  # the behavioural prior's weights, stored with the run
        paths["prior.json"] = out / "prior.json"
        paths["prior.json"].write_text(json.dumps(prior, indent=2) + "\n", encoding="utf-8")
    return paths


def redacted_yaml(config: Config, evaluation: EvaluationConfig) -> str:
    """The whole configuration as YAML with secrets replaced (JSON mode masks ``SecretStr`` values)."""
    data: dict[str, Any] = config.redacted()
    data["evaluation"] = evaluation.model_dump(mode="json")
    return yaml.safe_dump(_plain(data), sort_keys=False, allow_unicode=True)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _errors(estimates: list[Estimate]) -> np.ndarray:
    """Asymmetric error bars ``(2, n)`` from the intervals (0 where undefined)."""
    means = np.array([e.mean for e in estimates])
    low = np.array([e.low if np.isfinite(e.low) else e.mean for e in estimates])
    high = np.array([e.high if np.isfinite(e.high) else e.mean for e in estimates])
    return np.nan_to_num(np.vstack([means - low, high - means]).clip(min=0.0))


def _grouped_bars(ax: Axes, groups: list[str], series: dict[str, list[Estimate]]) -> None:
    x = np.arange(len(groups))
    width = 0.8 / max(len(series), 1)
    for k, (name, estimates) in enumerate(series.items()):
        means = np.nan_to_num([e.mean for e in estimates])
        ax.bar(x + (k - (len(series) - 1) / 2) * width, means, width, yerr=_errors(estimates), capsize=2, label=name)
    ax.set_xticks(x, groups)


def plot_discrimination(result: DiscriminationResult, path: str | Path) -> None:
    """Bars with 95% intervals per model and setting, one panel per negative sampler; paper rows as markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from recagent_gym.runs.evaluation.discrimination_table import PAPER_ROWS

    heads = [f"({a},{b})" for a, b in result.settings]
    fig, axes = plt.subplots(1, len(result.samplers), figsize=(9.5 * len(result.samplers), 4.2), squeeze=False)
    for ax, sampler in zip(axes[0], result.samplers, strict=True):
        series = {
            result.labels[m]: [result.cell(m, sampler, a, b).hit_rate for a, b in result.settings]
            for m in result.models
        }
        _grouped_bars(ax, heads, series)
        if sampler == "uniform":
            for marker, (name, paper) in zip("ovs^", PAPER_ROWS.items(), strict=False):
                xs = [i for i, s in enumerate(result.settings) if s in paper]
                ax.scatter(xs, [paper[result.settings[i]] for i in xs], marker=marker, facecolors="none",
                           edgecolors="black", zorder=3, label=name)  # fmt: skip
        ax.set_title(f"negatives: {sampler}")
        ax.set_xlabel("(a, b)")
        ax.set_ylabel("hit rate p")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the panel, never over bars
    fig.suptitle(f"Discrimination on {result.dataset} ({len(result.users)} users, 95% intervals)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _short(label: str) -> str:
    """``LLM agent (embedded:gemma...)`` -> ``LLM agent``: plot labels stay short, the tables keep the backend."""
    return label.split(" (")[0]


def plot_sequence(result: SequenceResult, path: str | Path) -> None:
    """Objective metrics per length and sequence source, and the judge's verdict shares per comparison (2 x 2)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = sorted({r.n for r in result.objective})
    sources = list(dict.fromkeys(r.source for r in result.objective))
    panels = [("hit_rate", "held-out hit rate ↑"), ("divergence", "genre JS divergence from history ↓"),
              ("similarity", "embedding similarity to ground truth ↑")]  # fmt: skip
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    flat = axes.ravel()
    for k, (ax, (attr, title)) in enumerate(zip(flat, panels, strict=False)):
        series = {
            _short(result.labels[s]): [getattr(next(r for r in result.objective if r.n == n and r.source == s), attr)
                                       for n in lengths] for s in sources
        }  # fmt: skip
        _grouped_bars(ax, [f"N={n}" for n in lengths], series)
        ax.set_title(title)
        if k == 0:
            ax.legend(fontsize=8)
    ax = flat[3]
    if result.judge:
        names = [f"N={j.n}: {_short(result.labels[j.first])} vs {_short(result.labels[j.second])}"
                 for j in result.judge]  # fmt: skip
        left = np.zeros(len(result.judge))
        colours = plt.get_cmap("RdBu")(np.linspace(0.1, 0.9, len(JUDGE_LABELS)))
        for k, label in enumerate(JUDGE_LABELS):
            shares = np.array([j.summary.shares[k] for j in result.judge])
            ax.barh(names, shares, left=left, color=colours[k], label=label)
            left += shares
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_title(f"judge verdicts, A vs B ({result.judge_name})", fontsize=10)
        ax.legend(fontsize=8, ncol=len(JUDGE_LABELS), loc="upper center", bbox_to_anchor=(0.5, -0.06))
    else:
        ax.axis("off")
    fig.suptitle(f"Sequence generation on {result.dataset} (95% intervals)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
