"""`remark curve ...` and `remark plan-group-size` end to end on files written here."""

from __future__ import annotations

import json

import numpy as np
import pytest

from remark.cli.main import main
from remark.planning.curves import CurveParams


def run_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def write_run(path, params: CurveParams, seed: int, end: int = 3000, every: int = 75):
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    with (path / "eval_log.jsonl").open("w") as fh:
        for step in range(0, end + 1, every):
            r = float(params(step)[0]) + (rng.normal(0.0, 0.005) if step else 0.0)
            rec = {"step": step, "samples": 48 * step, "gpu_hours": step / 100, "wall_s": 36.0 * step}
            fh.write(json.dumps(rec | {"eval/recall@20/union": r, "eval/ndcg@20/union": r / 2}) + "\n")
    return path


def test_predict_json_by_hand(capsys):
    # R0 = 0.1, A = 0.5, B = 2, C_mid = 100: 0.18, 0.30, 0.42 at C = 50, 100, 200 (see test_curves).
    out = run_json(
        capsys,
        [
            "curve",
            "predict",
            "--r0",
            "0.1",
            "--a",
            "0.5",
            "--b",
            "2",
            "--c-mid",
            "100",
            "--at",
            "50",
            "100",
            "200",
            "--json",
        ],
    )
    assert out["at"] == [50.0, 100.0, 200.0]
    np.testing.assert_allclose(out["r"], [0.18, 0.30, 0.42])


def test_crossover_json(capsys):
    out = run_json(
        capsys, ["curve", "crossover", "--curve", "0,0.5,1,100", "--curve", "0,0.8,1,400", "--json"]
    )
    assert out["crossover"] == pytest.approx(400.0)  # 0.5 (C + 400) = 0.8 (C + 100)
    out = run_json(
        capsys, ["curve", "crossover", "--curve", "0,0.5,1,100", "--curve", "0,0.6,1,100", "--json"]
    )
    assert out["crossover"] is None


def test_crossover_bad_curve(capsys):
    assert main(["curve", "crossover", "--curve", "0,0.5,1", "--curve", "0,0.8,1,400"]) == 2
    assert "R0,A,B,CMID" in capsys.readouterr().err


def test_fit_and_plot(capsys, tmp_path):
    run = write_run(tmp_path / "a", CurveParams(0.1, 0.6, 1.5, 1000.0), seed=0)
    png = tmp_path / "fit.png"
    out = run_json(capsys, ["curve", "fit", str(run), "--plot", str(png), "--json"])
    assert abs(out["a"] - 0.6) < 0.02 and not out["unbounded"]
    assert out["a_interval"][0] < out["a"] < out["a_interval"][1]
    assert out["metric"] == "eval/recall@20/union" and out["x"] == "steps" and out["n"] == 40
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    hours = run_json(capsys, ["curve", "fit", str(run / "eval_log.jsonl"), "--x", "gpu_hours", "--json"])
    assert hours["c_mid"] == pytest.approx(out["c_mid"] / 100, rel=1e-3)  # 100 steps per GPU-hour
    assert main(["curve", "fit", str(run)]) == 0
    assert "ceiling: bounded" in capsys.readouterr().out


def test_fit_flags_an_early_run(capsys, tmp_path):
    run = write_run(tmp_path / "early", CurveParams(0.1, 0.6, 1.5, 1000.0), seed=1, end=500, every=25)
    out = run_json(capsys, ["curve", "fit", str(run), "--json"])
    assert out["unbounded"] and out["reason"]


def test_compare(capsys, tmp_path):
    a = write_run(tmp_path / "a", CurveParams(0.1, 0.6, 1.5, 1000.0), seed=0)
    b = write_run(tmp_path / "b", CurveParams(0.1, 0.45, 1.5, 1000.0), seed=1)
    out = run_json(capsys, ["curve", "compare", str(a), str(b), "--json"])
    assert out["higher"] == "a" and out["decidable"]
    assert out["a"]["a"] > out["b"]["a"]
    assert main(["curve", "compare", str(b), str(a)]) == 0
    assert "higher ceiling: b (decided" in capsys.readouterr().out


def test_fit_bad_log_exits_2_naming_the_line(capsys, tmp_path):
    log = tmp_path / "eval_log.jsonl"
    rows = [{"step": s, "eval/recall@20/union": 0.1} for s in (0, 200, 100)]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["curve", "fit", str(log)]) == 2
    err = capsys.readouterr().err
    assert "row 3" in err and "'step'" in err and "not increasing" in err


def write_plan_inputs(tmp_path):
    points = [
        {
            "G": g,
            "peak_mem_gb": 10.0 + 2 * g,
            "step_s": 5.0 + 0.5 * g,
            "tokens_per_s": 1e3,
            "gen_s": 1.0,
            "loss_s": 1.0,
        }
        for g in (4, 8, 16, 32)
    ]
    (tmp_path / "profile.json").write_text(
        json.dumps({"device": "synthetic", "model": "none", "points": points})
    )
    (tmp_path / "rates.jsonl").write_text(
        "".join(json.dumps({"request_id": f"r{i}", "pass_rate": 0.5}) + "\n" for i in range(10))
    )
    return tmp_path / "profile.json", tmp_path / "rates.jsonl"


def test_plan_group_size_json(capsys, tmp_path):
    profile, rates = write_plan_inputs(tmp_path)
    argv = ["plan-group-size", "--profile", str(profile), "--pass-rates", str(rates), "--memory-budget", "80"]
    out = run_json(capsys, [*argv, "--candidates", "2,4,8,16,32,64", "--json"])
    # Hand values in test_group_size.test_planner_picks_an_interior_g_by_hand.
    assert out["recommended_G"] == 8 and out["estimator"] == "plugin" and out["n_requests"] == 10
    rows = {c["G"]: c for c in out["candidates"]}
    assert rows[8]["q"] == pytest.approx(0.9921875) and rows[8]["step_s"] == pytest.approx(9.0)
    assert not rows[64]["fits_memory"]
    # The default candidates include G = 6: q = 1 - 2/64 = 0.96875 -> 0.96875 * (5/6) / 8 = 0.10091 > 0.09646.
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "recommended G = 6" in text and "R^2 1.000" in text


def test_plan_group_size_bad_inputs(capsys, tmp_path):
    profile, rates = write_plan_inputs(tmp_path)
    base = ["plan-group-size", "--pass-rates", str(rates), "--memory-budget", "80"]
    (tmp_path / "one.json").write_text(json.dumps({"points": [{"G": 4, "peak_mem_gb": 18.0, "step_s": 7.0}]}))
    assert main([*base, "--profile", str(tmp_path / "one.json")]) == 2
    assert "at least 2 profile points" in capsys.readouterr().err
    assert main([*base, "--profile", str(profile), "--candidates", "0,4"]) == 2
    assert "G >= 2" in capsys.readouterr().err
    assert main([*base, "--profile", str(profile), "--memory-budget", "5"]) == 2
    assert "no candidate G fits" in capsys.readouterr().err
