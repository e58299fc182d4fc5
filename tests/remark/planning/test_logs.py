"""Readers of the planning inputs: eval logs, pass rates, cost profiles (files written here)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from catalog.io.errors import InputError
from remark.planning.logs import read_eval_log, read_pass_rates, read_profile


def write_log(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def record(step, score, **extra):
    return {
        "step": step,
        "samples": 48 * step,
        "gpu_hours": 0.01 * step,
        "wall_s": 36.0 * step,
        "eval/recall@20/union": score,
        "eval/recall@20/per_responder": score / 2 if isinstance(score, float) else score,
    } | extra


def test_reads_a_run_dir_and_each_axis(tmp_path):
    write_log(tmp_path / "run" / "eval_log.jsonl", [record(0, 0.1), "", record(100, 0.2), record(200, 0.25)])
    s = read_eval_log(tmp_path / "run")
    np.testing.assert_array_equal(s.c, [0, 100, 200])
    np.testing.assert_array_equal(s.r, [0.1, 0.2, 0.25])
    assert s.lines == [1, 3, 4]  # the blank line 2 is skipped but counted
    g = read_eval_log(tmp_path / "run" / "eval_log.jsonl", x="gpu_hours", metric="recall@20/per_responder")
    np.testing.assert_allclose(g.c, [0.0, 1.0, 2.0])
    assert g.metric == "eval/recall@20/per_responder"
    np.testing.assert_array_equal(read_eval_log(tmp_path / "run", x="samples").c, [0, 4800, 9600])


def test_min_x_drops_early_points(tmp_path):
    rows = [record(s, 0.1 + s / 1000) for s in (0, 100, 200, 300)]
    s = read_eval_log(write_log(tmp_path / "eval_log.jsonl", rows), min_x=100)
    assert s.lines == [2, 3, 4]
    np.testing.assert_array_equal(s.c, [100, 200, 300])
    with pytest.raises(InputError, match="at least 3 validations, the log has 2 with step >= 150"):
        read_eval_log(tmp_path / "eval_log.jsonl", min_x=150)


@pytest.mark.parametrize(
    ("rows", "match", "row", "field"),
    [
        ([record(0, 0.1), record(100, 0.2), "{not json"], "not valid JSON", 3, None),
        ([record(0, 0.1), record(100, 0.2), [1, 2]], "JSON object", 3, None),
        ([record(0, 0.1), record(200, 0.2), record(100, 0.3)], "not increasing", 3, "step"),
        ([record(0, 0.1), record(100, 0.2), record(100, 0.3)], "not increasing", 3, "step"),
        ([record(0, 0.1), record(100, 1.2), record(200, 0.3)], "outside", 2, "eval/recall@20/union"),
        (
            [record(0, 0.1), record(100, "high"), record(200, 0.3)],
            "not a finite number",
            2,
            "eval/recall@20/union",
        ),
        ([record(0, 0.1), {"step": 100}, record(200, 0.3)], "missing key", 2, "eval/recall@20/union"),
        ([record(0, 0.1), record(100, 0.2)], "at least 3", None, "eval/recall@20/union"),
    ],
)
def test_bad_logs_name_the_line_and_field(tmp_path, rows, match, row, field):
    path = write_log(tmp_path / "eval_log.jsonl", rows)
    with pytest.raises(InputError, match=match) as err:
        read_eval_log(path)
    assert err.value.path == str(path)
    assert err.value.row == row
    assert err.value.field == field


def test_missing_metric_lists_the_available_keys(tmp_path):
    path = write_log(tmp_path / "eval_log.jsonl", [record(s, 0.1) for s in (0, 1, 2)])
    with pytest.raises(InputError, match="eval/recall@20/per_responder") as err:
        read_eval_log(path, metric="eval/ndcg@20/union")
    assert err.value.row == 1


def test_missing_log_and_unknown_axis(tmp_path):
    with pytest.raises(InputError, match="no training eval log"):
        read_eval_log(tmp_path)
    path = write_log(tmp_path / "eval_log.jsonl", [record(s, 0.1) for s in (0, 1, 2)])
    with pytest.raises(InputError, match="compute axis"):
        read_eval_log(path, x="tokens")


def test_pass_rates_from_jsonl_and_parquet(tmp_path):
    rows = [
        {"request_id": "a", "pass_rate": 0.25, "n_samples": 8},
        {"request_id": "b", "pass_rate": 0.0, "n_samples": 8},
    ]
    write_log(tmp_path / "p.jsonl", rows)
    pl.DataFrame(rows).write_parquet(tmp_path / "p.parquet")
    for name in ("p.jsonl", "p.parquet"):
        pr = read_pass_rates(tmp_path / name)
        assert pr.request_id == ["a", "b"]
        np.testing.assert_array_equal(pr.pass_rate, [0.25, 0.0])
        np.testing.assert_array_equal(pr.n_samples, [8, 8])
    write_log(tmp_path / "q.jsonl", [{"request_id": "a", "pass_rate": 0.5}])
    assert read_pass_rates(tmp_path / "q.jsonl").n_samples is None


@pytest.mark.parametrize(
    ("rows", "match", "row", "field"),
    [
        ([{"request_id": "a", "pass_rate": 1.5}], "outside", 1, "pass_rate"),
        (
            [{"request_id": "a", "pass_rate": 0.5}, {"request_id": "a", "pass_rate": 0.1}],
            "repeats row 1",
            2,
            "request_id",
        ),
        ([{"request_id": 3, "pass_rate": 0.5}], "non-empty string", 1, "request_id"),
        ([{"request_id": "a"}], "missing pass_rate", 1, "pass_rate"),
        (
            [{"request_id": "a", "pass_rate": 0.5, "n_samples": 8}, {"request_id": "b", "pass_rate": 0.5}],
            "n_samples",
            2,
            "n_samples",
        ),
    ],
)
def test_bad_pass_rates(tmp_path, rows, match, row, field):
    path = write_log(tmp_path / "p.jsonl", rows)
    with pytest.raises(InputError, match=match) as err:
        read_pass_rates(path)
    assert (err.value.row, err.value.field) == (row, field)


def profile(tmp_path, points):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"device": "test", "model": "none", "points": points}))
    return path


def point(g, **kw):
    return {"G": g, "peak_mem_gb": 10.0 + 2 * g, "step_s": 5.0 + 0.5 * g, "tokens_per_s": 900.0} | kw


def test_profile_reads_points(tmp_path):
    pts = read_profile(profile(tmp_path, [point(4), point(8)]))
    assert (
        [p["G"] for p in pts] == [4.0, 8.0]
        and pts[1]["peak_mem_gb"] == 26.0
        and pts[0]["tokens_per_s"] == 900.0
    )


@pytest.mark.parametrize(
    ("points", "match", "field"),
    [
        ([point(4)], "at least 2 profile points", "points"),
        ([point(4), point(0)], "positive integer", "points[1].G"),
        ([point(4), point(-8)], "positive integer", "points[1].G"),
        ([point(4), point(8.5)], "positive integer", "points[1].G"),
        ([point(4), point(4)], "same G", "points"),
        ([point(4), {"G": 8, "step_s": 3.0}], "missing 'peak_mem_gb'", "points[1].peak_mem_gb"),
        ([point(4), point(8, step_s=0.0)], "step_s > 0", "points[1]"),
    ],
)
def test_bad_profiles(tmp_path, points, match, field):
    with pytest.raises(InputError, match=match) as err:
        read_profile(profile(tmp_path, points))
    assert err.value.field == field
