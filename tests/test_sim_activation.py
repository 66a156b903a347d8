"""Activation: the Pareto fit, the shape of the drawn activity levels, and the per-round draw."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from recagent_gym.runs.config.simulation_section import SimulationConfig
from recagent_gym.session.activation import Activation, fit_pareto, pareto_cdf, pareto_levels


@pytest.mark.parametrize(("alpha", "x_min"), [(1.2, 1.0), (2.5, 3.0), (0.8, 20.0)])
def test_fit_recovers_known_alpha(alpha: float, x_min: float) -> None:
    samples = pareto_levels(20_000, alpha, x_min, np.random.default_rng(1))
    fitted_alpha, fitted_x_min = fit_pareto(samples)
    # The MLE's standard error is alpha / sqrt(n) (about 0.018 for alpha 2.5): 5 of them is a generous bound.
    assert abs(fitted_alpha - alpha) < 5 * alpha / np.sqrt(len(samples))
    assert x_min <= fitted_x_min < x_min * 1.01


def test_levels_follow_the_pareto_distribution() -> None:
    levels = pareto_levels(5_000, 1.5, 0.1, np.random.default_rng(2))
    assert levels.min() >= 0.1
    good = stats.kstest(levels, lambda x: pareto_cdf(x, 1.5, 0.1))
    wrong = stats.kstest(levels, lambda x: pareto_cdf(x, 3.0, 0.1))
    assert good.pvalue > 0.01
    assert good.statistic < 0.03
    assert wrong.statistic > 0.2


def test_fitted_activation_is_pareto_with_the_data_shape_and_rank_aligned() -> None:
    rng = np.random.default_rng(3)
    counts = np.floor(pareto_levels(400, 1.3, 20.0, rng))
    config = SimulationConfig(agents=400, activation="pareto", fit_activity=True, pareto_x_min=0.05)
    act = Activation.build(config, counts, np.random.default_rng(4))
    assert act.alpha == pytest.approx(fit_pareto(counts)[0])
    assert abs(act.alpha - 1.3) < 0.3
    assert act.levels is not None and act.levels.min() >= 0.05
    # The most active users of the data get the highest levels.
    assert stats.spearmanr(counts, act.levels).statistic > 0.99
    assert np.all(act.probabilities == np.minimum(1.0, act.levels))
    assert stats.kstest(act.levels, lambda x: pareto_cdf(x, act.alpha, 0.05)).pvalue > 0.01


def test_set_parameters_are_used_without_fit() -> None:
    config = SimulationConfig(agents=1000, activation="pareto", fit_activity=False, pareto_alpha=2.0, pareto_x_min=0.2)
    act = Activation.build(config, np.ones(1000), np.random.default_rng(5))
    assert act.alpha == 2.0 and act.x_min == 0.2
    assert stats.kstest(act.levels, lambda x: pareto_cdf(x, 2.0, 0.2)).pvalue > 0.01


def test_uniform_rate_and_threshold() -> None:
    config = SimulationConfig(agents=50, activation="uniform", active_prob=0.3, active_threshold=10)
    act = Activation.build(config, np.ones(50), np.random.default_rng(6))
    rng = np.random.default_rng(7)
    sizes = [len(act.draw(rng)) for _ in range(400)]
    assert max(sizes) <= 10
    uncapped = Activation.build(config.model_copy(update={"active_threshold": 1000}), np.ones(50), rng)
    mean = np.mean([len(uncapped.draw(rng)) for _ in range(400)])
    assert abs(mean - 15.0) < 1.0


def test_marginal_follows_interaction_shares() -> None:
    counts = np.array([1.0, 2.0, 3.0, 4.0, 90.0])
    config = SimulationConfig(agents=5, activation="marginal", active_prob=0.4)
    act = Activation.build(config, counts, np.random.default_rng(8))
    expected = np.minimum(1.0, 0.4 * 5 * counts / counts.sum())
    np.testing.assert_allclose(act.probabilities, expected)
    assert act.probabilities[-1] == 1.0 and act.probabilities[0] < act.probabilities[1]


def test_draw_is_seeded_and_forced_agents_are_active() -> None:
    config = SimulationConfig(agents=30, activation="uniform", active_prob=0.2, active_threshold=5)
    act = Activation.build(config, np.ones(30), np.random.default_rng(0))
    a = [act.draw(np.random.default_rng(9), force=(29,)).tolist() for _ in range(3)]
    assert a[0] == a[1] == a[2]
    assert 29 in a[0] and len(a[0]) <= 5
    restored = Activation.from_state(act.get_state())
    np.testing.assert_array_equal(restored.probabilities, act.probabilities)


def test_fit_rejects_degenerate_samples() -> None:
    with pytest.raises(ValueError, match="at least two samples"):
        fit_pareto(np.array([5.0, 5.0, 5.0]))
    with pytest.raises(ValueError, match="positive sample"):
        fit_pareto(np.array([0.0, -1.0]))


def test_one_agent_falls_back_to_the_configured_alpha() -> None:
    from recagent_gym.runs.config.simulation_section import SimulationConfig
    from recagent_gym.session.activation import Activation

    config = SimulationConfig(agents=1, activation="pareto", fit_activity=True, pareto_alpha=2.5)
    activation = Activation.build(config, np.array([17.0]), np.random.default_rng(0))
    assert activation.alpha == 2.5 and activation.probabilities.shape == (1,)
