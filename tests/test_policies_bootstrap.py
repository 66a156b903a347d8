"""One bootstrap for every interval: :func:`recagent_gym.runs.metrics.bootstrap_replicates`.

Each former resampling loop is written out here as it was, and the helper must give its figures at the same seed (the
same draws; the quantile level ``(1 - 0.95) / 2`` differs from the literal 0.025 in the 17th digit, hence ``isclose``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from recagent_gym.runs.metrics import bootstrap_replicates, percentile_interval, summarize
from recagent_gym.runs.policies.protocol import bootstrap_mean, bootstrap_ratio

RUNS = Path(__file__).resolve().parents[1] / "recagent_gym" / "runs"


def _close(a: tuple[float, ...], b: tuple[float, ...]) -> None:
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=1e-12, atol=1e-14)


def test_policies_bootstrap_is_the_evaluation_summarize():
    values = np.random.default_rng(3).normal(size=40)
    interval = bootstrap_mean(values, n_boot=500, seed=7)
    estimate = summarize(values, np.random.default_rng(7), bootstrap=500)
    assert (interval.mean, interval.low, interval.high, interval.n) == (
        estimate.mean,
        estimate.low,
        estimate.high,
        estimate.n,
    )


def test_row_by_row_and_batched_replicates_are_the_same_draws():
    x = np.random.default_rng(0).normal(size=13)
    rows = bootstrap_replicates(lambda idx: x[idx].mean(), 13, np.random.default_rng(5), n_boot=200)
    batched = bootstrap_replicates(
        lambda idx: x[idx].mean(axis=1), 13, np.random.default_rng(5), n_boot=200, batched=True
    )
    np.testing.assert_array_equal(rows, batched)
    pairs = bootstrap_replicates(lambda idx: (x[idx].min(), x[idx].max()), 13, np.random.default_rng(5), n_boot=7)
    assert pairs.shape == (7, 2) and (pairs[:, 0] <= pairs[:, 1]).all()
    assert bootstrap_replicates(lambda idx: 0.0, 0, np.random.default_rng(5)).shape == (0,)


def test_percentile_interval_drops_non_finite_replicates():
    assert percentile_interval(np.array([np.nan, np.inf, 1.0, 3.0]), 0.5) == (1.5, 2.5)
    assert all(np.isnan(percentile_interval(np.array([np.nan]))))


def test_summarize_gives_the_former_loop_figures():
    x = np.random.default_rng(1).normal(size=25)
    old = x[np.random.default_rng(9).integers(0, 25, size=(1000, 25))].mean(axis=1)
    estimate = summarize(x, np.random.default_rng(9), bootstrap=1000)
    _close((estimate.low, estimate.high), tuple(np.quantile(old, [0.025, 0.975])))


def test_rank_agreement_gives_the_former_loop_figures():
    from scipy.stats import kendalltau, spearmanr

    from recagent_gym.runs.evaluation.agreement.stats import rank_agreement

    gen = np.random.default_rng(2)
    real = {f"r{k}": gen.normal(k * 0.1, 1.0, size=30) for k in range(5)}
    sim = {f"r{k}": gen.normal(k * 0.05, 1.0, size=30) for k in range(5)}
    real_m, sim_m = np.vstack(list(real.values())), np.vstack(list(sim.values()))
    rng, taus, rhos = np.random.default_rng(4), [], []
    for _ in range(300):
        idx = rng.integers(0, 30, size=30)
        a, b = real_m[:, idx].mean(axis=1), sim_m[:, idx].mean(axis=1)
        taus.append(kendalltau(a, b).statistic)
        rhos.append(spearmanr(a, b).statistic)
    got = rank_agreement(real, sim, n_boot=300, seed=4)
    _close((got.tau_low, got.tau_high), tuple(np.quantile(taus, [0.025, 0.975])))
    _close((got.rho_low, got.rho_high), tuple(np.quantile(rhos, [0.025, 0.975])))


def test_dose_response_gives_the_former_loop_figures():
    from recagent_gym.runs.evaluation.agreement.stats import _slope, dose_response

    gen = np.random.default_rng(3)
    users = gen.integers(0, 8, size=120)
    dose = gen.integers(0, 3, size=120)
    rows = np.column_stack([users, dose, dose * 0.3 + gen.normal(size=120)])
    by_user = [np.flatnonzero(users == u) for u in range(8)]
    rng, boots = np.random.default_rng(6), []
    for _ in range(400):
        pick = np.concatenate([by_user[u] for u in rng.integers(0, 8, size=8)])
        boots.append(_slope(rows[pick, 1], rows[pick, 2]))
    kept = np.asarray(boots)[np.isfinite(boots)]
    got = dose_response(rows, 8, n_boot=400, seed=6)
    _close((got.low, got.high), tuple(np.quantile(kept, [0.025, 0.975])))


def test_bootstrap_ratio_gives_the_former_loop_figures():
    gen = np.random.default_rng(4)
    num, den = gen.random(20), gen.random(20) + 0.1
    idx = np.random.default_rng(8).integers(0, 20, size=(500, 20))
    ratios = num[idx].mean(axis=1) / den[idx].mean(axis=1)
    got = bootstrap_ratio(num, den, n_boot=500, seed=8)
    _close((got.low, got.high), tuple(np.nanquantile(ratios, [0.025, 0.975])))


def test_fidelity_intervals_give_the_former_loop_figures():
    from recagent_gym.runs.distill.fidelity import _bootstrap
    from recagent_gym.runs.distill.real_fidelity import _per_user_interval

    gen = np.random.default_rng(5)
    users, values = gen.integers(0, 9, size=60), gen.random(60)
    frame = pd.DataFrame({"user": users, "v": values}).groupby("user")["v"].mean().to_numpy()
    means = frame[np.random.default_rng(2).integers(0, len(frame), size=(300, len(frame)))].mean(axis=1)
    _close(
        _per_user_interval(users, values, 300, 2), (frame.mean(), np.percentile(means, 2.5), np.percentile(means, 97.5))
    )

    returns = pd.DataFrame({"user_id": users, "return": values})
    per_user = returns.groupby("user_id")["return"].agg(["sum", "count"])
    sums, counts = per_user["sum"].to_numpy(), per_user["count"].to_numpy()
    draws = np.random.default_rng(3).integers(0, len(sums), size=(300, len(sums)))
    means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    expected = (sums.sum() / counts.sum(), np.percentile(means, 2.5), np.percentile(means, 97.5))
    _close(_bootstrap(returns, 300, 3), expected)


def test_no_other_resampling_loop_in_the_runs():
    offenders = [
        str(path.relative_to(RUNS))
        for path in sorted(RUNS.rglob("*.py"))
        if path != RUNS / "metrics.py" and re.search(r"integers\(0, [^)]*size=", path.read_text())
    ]
    assert not offenders, f"resample users with runs.metrics.bootstrap_replicates, not a loop of its own: {offenders}"
