"""Preference discrimination 1:m (Agent4Rec's protocol) on the discrimination machinery.

Each sampled user's last ``a`` items by time (``evaluation.preference_positives``) are mixed with ``m * a`` items the
user never interacted with, for each ratio ``m`` in ``evaluation.preference_ratios`` (Agent4Rec's 1, 2, 3, 9); the
user model says "yes" to its top-``a`` candidates and "no" to the rest. This is exactly the discrimination test at
``(a, m * a)`` (:func:`~recagent_gym.runs.evaluation.discrimination.run_discrimination`:
same users, negatives, uniform and
popularity-matched samplers, Popularity row, personalization check, paired differences), read as a binary
classification of every candidate:

- precision = recall = F1 = the hit rate ``p`` (``a`` predicted positives against ``a`` true ones), and
- accuracy = ``1 - 2 a (1 - p) / (a + b)`` (each missed positive is also one false positive).

Both are affine in ``p`` per user, so every mean, standard error and interval is the hit rate's, rescaled.

Difference from Agent4Rec: there the agent decides yes/no freely, here it is told how many to pick (the models give
scores, not decisions), so precision and recall cannot trade off; the anchors below are **as reported by those
papers**, measured with their own agents, data samples and decision rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recagent_gym.runs.evaluation.discrimination import run_discrimination
from recagent_gym.runs.evaluation.discrimination_table import DiscriminationResult
from recagent_gym.runs.evaluation.subjects import Resources
from recagent_gym.runs.metrics import Estimate

ANCHORS: dict[str, dict[int, float]] = {
    "Agent4Rec": {1: 0.69},
    "SimUSER": {1: 0.79},
    "AlignUSER": {1: 0.83},
}
"""Accuracy at 1:m as reported by those papers (MovieLens samples of their own); not measured here."""


def accuracy_map(a: int, b: int) -> tuple[float, float]:
    """``(offset, slope)`` with accuracy = offset + slope * p for ``a`` positives among ``a + b`` candidates."""
    slope = 2.0 * a / (a + b)
    return 1.0 - slope, slope


def rescale(estimate: Estimate, offset: float, slope: float) -> Estimate:
    """``offset + slope * X`` of an estimate of ``X`` (``slope > 0``): mean, interval ends and error rescaled."""
    return Estimate(offset + slope * estimate.mean, slope * estimate.stderr, offset + slope * estimate.low,
                    offset + slope * estimate.high, estimate.n)  # fmt: skip


@dataclass
class PreferenceResult:
    """The discrimination result at ``(a, m * a)`` and its reading as accuracy / precision / recall / F1."""

    base: DiscriminationResult
    positives: int
    ratios: list[int]

    @property
    def dataset(self) -> str:
        return self.base.dataset

    def accuracy(self, model: str, sampler: str, m: int) -> Estimate:
        a, b = self.positives, m * self.positives
        return rescale(self.base.cell(model, sampler, a, b).hit_rate, *accuracy_map(a, b))

    def f1(self, model: str, sampler: str, m: int) -> Estimate:
        """Precision, recall and F1 (all equal to the hit rate under the top-``a`` decision)."""
        return self.base.cell(model, sampler, self.positives, m * self.positives).hit_rate

    def rows(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        a = self.positives
        for row in self.base.rows():
            if "(paper)" in str(row["model"]):
                continue
            m = int(row["b"]) // a
            offset, slope = accuracy_map(a, int(row["b"]))
            acc = {"accuracy": offset + slope * row["p"], "accuracy_stderr": slope * row.get("stderr", 0.0),
                   "accuracy_ci_low": offset + slope * row.get("ci_low", row["p"]),
                   "accuracy_ci_high": offset + slope * row.get("ci_high", row["p"])}  # fmt: skip
            for key in [k for k in row if k.startswith("diff_vs_") or k.startswith("drop")]:
                acc[f"accuracy_{key}"] = slope * row[key]  # differences rescale without the offset
            out.append({"ratio": f"1:{m}", **row, "precision": row["p"], "recall": row["p"], "f1": row["p"], **acc})
        for name, values in ANCHORS.items():
            for m, value in values.items():
                out.append({"ratio": f"1:{m}", "dataset": "as reported by the paper", "model": name,
                            "accuracy": value})  # fmt: skip
        return out

    def markdown(self) -> str:
        base, a = self.base, self.positives
        heads = [f"1:{m}" for m in self.ratios]
        lines = [
            f"# Preference discrimination 1:m (Agent4Rec protocol) on {base.dataset}",
            "",
            f"{len(base.users)} users; each user's last {a} items mixed with m·{a} never-interacted items; the "
            f"model says yes to its top {a}. Mean ± standard error [bootstrap 95% interval] over users.",
            "",
        ]
        for sampler in base.samplers:
            lines += [f"## Negatives: {sampler}", "", "### Accuracy", "", "| model | " + " | ".join(heads) + " |",
                      "|---|" + "---|" * len(heads)]  # fmt: skip
            for model in base.models:
                values = [self.accuracy(model, sampler, m).format() for m in self.ratios]
                lines.append(f"| {base.labels[model]} | " + " | ".join(values) + " |")
            if sampler == "uniform":
                for name, anchor in ANCHORS.items():
                    values = [f"{anchor[m]:.2f}" if m in anchor else "–" for m in self.ratios]
                    lines.append(f"| {name} (as reported by that paper) | " + " | ".join(values) + " |")
            lines += ["", "### Precision = recall = F1", "", "| model | " + " | ".join(heads) + " |",
                      "|---|" + "---|" * len(heads)]  # fmt: skip
            for model in base.models:
                values = [self.f1(model, sampler, m).format() for m in self.ratios]
                lines.append(f"| {base.labels[model]} | " + " | ".join(values) + " |")
            lines.append("")
        lines += ["Anchors are as reported by those papers (their own agents, samples and a free yes/no decision), "
                  "not measured here.", "",
                  f"The hit-rate tables below (setting (a, b) = ({a}, m·{a})) carry the paired differences and the "
                  "personalization check; accuracy differences are those times 2a / (a + b).", ""]  # fmt: skip
        lines.append(base.markdown().replace("# Discrimination (a, b)", "# Hit rate (a, b)", 1))
        return "\n".join(lines)

    def plot(self, path: Any) -> None:
        from recagent_gym.runs.evaluation.report import plot_discrimination

        plot_discrimination(self.base, path)


def run_preference(resources: Resources, *, progress: bool = True) -> PreferenceResult:
    """Run the 1:m preference test for ``resources.eval.user_models`` (see the module docstring)."""
    cfg = resources.eval
    a = cfg.preference_positives
    settings = [(a, m * a) for m in cfg.preference_ratios]
    base = run_discrimination(resources, progress=progress, settings=settings, desc="preference 1:m")
    return PreferenceResult(base=base, positives=a, ratios=list(cfg.preference_ratios))
