"""eval.steps: first crossing, steps-to-reach with CIs from eval logs, validation curves, plots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from catalog.io.errors import InputError
from eval.bootstrap import BootstrapConfig
from eval.report import plot_curves
from eval.steps import first_crossing, read_eval_log, steps_to_reach, validation_curve

KEY = "eval/recall@20/union"
PR = "eval/recall@20/per_responder"


def write_run(root: Path, curve: dict[int, list[float]], *, rows=(1, 1, 1, 1), parquet=True) -> Path:
    """A run dir in the eval-log contract: per step, per-request union and per-responder values."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "eval").mkdir(exist_ok=True)
    lines = []
    for step, values in curve.items():
        v, w = np.array(values), np.array(rows, dtype=float)
        lines.append(
            json.dumps({"step": step, "samples": step * 48, KEY: v.mean(), PR: (v * w).sum() / w.sum()})
        )
        if parquet:
            ids = [f"r{i}" for i in range(len(values))]
            pl.DataFrame({"request_id": ids, KEY: values, PR: values, "n_rows": list(rows)}).write_parquet(
                root / "eval" / f"step_{step:06d}.parquet"
            )
    (root / "eval_log.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_first_crossing_by_hand():
    steps = np.array([0, 100, 200])
    values = np.array([[0.1, 0.2, 0.4], [0.5, 0.6, 0.7], [0.1, 0.1, 0.2]])
    np.testing.assert_allclose(first_crossing(steps, values, np.array([0.3, 0.3, 0.3])), [150.0, 0.0, np.inf])
    # exactly equal counts as reached, at that step
    np.testing.assert_allclose(first_crossing(steps, values[:1], np.array([0.2])), [100.0])


CFG = BootstrapConfig(method="percentile", n_resamples=400, seed=0)


def test_steps_to_reach_fraction_and_ci(tmp_path):
    base = write_run(
        tmp_path / "rank_grpo",
        {0: [0.0, 0.1, 0.1, 0.2], 100: [0.1, 0.2, 0.2, 0.3], 200: [0.2, 0.3, 0.3, 0.4]},
    )
    run = write_run(
        tmp_path / "remark", {0: [0.0, 0.1, 0.1, 0.2], 50: [0.1, 0.2, 0.3, 0.2], 100: [0.3, 0.4, 0.5, 0.4]}
    )
    got = steps_to_reach(run, base, key=KEY, config=CFG)
    # target 0.3 at step 200; run means 0.1, 0.2, 0.4 at 0, 50, 100 -> 75 steps -> 0.375
    assert got["baseline_value"] == pytest.approx(0.3)
    assert got["step"] == pytest.approx(75.0) and got["fraction"] == pytest.approx(0.375)
    assert got["ci_low"] <= got["fraction"] <= got["ci_high"] and got["ci_low"] < got["ci_high"]
    assert got["reached"] and got["n_requests"] == 4 and got["ci"]["method"] == "percentile"
    assert steps_to_reach(run, base, key=KEY, config=CFG) == got  # seeded


def test_per_responder_key_weights_requests_by_rows(tmp_path):
    rows = (4, 1, 1, 2)
    base = write_run(tmp_path / "b", {0: [0.0, 0.0, 0.0, 0.0], 10: [0.5, 0.0, 0.0, 0.0]}, rows=rows)
    run = write_run(tmp_path / "a", {0: [0.0, 0.0, 0.0, 0.0], 10: [0.5, 0.5, 0.5, 0.5]}, rows=rows)
    got = steps_to_reach(run, base, key=PR, config=CFG)
    assert got["baseline_value"] == pytest.approx(2.0 / 8)  # 4 * 0.5 / 8 rows
    assert got["fraction"] == pytest.approx(0.5)  # run goes 0 -> 0.5 linearly, reaches 0.25 halfway


def test_never_reached_is_inf_and_without_parquet_no_ci(tmp_path):
    base = write_run(tmp_path / "b", {0: [0.1] * 4, 100: [0.5] * 4})
    run = write_run(tmp_path / "a", {0: [0.1] * 4, 100: [0.2] * 4}, parquet=False)
    got = steps_to_reach(run, base, key=KEY, config=CFG)
    assert got["fraction"] == np.inf and not got["reached"]
    assert not got["ci"]["available"] and np.isnan(got["ci_low"])


def test_bad_logs_and_mismatched_requests_are_input_errors(tmp_path):
    run = tmp_path / "bad"
    run.mkdir()
    (run / "eval_log.jsonl").write_text('{"step": 0}\n{"step": "x"}\n')
    with pytest.raises(InputError, match=r"row 2, field 'step'"):
        read_eval_log(run)
    with pytest.raises(InputError, match="no eval log"):
        read_eval_log(tmp_path / "missing")
    base = write_run(tmp_path / "b", {0: [0.1] * 4, 100: [0.5] * 4})
    other = write_run(tmp_path / "a", {0: [0.1] * 3, 100: [0.6] * 3}, rows=(1, 1, 1))
    with pytest.raises(InputError, match="other requests"):
        steps_to_reach(other, base, key=KEY, config=CFG)
    with pytest.raises(InputError, match="no validation at step 7"):
        steps_to_reach(other, base, key=KEY, baseline_step=7, config=CFG)


def test_validation_curve_and_plot(tmp_path):
    run = write_run(
        tmp_path / "a", {0: [0.0, 0.1, 0.1, 0.2], 50: [0.1, 0.2, 0.3, 0.2], 100: [0.3, 0.4, 0.5, 0.4]}
    )
    c = validation_curve(run, KEY, config=CFG)
    np.testing.assert_allclose(c.x, [0, 50, 100])
    np.testing.assert_allclose(c.mean, [0.1, 0.2, 0.4])
    assert np.all(c.low <= c.mean) and np.all(c.mean <= c.high)
    s = validation_curve(run, KEY, x="samples", config=CFG)
    np.testing.assert_allclose(s.x, [0, 2400, 4800])
    out = plot_curves(
        [c],
        tmp_path / "curve.png",
        reach={"baseline_value": 0.3, "baseline_step": 200, "reached": True, "step": 75.0},
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
