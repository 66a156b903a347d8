"""The discrimination test's results: one cell per model, sampler and setting, and the tables that show them
(hit rates with intervals, the personalisation drop, the paired differences with the reference rows)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recagent_gym.runs.evaluation.prior_ablation import LABELS as PRIOR_LABELS
from recagent_gym.runs.evaluation.prior_ablation import PRIOR_KINDS, prior_lines
from recagent_gym.runs.evaluation.subjects import child_rng
from recagent_gym.runs.metrics import Estimate, paired_difference

PAPER_ROWS: dict[str, dict[tuple[int, int], float]] = {
    "Embedding (paper)": {(1, 5): 0.250, (3, 3): 0.550, (3, 7): 0.450, (1, 9): 0.300},
    "RecSim (paper)": {(1, 5): 0.250, (3, 3): 0.533, (3, 7): 0.367, (1, 9): 0.100},
    "RecAgent (paper)": {(1, 5): 0.550, (3, 3): 0.783, (3, 7): 0.683, (1, 9): 0.500},
    "Real Human (paper)": {(1, 5): 0.600, (3, 3): 0.806, (3, 7): 0.722, (1, 9): 0.583},
}
"""RecAgent paper, Table 3 (MovieLens-1M, 20 users)."""

RANDOM = "random"
POPULARITY = "popularity"
REFERENCES: tuple[str, ...] = ("embedding", POPULARITY)
"""Rows every other model is compared with, paired over users (when the row was run)."""
MODEL_LABELS = {RANDOM: "Random (expectation)", POPULARITY: "Popularity", "embedding": "Embedding",
                "recsim": "RecSim", "llm": "LLM agent", "distilled": "Distilled", **PRIOR_LABELS}  # fmt: skip


def references_of(model: str) -> tuple[str, ...]:
    """The rows ``model`` is compared with: Embedding and Popularity, and the LLM alone for the prior's rows."""
    return (*REFERENCES, "llm") if model in PRIOR_KINDS else REFERENCES


@dataclass
class Cell:
    """One model under one sampler and setting."""

    model: str
    sampler: str
    a: int
    b: int
    hit_rate: Estimate
    per_user: list[float]
    swapped: Estimate | None = None
    drop: Estimate | None = None
    seconds: float = 0.0
    versus: dict[str, Estimate] = field(default_factory=dict)
    """Paired difference ``p - p_reference`` per reference row key (see :data:`REFERENCES`)."""


@dataclass
class DiscriminationResult:
    dataset: str
    users: list[int]
    settings: list[tuple[int, int]]
    samplers: list[str]
    models: list[str]
    """Row keys in table order (``random``, ``popularity``, then the user models)."""
    labels: dict[str, str]
    cells: list[Cell]
    donors: dict[int, int] = field(default_factory=dict)
    widened: dict[str, int] = field(default_factory=dict)
    """Popularity-matched negatives drawn outside their positive's band, per setting label."""
    build_seconds: dict[str, float] = field(default_factory=dict)
    """Time spent building each model (original and swapped training sets)."""
    usage: str = ""
    """The LLM usage line (calls, tokens, latency), when an LLM was used."""
    seconds: float = 0.0
    prior: dict[str, Any] = field(default_factory=dict)
    """The behavioural prior's weights file content when a prior row ran (written as ``prior.json``)."""
    left_out: int = 0
    """Sampled users left out because the prior was calibrated on them or the distilled users were fitted on them."""
    left_out_why: str = "the behavioural prior was calibrated on them"

    def cell(self, model: str, sampler: str, a: int, b: int) -> Cell:
        for cell in self.cells:
            if (cell.model, cell.sampler, cell.a, cell.b) == (model, sampler, a, b):
                return cell
        raise KeyError((model, sampler, a, b))

    def rows(self) -> list[dict[str, Any]]:
        """One CSV row per cell, plus the paper's rows."""
        out: list[dict[str, Any]] = []
        for c in self.cells:
            row: dict[str, Any] = {
                "dataset": self.dataset, "sampler": c.sampler, "model": self.labels[c.model],
                "setting": f"({c.a},{c.b})", "a": c.a, "b": c.b, "users": c.hit_rate.n, "p": c.hit_rate.mean,
                "stderr": c.hit_rate.stderr, "ci_low": c.hit_rate.low, "ci_high": c.hit_rate.high,
                "seconds": round(c.seconds, 2),
            }  # fmt: skip
            if c.swapped is not None and c.drop is not None:
                row.update(p_swapped=c.swapped.mean, drop=c.drop.mean, drop_stderr=c.drop.stderr,
                           drop_ci_low=c.drop.low, drop_ci_high=c.drop.high)  # fmt: skip
            for ref, diff in c.versus.items():
                row.update({f"diff_vs_{ref}": diff.mean, f"diff_vs_{ref}_stderr": diff.stderr,
                            f"diff_vs_{ref}_ci_low": diff.low, f"diff_vs_{ref}_ci_high": diff.high})  # fmt: skip
            out.append(row)
        for name, values in PAPER_ROWS.items():
            for (a, b), p in values.items():
                if (a, b) in self.settings:
                    out.append({"dataset": "ml-1m (paper)", "sampler": "uniform", "model": name,
                                "setting": f"({a},{b})", "a": a, "b": b, "users": 20, "p": p})  # fmt: skip
        return out

    def markdown(self) -> str:
        heads = [f"({a},{b})" for a, b in self.settings]
        lines = [f"# Discrimination (a, b) on {self.dataset}", "",
                 f"{len(self.users)} users; p = mean over users of |T ∩ S| / |T|, shown as mean ± standard error "
                 "[bootstrap 95% interval]." + (f" {self.left_out} sampled users left out: {self.left_out_why}."
                                             if self.left_out else ""), ""]  # fmt: skip
        for sampler in self.samplers:
            lines += [f"## Negatives: {sampler}", "", "| model | " + " | ".join(heads) + " |",
                      "|---|" + "---|" * len(heads)]  # fmt: skip
            for model in self.models:
                values = [self.cell(model, sampler, a, b).hit_rate.format() for a, b in self.settings]
                lines.append(f"| {self.labels[model]} | " + " | ".join(values) + " |")
            if sampler == "uniform":
                for name, paper in PAPER_ROWS.items():
                    values = [f"{paper[s]:.3f}" if s in paper else "–" for s in self.settings]
                    lines.append(f"| {name} | " + " | ".join(values) + " |")
            if sampler == "popularity-matched" and self.widened:
                total = sum(self.widened.values())
                lines += ["", f"Negatives drawn outside their positive's popularity band: {total}."]
            lines.append("")
        lines += self._versus_lines(heads)
        if any(c.drop is not None for c in self.cells):
            lines += [
                "## Personalization check",
                "",
                "Each user's history and profile replaced by another random user's; p → p swapped "
                "(drop ± standard error, paired over users). No drop: the model does not use the user.",
                "",
            ]
            for sampler in self.samplers:
                lines += [f"### Negatives: {sampler}", "", "| model | " + " | ".join(heads) + " |",
                          "|---|" + "---|" * len(heads)]  # fmt: skip
                for model in self.models:
                    cells = [self.cell(model, sampler, a, b) for a, b in self.settings]
                    if all(c.drop is None for c in cells):
                        continue
                    lines.append(f"| {self.labels[model]} | " + " | ".join(_drop_text(c) for c in cells) + " |")
                lines.append("")
        lines += prior_lines(self.prior)
        builds = ", ".join(f"{self.labels[k]} {v:.1f} s" for k, v in self.build_seconds.items())
        lines.append(f"Wall time: {self.seconds:.1f} s (model builds: {builds}).")
        if self.usage:
            lines += ["", self.usage]
        return "\n".join(lines) + "\n"

    def _versus_lines(self, heads: list[str]) -> list[str]:
        refs = [r for r in (*REFERENCES, "llm") if r in self.models]
        if not refs:
            return []
        lines = ["## Paired differences", "",
                 "Each model's p minus the reference row's, paired over the same users and candidates: mean "
                 "[bootstrap interval over users]; * marks an interval excluding 0.", ""]  # fmt: skip
        for sampler in self.samplers:
            lines += [f"### Negatives: {sampler}", "", "| model | vs | " + " | ".join(heads) + " |",
                      "|---|---|" + "---|" * len(heads)]  # fmt: skip
            for model in self.models:
                for ref in refs:
                    cells = [self.cell(model, sampler, a, b) for a, b in self.settings]
                    if any(ref not in c.versus for c in cells):
                        continue
                    texts = [_diff_text(c.versus[ref]) for c in cells]
                    lines.append(f"| {self.labels[model]} | {self.labels[ref]} | " + " | ".join(texts) + " |")
            lines.append("")
        return lines


def _diff_text(diff: Estimate) -> str:
    star = "*" if diff.low > 0 or diff.high < 0 else ""
    return f"{diff.mean:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]{star}"


def add_paired_differences(cells: list[Cell], *, seed: int, bootstrap: int, confidence: float) -> None:
    """Fill ``Cell.versus``: each non-random model against each reference row of the same sampler and setting."""
    by_key = {(c.model, c.sampler, c.a, c.b): c for c in cells}
    for cell in cells:
        if cell.model == RANDOM:
            continue
        for ref in references_of(cell.model):
            other = by_key.get((ref, cell.sampler, cell.a, cell.b))
            if other is None or (cell.model in REFERENCES and REFERENCES.index(ref) <= REFERENCES.index(cell.model)):
                continue  # itself, or the mirror of a reference pair already shown (Embedding vs Popularity)
            rng = child_rng(seed, "bootstrap-versus", ref, cell.model, cell.sampler, cell.a, cell.b)
            cell.versus[ref] = paired_difference(cell.per_user, other.per_user, rng, bootstrap=bootstrap,
                                                 confidence=confidence)  # fmt: skip


def _drop_text(cell: Cell) -> str:
    if cell.swapped is None or cell.drop is None:
        return "–"
    return f"{cell.hit_rate.mean:.3f} → {cell.swapped.mean:.3f} ({cell.drop.mean:+.3f} ± {cell.drop.stderr:.3f})"
