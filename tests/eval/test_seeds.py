"""eval.seeds: across-seed statistics (spread over seeds, the request bootstrap of the seed average), on
hand-made values."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

from eval.bootstrap import BootstrapConfig, compare
from eval.seeds import (
    pooled_curve,
    pooled_difference,
    pooled_differences,
    pooled_interval,
    pooled_steps_to_reach,
    pooled_sums,
    seed_differences,
    seed_spread_S,
)
from eval.steps import steps_to_reach

KEY = "eval/recall@5/per_responder"
UNION = "eval/recall@5/union"
CI = BootstrapConfig(n_resamples=999, seed=0, method="percentile")


def test_seed_spread_by_hand():
    r = seed_spread_S([1.0, 2.0, 3.0])
    assert (r["mean"], r["sd"], r["min"], r["max"], r["n"]) == (2.0, 1.0, 1.0, 3.0, 3)
    half = 4.302652729749462 / math.sqrt(3)  # t_{0.975, 2} * sd / sqrt(3)
    assert r["ci_low"] == pytest.approx(2 - half, abs=1e-9) and r["ci_high"] == pytest.approx(
        2 + half, abs=1e-9
    )
    same = seed_spread_S([0.5, 0.5])
    assert (same["sd"], same["ci_low"], same["ci_high"]) == (0.0, 0.5, 0.5)
    one = seed_spread_S([0.4])
    assert one["mean"] == 0.4 and math.isnan(one["sd"]) and math.isnan(one["ci_low"])


def _frame(ids, values, n_rows):
    return pl.DataFrame({"request_id": ids, KEY: values, "n_rows": n_rows})


def test_pooled_sums_weight_by_responder_rows_and_align_by_id():
    a = _frame(["r1", "r2"], [0.5, 1.0], [2, 4])
    b = _frame(["r2", "r1"], [0.0, 0.25], [4, 2])  # another order: aligned by request_id
    num, den = pooled_sums([a, b], KEY)
    np.testing.assert_allclose(num, [2 * 0.5 + 2 * 0.25, 4 * 1.0 + 4 * 0.0])
    np.testing.assert_allclose(den, [4, 8])
    with pytest.raises(ValueError, match="different requests"):
        pooled_sums([a, _frame(["r1", "r3"], [0.1, 0.2], [1, 1])], KEY)
    # the pooled ratio of sums is the mean of the per-seed weighted means (same weights in every seed)
    per_seed = [(2 * 0.5 + 4 * 1.0) / 6, (2 * 0.25 + 4 * 0.0) / 6]
    assert pooled_interval([a, b], KEY, CI)["mean"] == pytest.approx(np.mean(per_seed))


def test_pooled_difference_is_the_mean_of_per_seed_differences():
    rng = np.random.default_rng(0)
    ids = [f"r{i}" for i in range(30)]
    n_rows = rng.integers(1, 6, size=30)
    fa = [_frame(ids, rng.random(30), n_rows) for _ in range(3)]
    fb = [_frame(ids, rng.random(30) * 0.5, n_rows) for _ in range(3)]

    def wmean(f):
        return float((f[KEY] * f["n_rows"]).sum() / f["n_rows"].sum())

    expected = np.mean([wmean(a) - wmean(b) for a, b in zip(fa, fb, strict=True)])
    d = pooled_difference(fa, fb, KEY, CI)
    assert d["mean"] == pytest.approx(expected)
    assert d["ci_low"] < d["mean"] < d["ci_high"] and d["ci_low"] > 0  # b is half of a on average


def _write_run(run, steps, values_by_step, ids, n_rows):
    (run / "eval").mkdir(parents=True)
    lines = []
    for step in steps:
        vals = values_by_step[step]
        f = _frame(ids, vals, n_rows)
        f.write_parquet(run / "eval" / f"step_{step:06d}.parquet")
        lines.append(json.dumps({"step": step, KEY: float((f[KEY] * f["n_rows"]).sum() / f["n_rows"].sum())}))
    (run / "eval_log.jsonl").write_text("\n".join(lines) + "\n")


def test_pooled_steps_to_reach_with_one_seed_equals_eval_steps(tmp_path):
    rng = np.random.default_rng(1)
    ids = [f"r{i:02d}" for i in range(40)]
    n_rows = rng.integers(1, 5, size=40)
    steps = [0, 10, 20, 30]
    a = {s: np.clip(0.1 + 0.01 * s + rng.normal(0, 0.05, 40), 0, 1) for s in steps}
    b = {s: np.clip(0.1 + 0.004 * s + rng.normal(0, 0.05, 40), 0, 1) for s in steps}
    _write_run(tmp_path / "a", steps, a, ids, n_rows)
    _write_run(tmp_path / "b", steps, b, ids, n_rows)
    ref = steps_to_reach(tmp_path / "a", tmp_path / "b", key=KEY, config=CI)
    mine = pooled_steps_to_reach([tmp_path / "a"], [tmp_path / "b"], KEY, CI)
    for field in ("baseline_step", "baseline_value", "step", "fraction", "ci_low", "ci_high", "reached"):
        assert mine[field] == pytest.approx(ref[field]), field
    assert 0 < mine["fraction"] < 1
    # two identical seeds pool to the same curve and crossing
    _write_run(tmp_path / "a2", steps, a, ids, n_rows)
    _write_run(tmp_path / "b2", steps, b, ids, n_rows)
    twice = pooled_steps_to_reach(
        [tmp_path / "a", tmp_path / "a2"], [tmp_path / "b", tmp_path / "b2"], KEY, CI
    )
    assert twice["fraction"] == pytest.approx(mine["fraction"])
    curve = pooled_curve([tmp_path / "a", tmp_path / "a2"], KEY, CI)
    assert curve["x"] == steps
    logged = [json.loads(x)[KEY] for x in (tmp_path / "a" / "eval_log.jsonl").read_text().splitlines()]
    np.testing.assert_allclose(curve["mean"], logged)


def test_pooled_differences_bootstraps_every_key_at_once_and_checks_both_sides():
    rng = np.random.default_rng(2)
    ids = [f"r{i}" for i in range(25)]
    n_rows = rng.integers(1, 4, size=25)

    def frame(scale):
        return _frame(ids, rng.random(25) * scale, n_rows).with_columns(
            pl.Series(UNION, rng.random(25) * scale)
        )

    fa, fb = [frame(1.0) for _ in range(2)], [frame(0.5) for _ in range(2)]
    both = pooled_differences(fa, fb, [KEY, UNION], CI)
    for key in (KEY, UNION):  # the same resamples as one key at a time
        one = pooled_difference(fa, fb, key, CI)
        assert both[key] == pytest.approx(one, abs=1e-12)
    other = _frame([*ids[:-1], "elsewhere"], rng.random(25), n_rows)
    with pytest.raises(ValueError, match="different requests"):
        pooled_differences(fa, [fb[0], other], [KEY], CI)


def test_seed_differences_pair_run_s_of_a_with_run_s_of_b():
    ids, n_rows = ["r1", "r2", "r3"], [1, 2, 1]
    a = [_frame(ids, v, n_rows) for v in ([1.0, 0.5, 0.0], [0.5, 0.5, 0.5], [1.0, 1.0, 0.0])]
    b = [_frame(ids, v, n_rows) for v in ([0.0, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.0])]
    got = seed_differences(a, b, [KEY], CI)[KEY]
    # weighted means (n_rows 1, 2, 1 over 4 rows): A 0.5, 0.5, 0.75; B 0.25, 0.25, 0.25
    assert [c["mean"] for c in got["per_seed"]] == pytest.approx([0.25, 0.25, 0.5])
    for cell, fa, fb in zip(got["per_seed"], a, b, strict=True):  # each pair's own request bootstrap
        assert cell == compare(fa, fb, [KEY], CI)[KEY]
    sd = math.sqrt(((0.25 - 1 / 3) ** 2 * 2 + (0.5 - 1 / 3) ** 2) / 2)  # sqrt(1 / 48)
    half = 4.302652729749462 * sd / math.sqrt(3)
    seeds = got["seeds"]
    assert (seeds["mean"], seeds["sd"], seeds["min"], seeds["max"]) == pytest.approx((1 / 3, sd, 0.25, 0.5))
    assert (seeds["ci_low"], seeds["ci_high"]) == pytest.approx((1 / 3 - half, 1 / 3 + half))
    assert got["requests"]["mean"] == pytest.approx(1 / 3)  # the seed average, bootstrapped over requests
    assert got["requests"] == pooled_difference(a, b, KEY, CI)
    with pytest.raises(ValueError, match="pairing needs as many"):
        seed_differences(a, b[:2], [KEY], CI)
