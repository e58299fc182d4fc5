"""Group-size planner: q(G, p) by hand, the graded U-statistic against enumeration, the cost model, the plan."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from catalog.io.errors import InputError
from remark.planning.group_size import (
    expected_signal_prob,
    fit_beta_prior,
    fit_cost_model,
    fit_line,
    plan_group_size,
    signal_prob,
    signal_prob_samples,
)


def test_signal_prob_by_hand():
    # q(2, 0.5) = 1 - 0.25 - 0.25 = 0.5;  q(4, 0.1) = 1 - 1e-4 - 0.9^4 = 1 - 0.0001 - 0.6561 = 0.3438;
    # p = 0 or 1: every group is all-equal, q = 0.
    q = signal_prob([2, 4], [0.5, 0.1, 0.0, 1.0])
    assert q.shape == (2, 4)
    np.testing.assert_allclose(q[0], [0.5, 0.18, 0.0, 0.0], atol=1e-12)  # q(2, 0.1) = 1 - 0.01 - 0.81
    np.testing.assert_allclose(q[1], [0.875, 0.3438, 0.0, 0.0], atol=1e-12)


def test_signal_prob_rises_with_g():
    q = signal_prob(np.arange(2, 65), [0.05, 0.3, 0.9])
    assert np.all(np.diff(q, axis=0) > 0)


@pytest.mark.parametrize("bad", [0, -4, 1, 2.5])
def test_group_size_must_be_an_integer_of_at_least_two(bad):
    with pytest.raises(InputError, match="G"):
        signal_prob([bad], [0.5])


def test_graded_signal_prob_by_hand():
    # Rewards [0, 0, 1, 1]: G = 2 -> all-equal pairs C(2,2) + C(2,2) = 2 of C(4,2) = 6, q = 2/3;
    # G = 3 -> no triple is all-equal, q = 1; G = 8 > S = 4 -> plug-in 1 - 2 * 0.5^8 = 0.9921875.
    # A constant row never has signal; four distinct values always do for G <= 4, and for G = 8 the
    # plug-in gives 1 - 4 (1/4)^8 = 1 - 4/65536.
    r = np.array([[0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5], [0.0, 0.25, 0.5, 1.0]])
    q = signal_prob_samples([2, 3, 8], r)
    np.testing.assert_allclose(q[:, 0], [2 / 3, 1.0, 0.9921875])
    np.testing.assert_allclose(q[:, 1], 0.0)
    np.testing.assert_allclose(q[:, 2], [1.0, 1.0, 1 - 4 / 65536])


@pytest.mark.parametrize("seed", range(3))
def test_graded_u_statistic_matches_enumeration(seed):
    rng = np.random.default_rng(seed)
    r = rng.choice([0.0, 0.05, 0.5, 1.0], size=(3, 7), p=[0.5, 0.2, 0.2, 0.1])
    for g in (2, 3, 5):
        slow = [
            np.mean([np.ptp(row[list(idx)]) > 1e-6 for idx in itertools.combinations(range(7), g)])
            for row in r
        ]
        np.testing.assert_allclose(signal_prob_samples([g], r)[0], slow)


def test_graded_estimate_of_bernoulli_rewards_matches_q():
    rng = np.random.default_rng(0)
    samples = (rng.random((4000, 16)) < 0.3).astype(float)
    np.testing.assert_allclose(
        signal_prob_samples([4, 8], samples).mean(1), signal_prob([4, 8], 0.3)[:, 0], atol=0.01
    )


def test_beta_estimator_corrects_the_plugin_bias():
    # True pass rates ~ Beta(0.3, 1.5), measured from 8 samples each. The plug-in says q = 0 for every
    # request seen 0/8 times, so it under-states q at large G; the empirical-Bayes estimate does not.
    rng = np.random.default_rng(0)
    p = rng.beta(0.3, 1.5, 3000)
    k = rng.binomial(8, p)
    g = [4, 16, 64]
    truth = signal_prob(g, p).mean(1)
    plug, m1 = expected_signal_prob(g, k / 8)
    beta, m2 = expected_signal_prob(g, k / 8, n_samples=np.full(3000, 8))
    assert (m1, m2) == ("plugin", "beta")
    np.testing.assert_allclose(beta, truth, atol=0.02)
    assert truth[-1] - plug[-1] > 0.2
    a, b = fit_beta_prior(k, np.full(3000, 8))
    assert a == pytest.approx(0.3, rel=0.2) and b == pytest.approx(1.5, rel=0.2)


def test_cost_lines_by_hand():
    # Points on mem = 10 + 2 G and step = 5 + 0.5 G are recovered exactly, with R^2 = 1.
    g = np.array([4.0, 8.0, 16.0, 32.0])
    cost = fit_cost_model(g, 10 + 2 * g, 5 + 0.5 * g)
    assert (cost.memory.intercept, cost.memory.slope) == pytest.approx((10.0, 2.0))
    assert (cost.step.intercept, cost.step.slope) == pytest.approx((5.0, 0.5))
    assert cost.memory.r2 == pytest.approx(1.0) and not cost.memory.exact
    assert (cost.g_min, cost.g_max) == (4.0, 32.0)


def test_line_fit_quality_by_hand():
    # x = 0, 1, 2 and y = 0, 2, 1: slope 0.5, intercept 0.5, residuals -0.5, 1, -0.5;
    # SS_res = 1.5, SS_tot = 2, R^2 = 0.25, RMSE = sqrt(0.5).
    fit = fit_line([0.0, 1.0, 2.0], [0.0, 2.0, 1.0])
    assert (fit.intercept, fit.slope, fit.r2) == pytest.approx((0.5, 0.5, 0.25))
    assert fit.rmse == pytest.approx(np.sqrt(0.5)) and fit.max_abs_resid == pytest.approx(1.0)
    assert fit_line([2.0, 4.0], [1.0, 3.0]).exact


def test_cost_model_needs_two_distinct_g():
    with pytest.raises(InputError, match="2 distinct G"):
        fit_cost_model([8.0], [20.0], [3.0])
    with pytest.raises(InputError, match="2 distinct G"):
        fit_cost_model([8.0, 8.0], [20.0, 21.0], [3.0, 3.1])


def linear_profile():
    g = np.array([4.0, 8.0, 16.0, 32.0])
    return fit_cost_model(g, 10 + 2 * g, 5 + 0.5 * g)


def test_planner_picks_an_interior_g_by_hand():
    # Every request at p = 0.5, memory 10 + 2 G GB under an 80 GB budget (G = 32 needs 74, G = 64 needs 138),
    # step time 5 + 0.5 G s; objective q (1 - 1/G) / step_s:
    #   G = 2:  q = 1 - 2 (1/2)^2  = 0.5       -> 0.5 * 0.5 / 6              = 0.04167
    #   G = 4:  q = 1 - 2 (1/2)^4  = 0.875     -> 0.875 * 0.75 / 7           = 0.09375
    #   G = 8:  q = 1 - 2 (1/2)^8  = 0.9921875 -> 0.9921875 * 0.875 / 9      = 0.09646
    #   G = 16: q = 1 - 2 (1/2)^16 = 0.99997   -> 0.99997 * 0.9375 / 13      = 0.07211
    #   G = 32:                                 -> ~1 * 0.96875 / 21          = 0.04613
    plan = plan_group_size(
        linear_profile(), np.full(10, 0.5), memory_budget_gb=80.0, candidates=[2, 4, 8, 16, 32, 64]
    )
    assert plan.recommended == 8
    rows = {c.G: c for c in plan.candidates}
    assert rows[8].objective == pytest.approx(0.9921875 * 0.875 / 9)
    assert rows[4].objective == pytest.approx(0.875 * 0.75 / 7)
    assert rows[32].fits_memory and not rows[64].fits_memory
    assert rows[64].extrapolated and not rows[16].extrapolated
    assert rows[8].mem_gb == pytest.approx(26.0) and rows[8].step_s == pytest.approx(9.0)


def test_per_step_objective_takes_the_largest_g_that_fits():
    plan = plan_group_size(
        linear_profile(),
        np.full(10, 0.5),
        memory_budget_gb=80.0,
        candidates=[2, 4, 8, 16, 32, 64],
        objective="signal_per_step",
    )
    assert plan.recommended == 32


def test_planner_errors():
    cost = linear_profile()
    with pytest.raises(InputError, match="no candidate G fits"):
        plan_group_size(cost, [0.5], memory_budget_gb=12.0, candidates=[2, 4])
    with pytest.raises(InputError, match="memory budget"):
        plan_group_size(cost, [0.5], memory_budget_gb=0.0)
    with pytest.raises(InputError, match="objective"):
        plan_group_size(cost, [0.5], memory_budget_gb=80.0, objective="fastest")
    with pytest.raises(InputError, match="integers >= 2"):
        plan_group_size(cost, [0.5], memory_budget_gb=80.0, candidates=[0, 4])
    with pytest.raises(InputError, match="n_samples"):
        plan_group_size(cost, [0.5], memory_budget_gb=80.0, estimator="beta")
