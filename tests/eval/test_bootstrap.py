"""eval.bootstrap: counts-based resampling equals scipy's own paired bootstrap; paired differences."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from eval.bootstrap import (
    BootstrapConfig,
    bootstrap_sums,
    compare,
    counts_from_indices,
    intervals,
    paired_difference,
    ratio_of_sums,
)


def test_counts_from_indices_by_hand():
    got = counts_from_indices(np.array([[0, 0, 2], [1, 2, 2]]), 3)
    np.testing.assert_array_equal(got, [[2, 0, 1], [0, 1, 2]])
    np.testing.assert_array_equal(counts_from_indices(np.array([2, 0]), 3), [1, 0, 1])


@pytest.mark.parametrize("method", ["bca", "percentile", "basic"])
def test_ratio_of_sums_equals_scipy_paired_bootstrap(method):
    """Same seed, same batch: scipy draws the same indices, so intervals agree to float precision."""
    rng = np.random.default_rng(3)
    n_rows = rng.integers(1, 7, 150).astype(float)  # responders per request
    value = rng.beta(2, 5, 150)  # per-request mean over its responders
    cfg = BootstrapConfig(method=method, n_resamples=999, seed=11, batch=100)
    got = ratio_of_sums(value * n_rows, n_rows, cfg)
    ref = stats.bootstrap(
        (value * n_rows, n_rows),
        lambda a, b, axis=-1: a.sum(axis) / b.sum(axis),
        paired=True,
        vectorized=True,
        n_resamples=999,
        batch=100,
        method=method,
        rng=np.random.default_rng(11),
    )
    assert got.estimate[0] == pytest.approx((value * n_rows).sum() / n_rows.sum())
    assert got.low[0] == pytest.approx(ref.confidence_interval.low, rel=1e-10)
    assert got.high[0] == pytest.approx(ref.confidence_interval.high, rel=1e-10)
    assert got.standard_error[0] == pytest.approx(ref.standard_error, rel=1e-10)


def test_seeded_and_several_statistics_share_resamples():
    rng = np.random.default_rng(0)
    x = rng.random((80, 2))
    cfg = BootstrapConfig(method="percentile", n_resamples=500, seed=5)
    a, b = ratio_of_sums(x, np.ones(80), cfg), ratio_of_sums(x, np.ones(80), cfg)
    np.testing.assert_array_equal(a.low, b.low)
    c = ratio_of_sums(x, np.ones(80), BootstrapConfig(method="percentile", n_resamples=500, seed=6))
    assert not np.array_equal(a.low, c.low)
    # statistic 0 alone gives the same interval as when bootstrapped together with statistic 1
    alone = ratio_of_sums(x[:, :1], np.ones(80), cfg)
    assert alone.low[0] == pytest.approx(a.low[0]) and alone.high[0] == pytest.approx(a.high[0])
    assert np.all(a.low < a.estimate) and np.all(a.estimate < a.high)


def test_constant_data_gives_a_point_interval_and_one_request_none():
    iv = ratio_of_sums(np.zeros(30), np.ones(30))
    assert (iv.low[0], iv.high[0]) == (0.0, 0.0)
    iv = bootstrap_sums(np.ones((1, 1)), lambda s: s)
    assert iv.estimate[0] == 1.0 and np.isnan(iv.low[0])


def test_paired_difference_removes_shared_request_noise():
    rng = np.random.default_rng(1)
    base = rng.random(200)  # request difficulty, shared by both systems
    a, b = base + 0.05, base.copy()
    cfg = BootstrapConfig(method="bca", n_resamples=999, seed=0)
    diff = paired_difference(a, np.ones(200), b, np.ones(200), cfg)
    assert diff.estimate[0] == pytest.approx(0.05)
    assert diff.low[0] == pytest.approx(0.05) and diff.high[0] == pytest.approx(0.05)  # constant shift
    # unpaired intervals of each mean are much wider than the paired difference
    single = ratio_of_sums(a, np.ones(200), cfg)
    assert single.high[0] - single.low[0] > 0.05


def test_config_rejects_unknown_method():
    with pytest.raises(ValueError, match="valid: bca, percentile, basic"):
        BootstrapConfig(method="studentized")


def _table(ids, values, n_rows):
    return pl.DataFrame(
        {
            "request_id": ids,
            "n_rows": n_rows,
            "eval/recall@5/per_responder": values,
            "eval/recall@5/union": values,
        }
    )


def test_frame_intervals_weight_per_responder_by_rows_and_compare_aligns_ids():
    a = _table(["a", "b", "c", "d"], [1.0, 0.0, 0.5, 0.25], [3, 1, 2, 2])
    keys = ["eval/recall@5/per_responder", "eval/recall@5/union"]
    got = intervals(a, keys, BootstrapConfig(method="percentile", n_resamples=200))
    assert got["eval/recall@5/per_responder"]["mean"] == pytest.approx((3 + 0 + 1 + 0.5) / 8)
    assert got["eval/recall@5/union"]["mean"] == pytest.approx(1.75 / 4)
    b = _table(["d", "c", "b", "a"], [0.25, 0.5, 0.0, 0.5], [2, 2, 1, 3])  # same requests, other order
    d = compare(a, b, keys, BootstrapConfig(method="percentile", n_resamples=200))
    assert d["eval/recall@5/per_responder"]["mean"] == pytest.approx(1.5 / 8)
    assert d["eval/recall@5/union"]["mean"] == pytest.approx(0.5 / 4)
    with pytest.raises(ValueError, match="different requests"):
        compare(a, b.filter(pl.col("request_id") != "a"), keys)
