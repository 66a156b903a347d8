"""The policies package has one bootstrap: the evaluation's (its import cycles are checked in test_layout.py)."""

from __future__ import annotations

import numpy as np

from recagent_gym.runs.metrics import summarize
from recagent_gym.runs.policies.protocol import bootstrap_mean


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
