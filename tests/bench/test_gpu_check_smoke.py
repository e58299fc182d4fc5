"""``bench/gpu_check.py --smoke``: the GPU check's whole path on CPU (tiny model, 1 step per G), and its
``profile.json`` read by ``remark plan-group-size``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
POINT_KEYS = {"G", "peak_mem_gb", "step_s", "tokens_per_s", "gen_s", "loss_s"}


@pytest.mark.slow
def test_gpu_check_smoke_writes_results_and_a_usable_profile(tmp_path, capsys):
    out = tmp_path / "out"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_check.py"), "--smoke", "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    results = json.loads((out / "results.json").read_text())
    assert results["settings"]["smoke"] is True
    assert results["skipped"] == []
    assert results["warmup_run"]["status"] == "ok"  # untimed, and in no run's medians
    runs = {(r["kind"], r["G"]): r for r in results["runs"]}
    assert set(runs) == {(kind, g) for kind in ("remark", "plain") for g in (4, 8, 16)}
    for (kind, g), r in runs.items():
        assert r["status"] == "ok", r
        assert r["rows"] == 2 * g
        assert r["n_steps"] == r["n_timed"] == 2 and r["rep"] == 0
        m = r["median"]
        assert m["step_s"] > 0 and m["gen_s"] > 0 and m["loss_s"] > 0
        assert m["step_s"] >= m["gen_s"] + m["loss_s"]
        assert r["completion_tokens_per_step"] > 0 and r["tokens_per_s"] > 0
        assert (m["score_s"] > 0) == (kind == "remark")  # only remark parses and grounds
        # serial scoring: the step waits for all of the work, inside TRL's reward call
        assert (m["score_wait_s"] > 0) == (kind == "remark") and m["score_wait_s"] >= m["score_work_s"] * 0.99
        assert m["score_work_s"] == pytest.approx(m["score_s"], rel=1e-6)

    profile = json.loads((out / "profile.json").read_text())
    assert isinstance(profile["device"], str) and isinstance(profile["model"], str)
    assert [p["G"] for p in profile["points"]] == [4, 8, 16]
    for p in profile["points"]:
        assert set(p) >= POINT_KEYS
        assert isinstance(p["G"], int) and p["step_s"] > 0 and p["peak_mem_gb"] >= 0
        assert p["overhead_ratio"] == pytest.approx(p["step_s"] / p["plain_step_s"])
        assert p["rep_ratios"] == [pytest.approx(p["overhead_ratio"])]  # one repetition: the same runs
    assert "Step-time ratio remark / plain GRPO" in (out / "summary.md").read_text()

    # The planner accepts the profile (the "Cost profile" contract).
    rates = tmp_path / "pass_rates.jsonl"
    rates.write_text(
        "".join(
            json.dumps({"request_id": f"r{i}", "pass_rate": p}) + "\n" for i, p in enumerate([0.1, 0.3, 0.6])
        )
    )
    from remark.cli.main import main as remark_main

    capsys.readouterr()
    code = remark_main(
        [
            "plan-group-size",
            "--profile",
            str(out / "profile.json"),
            "--pass-rates",
            str(rates),
            "--memory-budget",
            "80",
            "--json",
        ]
    )
    assert code == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["n_requests"] == 3
    assert plan["recommended_G"] in {c["G"] for c in plan["candidates"]}
