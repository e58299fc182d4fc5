"""ScaleRL curves: predict and crossover against hand arithmetic, fits on noisy synthetic curves."""

from __future__ import annotations

import numpy as np
import pytest

from catalog.io.errors import InputError
from remark.planning.curves import (
    CurveParams,
    compare_fits,
    crossover,
    crossovers,
    fit_curve,
    predict,
    validate_points,
)

TRUE = CurveParams(r0=0.1, a=0.6, b=1.5, c_mid=1000.0)


def noisy(params: CurveParams, end: float, n: int, sd: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n + 1 evenly spaced validations from C = 0 to ``end``; the step-0 value is exactly R0."""
    rng = np.random.default_rng(seed)
    c = np.linspace(0.0, end, n + 1)
    r = params(c) + rng.normal(0.0, sd, c.size)
    r[0] = params.r0
    return c, r


def test_predict_by_hand():
    # R0 = 0.1, A = 0.5, B = 2, C_mid = 100:
    # C = 50:  (100/50)^2 = 4    -> 0.1 + 0.4 / 5    = 0.18
    # C = 100: (100/100)^2 = 1   -> 0.1 + 0.4 / 2    = 0.30
    # C = 200: (100/200)^2 = 1/4 -> 0.1 + 0.4 / 1.25 = 0.42
    # C = 0 gives R0 exactly; C = 1e12 gives A to 1e-15 (ratio^2 = 1e-20).
    r = predict([0.0, 50.0, 100.0, 200.0, 1e12], r0=0.1, a=0.5, b=2.0, c_mid=100.0)
    np.testing.assert_allclose(r, [0.1, 0.18, 0.30, 0.42, 0.5], atol=1e-12)


def test_predict_rejects_bad_parameters():
    with pytest.raises(InputError, match="B and C_mid"):
        predict([1.0], r0=0.1, a=0.5, b=0.0, c_mid=100.0)
    with pytest.raises(InputError, match=">= 0"):
        predict([-1.0], r0=0.1, a=0.5, b=1.0, c_mid=100.0)


def test_crossover_by_hand():
    # R0 = 0, B = 1: f1 = 0.5 C / (C + 100), f2 = 0.8 C / (C + 400).
    # f1 = f2  <=>  0.5 (C + 400) = 0.8 (C + 100)  <=>  200 - 80 = 0.3 C  <=>  C = 400
    # (check: f1(400) = 0.5 * 0.8 = 0.4 = 0.8 * 0.5 = f2(400)).
    p, q = CurveParams(0.0, 0.5, 1.0, 100.0), CurveParams(0.0, 0.8, 1.0, 400.0)
    assert crossover(p, q) == pytest.approx(400.0, rel=1e-9)
    assert crossover(q, p) == pytest.approx(400.0, rel=1e-9)


def test_crossover_with_different_starts_by_hand():
    # Same B = 1 and C_mid = 100, so both use s = C / (C + 100):
    # 0.2 + (0.4 - 0.2) s = 0 + 0.6 s  <=>  0.2 = 0.4 s  <=>  s = 1/2  <=>  C = C_mid = 100.
    p, q = CurveParams(0.2, 0.4, 1.0, 100.0), CurveParams(0.0, 0.6, 1.0, 100.0)
    assert crossovers(p, q) == [pytest.approx(100.0, rel=1e-9)]


def test_curves_that_never_cross_give_none():
    # Same R0, B, C_mid and a higher A: R_q - R_p = 0.1 s(C) > 0 for every C > 0.
    p, q = CurveParams(0.1, 0.5, 1.5, 100.0), CurveParams(0.1, 0.6, 1.5, 100.0)
    assert crossover(p, q) is None
    assert crossover(p, p) is None


def test_two_crossings_are_both_found():
    # Different exponents: for C << C_mid the flatter curve (B = 1.5) leads, then the steeper one,
    # then the higher ceiling again; every reported C has equal values.
    p, q = CurveParams(0.1, 0.6, 1.5, 1000.0), CurveParams(0.1, 0.5, 2.0, 400.0)
    found = crossovers(p, q)
    assert len(found) == 2
    for c in found:
        assert p(c)[0] == pytest.approx(q(c)[0], abs=1e-12)


def test_fit_is_exact_on_noiseless_points():
    c = np.linspace(0.0, 3000.0, 31)
    fit = fit_curve(c, TRUE(c))
    assert fit.params.a == pytest.approx(0.6, abs=1e-6)
    assert fit.params.b == pytest.approx(1.5, rel=1e-5)
    assert fit.params.c_mid == pytest.approx(1000.0, rel=1e-5)
    assert fit.n == 30  # the C = 0 point only fixes R0


@pytest.mark.parametrize("seed", range(6))
def test_fit_recovers_parameters_past_twice_c_mid(seed):
    # 40 validations up to 3 x C_mid, noise sd 0.005 (about a recall@20 over ~2k requests).
    c, r = noisy(TRUE, 3000.0, 40, 0.005, seed)
    fit = fit_curve(c, r)
    assert abs(fit.params.a - 0.6) < 0.02
    assert fit.params.b == pytest.approx(1.5, rel=0.15)
    assert fit.params.c_mid == pytest.approx(1000.0, rel=0.15)
    assert not fit.unbounded, fit.reason
    lo, hi = fit.a_interval
    assert lo < fit.params.a < hi and fit.a_lo_closed and fit.a_hi_closed
    assert fit.c_max_over_c_mid > 2


@pytest.mark.parametrize("seed", range(6))
def test_fit_flags_ceiling_unbounded_before_the_midpoint(seed):
    # The data stop at 0.5 x C_mid: A trades off against C_mid and cannot be pinned down.
    c, r = noisy(TRUE, 500.0, 20, 0.005, seed)
    fit = fit_curve(c, r)
    assert fit.unbounded
    assert fit.reason


def test_too_few_points_for_an_interval_is_flagged():
    c = np.array([0.0, 100.0, 200.0, 400.0])
    fit = fit_curve(c, TRUE(c))
    assert fit.n == 3 and fit.unbounded and "degrees of freedom" in fit.reason


@pytest.mark.parametrize(
    ("c", "r", "match", "row"),
    [
        ([1.0, 2.0], [0.1, 0.2], "at least 3 points", None),
        ([1.0, 3.0, 2.0], [0.1, 0.2, 0.3], "not increasing", 3),
        ([1.0, 2.0, 2.0], [0.1, 0.2, 0.3], "not increasing", 3),
        ([1.0, 2.0, 3.0], [0.1, 1.2, 0.3], "outside", 2),
        ([1.0, 2.0, 3.0], [0.1, -0.1, 0.3], "outside", 2),
        ([1.0, 2.0, 3.0], [0.1, float("nan"), 0.3], "not finite", 2),
    ],
)
def test_bad_points_raise_clear_errors(c, r, match, row):
    with pytest.raises(InputError, match=match) as err:
        validate_points(np.array(c), np.array(r))
    assert err.value.row == row
    with pytest.raises(InputError, match=match):
        fit_curve(np.array(c), np.array(r))


def test_r0_outside_the_score_range_is_rejected():
    c = np.linspace(0.0, 3000.0, 31)
    with pytest.raises(InputError, match="R0"):
        fit_curve(c, TRUE(c), r0=1.5)


def test_compare_decides_only_with_separated_bounded_ceilings():
    c, r = noisy(TRUE, 3000.0, 40, 0.005, 0)
    low = CurveParams(0.1, 0.45, 1.5, 1000.0)
    c2, r2 = noisy(low, 3000.0, 40, 0.005, 1)
    fa, fb = fit_curve(c, r), fit_curve(c2, r2)
    out = compare_fits(fa, fb)
    assert out["higher"] == "a" and out["decidable"], out["why"]
    assert out["crossover"] is None  # same R0, B, C_mid: the higher ceiling leads everywhere
    early = fit_curve(*noisy(low, 500.0, 20, 0.005, 2))
    out = compare_fits(fa, early)
    assert not out["decidable"] and "b's" in out["why"]
