"""Across-seed statistics of the demo (``remark.demo.seeds``) and the report's verdict, on hand-made values."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

from eval.bootstrap import BootstrapConfig
from eval.steps import steps_to_reach
from remark.demo.report import verdict
from remark.demo.seeds import (
    pooled_curve,
    pooled_difference,
    pooled_interval,
    pooled_steps_to_reach,
    pooled_sums,
    seed_spread_S,
)

KEY = "eval/recall@5/per_responder"
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


def test_verdict_needs_both_intervals_to_exclude_zero():
    def d(seeds, reqs):
        return {
            "seeds": {"ci_low": seeds[0], "ci_high": seeds[1]},
            "requests": {"ci_low": reqs[0], "ci_high": reqs[1]},
        }

    assert "resolved: A is ahead" in verdict(d((0.01, 0.05), (0.02, 0.04)), "A", "B")
    assert "resolved: B is ahead" in verdict(d((-0.05, -0.01), (-0.04, -0.02)), "A", "B")
    text = verdict(d((-0.02, 0.08), (0.01, 0.05)), "A", "B")
    assert "not resolved" in text and "over seeds" in text and "over requests" not in text
    text = verdict(d((0.01, 0.08), (-0.01, 0.05)), "A", "B")
    assert "not resolved" in text and "over requests" in text
    assert "not resolved" in verdict(d((None, None), (0.01, 0.05)), "A", "B")
