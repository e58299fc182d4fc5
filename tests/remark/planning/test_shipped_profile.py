"""``remark plan-group-size`` on the shipped H200 profile (bench/profiles/h200_gpu_check.json), checked by
hand, and the CPU profile that ``bench/trainer_overhead.py --profile-out`` writes in the same format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from remark.cli.main import main
from remark.planning.logs import read_profile

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "bench" / "profiles" / "h200_gpu_check.json"
# the H200 measurement: G -> (step s, peak GiB), 16 prompts, cap 320, 0.5B-shaped model
MEASURED = {4: (14.5, 5.4), 8: (12.1, 8.5), 16: (12.6, 14.6)}


def plan(tmp_path, capsys, budget, candidates="2,4,6,8,12,16,24,32,48,64"):
    rates = tmp_path / "rates.jsonl"
    rows = [{"request_id": f"r{i}", "pass_rate": p} for i, p in enumerate([0.5, 0.1, 0.9, 0.3])]
    rates.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["plan-group-size", "--profile", str(SHIPPED), "--pass-rates", str(rates)]
    assert main([*args, "--memory-budget", str(budget), "--candidates", candidates, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_shipped_profile_is_the_h200_measurement():
    doc = json.loads(SHIPPED.read_text())
    assert "H200" in doc["device"] and "bench/RESULTS.md" in doc["source"]
    assert doc["settings"] == {"prompts": 16, "max_completion_length": 320, "k": 20}
    points = read_profile(SHIPPED)
    assert {int(p["G"]): (p["step_s"], p["peak_mem_gb"]) for p in points} == MEASURED


def test_plan_group_size_on_the_shipped_profile_by_hand(tmp_path, capsys):
    # Least squares by hand over G = 4, 8, 16 (mean 28/3, Sxx = 224/3):
    #   memory: Sxy = 57.2  -> slope 57.2 / (224/3) = 0.766071, intercept 9.5 - slope * 28/3 = 2.35
    #   step:   Sxy = -9.4667 -> slope -0.126786, intercept 39.2/3 + 0.126786 * 28/3 = 14.25
    out = plan(tmp_path, capsys, budget=16)
    cost = out["cost_model"]
    assert cost["memory"]["slope"] == pytest.approx(0.766071, abs=1e-6)
    assert cost["memory"]["intercept"] == pytest.approx(2.35, abs=1e-9)
    assert cost["step"]["slope"] == pytest.approx(-0.126786, abs=1e-6)
    assert cost["step"]["intercept"] == pytest.approx(14.25, abs=1e-9)
    by_g = {c["G"]: c for c in out["candidates"]}
    # G = 16: 2.35 + 16 * 0.766071 = 14.607 GiB <= 16; G = 24: 20.736 GiB > 16
    assert by_g[16]["mem_gb"] == pytest.approx(14.607143, abs=1e-5) and by_g[16]["fits_memory"]
    assert not by_g[24]["fits_memory"]
    # q(16, p) = 1 - p^16 - (1 - p)^16 for p = 0.5, 0.1, 0.9, 0.3: 0.999969, 0.814698 (x2), 0.996677
    q16 = (0.999969 + 2 * 0.814698 + 0.996677) / 4
    assert by_g[16]["q"] == pytest.approx(q16, abs=1e-6)
    step16 = 14.25 - 0.126786 * 16  # 12.2214 s
    assert by_g[16]["objective"] == pytest.approx(q16 * (15 / 16) / step16, rel=1e-5)
    # the fitted step time falls with G (12.1 and 12.6 s at G = 8 and 16 against 14.5 s at G = 4) while q
    # grows, so signal per second grows with G: the largest G in the budget wins
    assert out["recommended_G"] == 16
    assert plan(tmp_path, capsys, budget=10)["recommended_G"] == 8  # G = 12 needs 11.54 GiB
    assert plan(tmp_path, capsys, budget=80, candidates="4,8,16")["recommended_G"] == 16


def test_the_planner_does_not_recommend_beyond_the_measured_range(tmp_path, capsys):
    """The fitted step line falls with G, so carried to G = 64 it predicts 6.1 s per step and would win:
    such G are listed as extrapolated but only recommended with --extrapolate."""
    out = plan(tmp_path, capsys, budget=80)
    by_g = {c["G"]: c for c in out["candidates"]}
    assert out["recommended_G"] == 16
    assert by_g[64]["extrapolated"] and by_g[64]["fits_memory"] and not by_g[16]["extrapolated"]
    assert by_g[64]["step_s"] == pytest.approx(14.25 - 0.126786 * 64, abs=1e-4)  # 6.136 s
    assert by_g[64]["objective"] > by_g[16]["objective"]
    rates = tmp_path / "rates.jsonl"
    args = ["plan-group-size", "--profile", str(SHIPPED), "--pass-rates", str(rates), "--memory-budget", "80"]
    assert main([*args, "--extrapolate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recommended_G"] == 64
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "step time falls as G grows" in text and "extrapolated, not recommended" in text
    # at 5 GB only G = 2 fits (3.88 GB), and it lies outside the measured 4..16
    assert main([*args[:-1], "5"]) == 2
    err = capsys.readouterr().err
    assert "no candidate G inside the profiled range 4..16 fits in 5 GB" in err and "--extrapolate" in err


@pytest.mark.slow
def test_trainer_overhead_writes_a_cpu_profile_that_plan_group_size_reads(tmp_path, capsys):
    profile = tmp_path / "cpu_profile.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(REPO / "bench" / "trainer_overhead.py"), "--reps", "0", "--steps", "1"]
    cmd += ["--warmup", "0", "--prompts", "2", "--max-completion-length", "24", "--k", "5"]
    cmd += ["--sft-steps", "0", "--work-dir", str(tmp_path / "world"), "--profile-out", str(profile)]
    cmd += ["--profile-group-sizes", "2,4"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(profile.read_text())
    assert doc["device"].startswith("CPU") and doc["source"].startswith("bench/trainer_overhead.py")
    assert [p["G"] for p in doc["points"]] == [2, 4]
    assert all(p["step_s"] > 0 and p["peak_mem_gb"] > 0 and p["tokens_per_s"] > 0 for p in doc["points"])
    # process peak RSS never resets and G runs in increasing order: the points cannot decrease
    assert doc["points"][0]["peak_mem_gb"] <= doc["points"][1]["peak_mem_gb"]
    rates = tmp_path / "rates.jsonl"
    rates.write_text('{"request_id": "a", "pass_rate": 0.5}\n{"request_id": "b", "pass_rate": 0.2}\n')
    args = ["plan-group-size", "--profile", str(profile), "--pass-rates", str(rates), "--memory-budget", "64"]
    assert main([*args, "--candidates", "2,4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recommended_G"] in (2, 4)
