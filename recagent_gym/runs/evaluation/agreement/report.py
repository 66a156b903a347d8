"""The agreement test's report: ``agreement.md`` (tables and a closing line read off the intervals),
``agreement.csv`` (one row per sampler, user model and recommender), ``rank_agreement.csv`` and ``agreement.png``
(real metric against simulated return, one panel per user model and sampler)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.runs.evaluation.agreement import headline
from recagent_gym.runs.evaluation.agreement.evaluate import AgreementRun
from recagent_gym.runs.evaluation.agreement.run import METRICS, REAL
from recagent_gym.runs.evaluation.agreement.stats import (
    ORACLE_ROWS,
    Agreement,
    DoseResponse,
    OracleBound,
    dose_response,
    oracle_bound,
    rank_agreement,
    split_half,
)
from recagent_gym.runs.evaluation.agreement.zoo import SWAPPED
from recagent_gym.runs.metrics import Estimate, summarize
from recagent_gym.runs.provenance import shown_path


def _est(values: np.ndarray, seed: int) -> Estimate:
    return summarize(values, np.random.default_rng(seed), bootstrap=1000)


def _cell(e: Estimate) -> str:
    if not math.isfinite(e.mean):
        return "–"
    return f"{e.mean:.3f} [{e.low:.3f}, {e.high:.3f}]" if math.isfinite(e.low) else f"{e.mean:.3f}"


class Report:
    """Statistics of an :class:`AgreementRun`, computed once."""

    def __init__(self, run: AgreementRun, *, n_boot: int = 1000) -> None:
        self.run = run
        metric = run.settings["real_metric"]
        self.simulated = [m for m in run.user_models if m != REAL]
        self.agreement: dict[tuple[str, str], Agreement] = {}
        self.dose: dict[tuple[str, str], DoseResponse] = {}
        self.split_half: dict[str, Agreement] = {}
        self.expected: dict[tuple[str, str], Agreement] = {}
        """Per sampler and user model that reports its watch probability: the ranking by its mean over the pages."""
        self.without_oracles: dict[tuple[str, str], Agreement] = {}
        """The rank agreement over the recommenders that read no real future (where the run has oracles and at least
        three others): how the users rank what a benchmark compares."""
        self.oracle: dict[tuple[str, str], OracleBound] = {}
        """Where each user model puts the future oracle and the tau that caps (where the real ranking puts it first)."""
        self.headline = headline.compute(run, n_boot=n_boot)
        history_rows = [r for r in run.recommenders if r not in ORACLE_ROWS]
        with_oracles = len(history_rows) < len(run.recommenders) and len(history_rows) >= 3
        for s, sampler in enumerate(run.samplers):
            real = {r: getattr(run.arm(sampler, REAL, r), metric) for r in run.recommenders}
            self.split_half[sampler] = split_half(real, n_splits=n_boot, seed=run.settings["seed"] + 101 * s)
            for m, model in enumerate(run.user_models):
                arms = [run.arm(sampler, model, r) for r in run.recommenders]
                seed = run.settings["seed"] + 101 * s + m
                self.dose[(sampler, model)] = dose_response(
                    np.vstack([a.dose for a in arms]), len(run.users), n_boot=n_boot, seed=seed
                )
                if model != REAL:
                    sim = {a.recommender: a.returns for a in arms}
                    self.agreement[(sampler, model)] = rank_agreement(real, sim, n_boot=n_boot, seed=seed)
                    if with_oracles:
                        self.without_oracles[(sampler, model)] = rank_agreement(
                            {r: real[r] for r in history_rows}, sim, n_boot=n_boot, seed=seed
                        )
                    bound = oracle_bound({r: float(np.mean(v)) for r, v in real.items()},
                                         {r: float(np.mean(v)) for r, v in sim.items()})  # fmt: skip
                    if bound is not None:
                        self.oracle[(sampler, model)] = bound
                    if all(a.expected_watch is not None for a in arms):
                        watch = {a.recommender: a.expected_watch for a in arms}
                        self.expected[(sampler, model)] = rank_agreement(real, watch, n_boot=n_boot, seed=seed)

    # ----------------------------------------------------------------------------------------------- markdown
    def markdown(self) -> str:
        run, st = self.run, self.run.settings
        k = st["page_size"]
        lines = [
            f"# Agreement on {run.dataset}: does each user model rank recommenders as real held-out behaviour does?",
            "",
            f"{len(run.users)} held-out users (distinct; none fitted on by any model). Temporal split: each user's "
            f"last {st['future']} items are its real future; every recommender and user model is fitted or built "
            f"on the history before them. Pools of {st['pool']} candidates hold the user's future items among "
            f"never-seen negatives; a session is {st['pages']} pages of {k}, one watch per page at most. Real side: "
            f"the real users replayed (they watch a future item when a page shows one) and the pages scored against "
            f"their future: hit@{k} per page averaged over the session (= their watches per page, the real "
            f"counterpart of a simulated return), NDCG@{k} per page, session NDCG (the session's pages as one list) "
            f"and recall (share of the future shown). The future oracle puts one future item on every page. "
            f"Simulated side: each user model's mean session return ({_sessions_text(st.get('sessions', 1))}), "
            f"same pools, same users{_full_text(st.get('full_sessions', False))}. Mean [95% bootstrap interval over "
            "users].",
            "",
            f"Ran with: LLM `{st['llm']}`, embedder `{st['embedder']}`, memory `{st['memory']}`, item features "
            f"`{st['item_features']}`, RecSim users `{st.get('recsim', 'hand-set')}`, Embedding users "
            f"`{st.get('embedding_users', 'hand-set')}`, seed {st['seed']}; the real "
            f"ranking is by `{st['real_metric']}`.",
            "",
        ]
        for note in run.notes:
            lines.append(f"Note: {note}.")
        if run.prior.get("weights"):
            how = "calibrated by this run on other users" if run.prior["calibrated_here"] else "given"
            for fit, values in run.prior["weights"].items():
                weights = ", ".join(f"{k} {v:+.3f}" for k, v in values.items())
                where = shown_path(run.prior["file"])
                lines += [f"LLM + prior weights ({how}; `{where}`, fit `{fit}`): {weights}.", ""]
        if run.prior.get("fit_file"):
            how = "fitted by this run on other users" if run.prior["fitted_here"] else "given"
            weights = ", ".join(f"{k} {v:+.3f}" for k, v in run.prior["fit_weights"].items())
            terms = run.prior.get("prior_terms")
            used = "without the prior (it did not raise agreement on the fit's validation users)"
            if run.prior["prior_used"]:
                used = f"with the prior terms {', '.join(terms)}" if terms else "with the behavioural prior"
            lines += [
                f"`llm+fit` users: the page decision fitted by `users fit-agreement` ({how}; "
                f"`{shown_path(run.prior['fit_file'])}`), {used}: {weights}.",
                "",
            ]
        for name, other in run.prior.get("other_fits", {}).items():
            weights = ", ".join(f"{k} {v:+.3f}" for k, v in other["weights"].items())
            where = shown_path(other["file"])
            lines += [f"`llm+fit:{name}` users: the fit `{where}` (made on {other['dataset']}), given: {weights}.", ""]
        lines += headline.markdown(run, self.headline)
        for sampler in run.samplers:
            lines += self._sampler_table(sampler)
        lines += self._agreement_table()
        lines += self._response_table()
        lines += self._personalisation_table()
        lines += ["", self.closing_line(), ""]
        return "\n".join(lines)

    def _sampler_table(self, sampler: str) -> list[str]:
        run, k = self.run, self.run.settings["page_size"]
        head = [f"real hit@{k}", f"real NDCG@{k}", "real session NDCG", "real recall",
                *[f"{m} return" for m in self.simulated]]  # fmt: skip
        lines = [f"## Negatives: {sampler}", "", "| recommender | " + " | ".join(head) + " |",
                 "|---|" + "---|" * len(head)]  # fmt: skip
        for i, rec in enumerate(run.recommenders):
            real = run.arm(sampler, REAL, rec)
            cells = [_cell(_est(getattr(real, m), i)) for m in ("hit", "ndcg", "session_ndcg", "recall")]
            cells += [_cell(_est(run.arm(sampler, m, rec).returns, i)) for m in self.simulated]
            lines.append(f"| {rec} | " + " | ".join(cells) + " |")
        return [*lines, ""]

    def _agreement_table(self) -> list[str]:
        run = self.run
        lines = ["## Rank agreement with the real ranking", "",
                 "Kendall tau-b and Spearman between the real ranking and each user model's ranking by mean return, "
                 f"over {len(run.recommenders)} recommenders (95% bootstrap intervals over users); dose-response: "
                 "least-squares slope of a page's reward on the real future items on it; seconds of the user "
                 "model's sessions per held-out user (all recommenders and samplers). `real, split halves`: how well "
                 "the real ranking reproduces on other users (tau and Spearman between the real means on two "
                 "disjoint random halves of the users: median and central 95% of 1,000 splits), a reference for the "
                 "user models' taus (each half has half the users, so a user model can exceed it). `<user model>, "
                 "expected watch per page`, where the model reports its watch probability (distilled and LLM users): "
                 "the same user model ranked by that probability averaged over the pages it was shown, a diagnostic "
                 "of its page preference without its watch draws (and, with leaving, without its session "
                 "lengths); the headline is the return's row. `tau without the oracles`: the same "
                 "over the recommenders that read no real future (the oracle and anti-oracle left out). `at or above "
                 "the future oracle`: the recommenders the user model ranks at or above the future oracle, which the "
                 "real ranking puts first; each is a discordant (or tied) pair, so they cap the model's tau at the "
                 "value in brackets (unless the real means tie): a user model that knows only the history can put "
                 "the oracle's pages first only by telling the user's real next item from a recommender's best "
                 "guesses better than that recommender does.", "",
                 "| negatives | user model | Kendall tau | Spearman | dose-response slope | "
                 "reward at dose 0 / 1 / 2+ | s per user | tau without the oracles | at or above the future oracle "
                 "(tau at most) |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for sampler in run.samplers:
            h = self.split_half[sampler]
            tau, rho = _interval(h.tau, h.tau_low, h.tau_high), _interval(h.rho, h.rho_low, h.rho_high)
            lines.append(
                f"| {sampler} | real, split halves ({h.n_users} + {h.n_users} users) | {tau} | {rho} | – | – | – | – "
                "| – |"
            )
            for model in self.simulated:
                a = self.agreement[(sampler, model)]
                d = self.dose[(sampler, model)]
                lines.append(
                    f"| {sampler} | {model} | {_interval(a.tau, a.tau_low, a.tau_high)} | "
                    f"{_interval(a.rho, a.rho_low, a.rho_high)} | {_interval(d.slope, d.low, d.high)} | "
                    f"{_by_dose(d)} | {run.seconds_per_user.get(model, math.nan):.2f} | "
                    f"{self._without_oracles_cell(sampler, model)} | {self._oracle_cell(sampler, model)} |"
                )
                e = self.expected.get((sampler, model))
                if e is not None:
                    lines.append(f"| {sampler} | {model}, expected watch per page | "
                                 f"{_interval(e.tau, e.tau_low, e.tau_high)} | "
                                 f"{_interval(e.rho, e.rho_low, e.rho_high)} | – | – | – | – | – |")  # fmt: skip
        return lines

    def _without_oracles_cell(self, sampler: str, model: str) -> str:
        a = self.without_oracles.get((sampler, model))
        return "–" if a is None else f"{_interval(a.tau, a.tau_low, a.tau_high)} ({a.n_recommenders})"

    def _oracle_cell(self, sampler: str, model: str) -> str:
        b = self.oracle.get((sampler, model))
        if b is None:
            return "–"
        at = [*b.above, *(f"{r} (tied)" for r in b.tied)]
        return f"{len(at)}: {', '.join(at) or 'none'} ({b.tau_max:.2f})"

    def _response_table(self) -> list[str]:
        """Per recommender, each user model's mean reward on pages without a real future item and on pages with one:
        the real users get nothing on the first and watch on every one of the second, on every recommender's pages,
        so a user model whose two columns are close, or whose first column grows with the recommender, ranks
        recommenders by something other than real items."""
        run = self.run
        lines = ["", "## Response to real items, per recommender", "",
                 "Mean reward per page on the recommender's pages without a real future item / with at least one "
                 "(pages in brackets); the replayed real users get nothing on the first and watch on every one of "
                 "the second (a watch's reward, 1 or more with the rating), on every recommender's pages.", "",
                 "| negatives | recommender | " + " | ".join(self.simulated) + " |",
                 "|---|---|" + "---|" * len(self.simulated)]  # fmt: skip
        for sampler in run.samplers:
            for rec in run.recommenders:
                cells = [_response(run.arm(sampler, m, rec).dose) for m in self.simulated]
                lines.append(f"| {sampler} | {rec} | " + " | ".join(cells) + " |")
        return lines

    def _personalisation_table(self) -> list[str]:
        """Per recommender run on another user's encoding (``evaluation.agreement_swapped``): what the real users
        and each user model lose, paired over users."""
        run = self.run
        metric = run.settings["real_metric"]
        pairs = [(r[: -len(SWAPPED)], r) for r in run.recommenders if r.endswith(SWAPPED)]
        if not pairs:
            return []
        head = [f"real {metric}", *self.simulated]
        lines = ["", "## Personalisation: what reading another user's history costs", "",
                 f"Each row's recommender played the same sessions reading another held-out user's encoding (a fixed "
                 f"derangement); the drop is own minus swapped, paired over users: real {metric} for the real users, "
                 "the mean return for each user model. A user model that rewards personalisation as people do loses "
                 "where they lose.", "", "| negatives | recommender | " + " | ".join(head) + " |",
                 "|---|---|" + "---|" * len(head)]  # fmt: skip
        for s, sampler in enumerate(run.samplers):
            for i, (own, other) in enumerate(pairs):
                seed = run.settings["seed"] + 31 * s + i
                real = getattr(run.arm(sampler, REAL, own), metric) - getattr(run.arm(sampler, REAL, other), metric)
                cells = [_cell(_est(real, seed))]
                cells += [_cell(_est(run.arm(sampler, m, own).returns - run.arm(sampler, m, other).returns, seed))
                          for m in self.simulated]  # fmt: skip
                lines.append(f"| {sampler} | {own} | " + " | ".join(cells) + " |")
        return lines

    def closing_line(self) -> str:
        run = self.run
        metric = run.settings["real_metric"]
        parts = []
        for sampler in run.samplers:
            means = {r: float(np.mean(getattr(run.arm(sampler, REAL, r), metric))) for r in run.recommenders}
            order = sorted(means, key=lambda r: -means[r])
            sanity = []
            if "oracle" in means:
                first = order[0]
                sanity.append("the future oracle first" if first == "oracle" else f"{first} first (not the oracle)")
            if "random" in means:
                sanity.append(f"random {order.index('random') + 1} of {len(order)}")
            best = [m for m in self.simulated if self.agreement[(sampler, m)].tau_low >= 0.8]
            taus = ", ".join(f"{m} {self.agreement[(sampler, m)].tau:.2f}" for m in self.simulated)
            clears = f"interval above 0.8 for {', '.join(best)}" if best else "no user model's tau interval clears 0.8"
            half = self.split_half[sampler]
            parts.append(f"With {sampler} negatives the real ranking puts {' and '.join(sanity)}; Kendall tau with "
                         f"it: {taus}; {clears} (the real ranking on two halves of the users: {half.tau:.2f} "
                         f"[{half.tau_low:.2f}, {half.tau_high:.2f}])")  # fmt: skip
        return "What this shows: " + ". ".join(parts) + "."

    # ---------------------------------------------------------------------------------------------------- files
    def write(self, out: str | Path) -> dict[str, Path]:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"markdown": out / "agreement.md", "csv": out / "agreement.csv",
                 "rank_csv": out / "rank_agreement.csv", "plot": out / "agreement.png",
                 "headline_csv": out / "headline.csv"}  # fmt: skip
        paths["markdown"].write_text(self.markdown(), encoding="utf-8")
        self._write_arms(paths["csv"])
        self._write_ranks(paths["rank_csv"])
        _csv(paths["headline_csv"], headline.csv_rows(self.headline))
        self._plot(paths["plot"])
        return paths

    def _write_arms(self, path: Path) -> None:
        rows = []
        for i, a in enumerate(self.run.arms):
            row: dict[str, Any] = {"dataset": self.run.dataset, "sampler": a.sampler, "user_model": a.user_model,
                                   "recommender": a.recommender, "users": len(a.returns)}  # fmt: skip
            for name in METRICS:
                e = _est(getattr(a, name), i)
                key = "return" if name == "returns" else name
                row.update({key: e.mean, f"{key}_ci_low": e.low, f"{key}_ci_high": e.high})
            (r0, n0), (r1, n1) = _dose_means(a.dose)
            row.update(reward_no_real=r0, reward_with_real=r1, pages_no_real=n0, pages_with_real=n1)
            expected = math.nan if a.expected_watch is None else float(np.mean(a.expected_watch))
            row.update(watches=a.watches, pages=a.pages, expected_watch=expected, fallbacks=a.fallbacks,
                       seconds=round(a.seconds, 2))  # fmt: skip
            rows.append(row)
        _csv(path, rows)

    def _write_ranks(self, path: Path) -> None:
        run = self.run
        rows = [{**self._rank_row(sampler, model, a, self.dose[(sampler, model)], run.seconds_per_user.get(model)),
                 **self._oracle_fields(sampler, model)} for (sampler, model), a in self.agreement.items()]  # fmt: skip
        rows += [self._rank_row(sampler, f"{model}, expected watch per page", e)
                 for (sampler, model), e in self.expected.items()]  # fmt: skip
        rows += [self._rank_row(sampler, "real, split halves", h) for sampler, h in self.split_half.items()]
        _csv(path, rows)

    def _oracle_fields(self, sampler: str, model: str) -> dict[str, Any]:
        a, b = self.without_oracles.get((sampler, model)), self.oracle.get((sampler, model))
        return {"tau_without_oracles": math.nan if a is None else a.tau,
                "tau_without_oracles_ci_low": math.nan if a is None else a.tau_low,
                "tau_without_oracles_ci_high": math.nan if a is None else a.tau_high,
                "above_oracle": "" if b is None else " ".join(b.above),
                "tied_with_oracle": "" if b is None else " ".join(b.tied),
                "tau_max_given_oracle": math.nan if b is None else b.tau_max}  # fmt: skip

    def _rank_row(
        self, sampler: str, model: str, a: Agreement, d: DoseResponse | None = None, seconds: float | None = None
    ) -> dict[str, Any]:
        nan = math.nan
        return {"dataset": self.run.dataset, "sampler": sampler, "user_model": model, "kendall_tau": a.tau,
                "tau_ci_low": a.tau_low, "tau_ci_high": a.tau_high, "spearman": a.rho, "rho_ci_low": a.rho_low,
                "rho_ci_high": a.rho_high, "recommenders": a.n_recommenders, "users": a.n_users,
                "dose_slope": nan if d is None else d.slope, "dose_ci_low": nan if d is None else d.low,
                "dose_ci_high": nan if d is None else d.high,
                "seconds_per_user": nan if seconds is None else seconds}  # fmt: skip

    def _plot(self, path: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        run, metric = self.run, self.run.settings["real_metric"]
        n_rows, n_cols = len(run.samplers), max(len(self.simulated), 1)
        fig, axes = plt.subplots(n_rows, n_cols, figsize=(3.6 * n_cols, 3.2 * n_rows), squeeze=False)
        for r, sampler in enumerate(run.samplers):
            for c, model in enumerate(self.simulated):
                ax = axes[r][c]
                for i, rec in enumerate(run.recommenders):
                    x = _est(getattr(run.arm(sampler, REAL, rec), metric), i)
                    y = _est(run.arm(sampler, model, rec).returns, i)
                    ax.errorbar(x.mean, y.mean, xerr=[[x.mean - x.low], [x.high - x.mean]],
                                yerr=[[y.mean - y.low], [y.high - y.mean]], fmt="o", ms=4, capsize=2)  # fmt: skip
                    ax.annotate(rec, (x.mean, y.mean), fontsize=7, xytext=(3, 3), textcoords="offset points")
                a = self.agreement[(sampler, model)]
                ax.set_title(f"{model} ({sampler})\ntau {a.tau:.2f} [{a.tau_low:.2f}, {a.tau_high:.2f}]", fontsize=9)
                ax.set_xlabel(f"real {metric}", fontsize=8)
                ax.set_ylabel("simulated return", fontsize=8)
                ax.tick_params(labelsize=7)
        fig.suptitle(f"Agreement on {run.dataset}: {len(run.users)} held-out users, 95% intervals", fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)


def _dose_means(dose: np.ndarray) -> tuple[tuple[float, int], tuple[float, int]]:
    """``((mean reward, pages) without a real item, (mean reward, pages) with one or more)`` of an arm's dose rows."""
    rows = np.asarray(dose, dtype=np.float64).reshape(-1, 3)
    out = []
    for keep in (rows[:, 1] == 0, rows[:, 1] > 0):
        out.append((float(rows[keep, 2].mean()) if keep.any() else math.nan, int(keep.sum())))
    return out[0], out[1]


def _response(dose: np.ndarray) -> str:
    (r0, n0), (r1, n1) = _dose_means(dose)

    def cell(r: float, n: int) -> str:
        return f"{r:.2f} ({n})" if n else "– (0)"

    return f"{cell(r0, n0)} / {cell(r1, n1)}"


def _interval(mid: float, low: float, high: float) -> str:
    return f"{mid:.3f} [{low:.3f}, {high:.3f}]" if math.isfinite(mid) else "–"


def _by_dose(d: DoseResponse) -> str:
    def mean_at(doses: list[int]) -> str:
        pairs = [d.by_dose[x] for x in doses if x in d.by_dose]
        n = sum(p[1] for p in pairs)
        return f"{sum(p[0] * p[1] for p in pairs) / n:.2f}" if n else "–"

    high = [x for x in d.by_dose if x >= 2]
    return f"{mean_at([0])} / {mean_at([1])} / {mean_at(high)}"


def _csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        if not rows:
            return
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(k for row in rows for k in row)))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()})


def _full_text(full: bool) -> str:
    if full:
        return "; every session shows all its pages, as to the real users (`evaluation.agreement_full_sessions`)"
    return "; a session ends when the user leaves, and the reward per page is over the pages shown"


def _sessions_text(sessions: int) -> str:
    if sessions == 1:
        return "one session per user and recommender"
    return (
        f"the mean of {sessions} sessions per user and recommender, the first from the same seeded state for "
        "every recommender; hit, NDCG and the dose count every session's pages, session NDCG and recall the "
        "first's"
    )
