"""experiments/protoqa_cpu/run.py end to end at toy size on the real ProtoQA files (skipped without them):
every stage runs, both held-out halves are scored, both methods start from identical step-0 numbers,
and the analysis writes its report; without the files the script says so and exits 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "experiments" / "protoqa_cpu" / "run.py"


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=900
    )


def read_log(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_missing_protoqa_files_skip_with_a_message(tmp_path):
    done = run("--protoqa-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "SKIPPED: ProtoQA files not found" in done.stdout
    assert not (tmp_path / "out").exists()


def test_toy_run_end_to_end(data_dir, tmp_path):
    cfg = yaml.safe_load((SCRIPT.parent / "config.yaml").read_text())
    cfg["data"]["n_scraped"] = 8
    cfg["sft"].update(steps=10, eval_every=5)
    cfg["grpo"]["steps"] = 2
    cfg["eval"].update(every=1, num_samples=1)
    cfg["seeds"] = [0]
    cfg["analysis"]["n_resamples"] = 99
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    done = run("--config", str(config), "--out", str(out), "--protoqa-dir", str(data_dir / "protoqa"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]

    info = json.loads((out / "data" / "done.json").read_text())
    assert info["by_source"] == {"scraped": 8, "crowdsourced": 52}
    assert {"train", "valid", "test"} <= set(info)
    assert [r["step"] for r in read_log(out / "sft_model" / "eval_log.jsonl")] == [0, 5, 10]
    key = "eval/recall@10/per_responder"
    for side in ("", "test/"):
        for mode in ("", "sampled/"):
            logs = {
                m: read_log(out / "runs" / f"{m}_s0" / f"{side}{mode}eval_log.jsonl")
                for m in ("remark", "rank_grpo")
            }
            assert [r["step"] for r in logs["remark"]] == [0, 1, 2] == [r["step"] for r in logs["rank_grpo"]]
            # same warm-up, same sampling seed, same code path: identical step-0 numbers for both methods
            assert logs["remark"][0][key] == logs["rank_grpo"][0][key]
    for m in ("remark", "rank_grpo"):
        run_done = json.loads((out / "runs" / f"{m}_s0" / "done.json").read_text())
        assert run_done["steps"] == 2 and set(run_done["eval_s_by_side"]) == {"valid", "test"}

    summary = json.loads((out / "analysis" / "summary.json").read_text())
    assert summary["sides"] == ["valid", "test"]
    pooled = summary["paired"]["final"]["test"]["sampled"]["pooled"][key]
    assert pooled["ci_low"] <= pooled["mean"] <= pooled["ci_high"]
    for name in ("results.md", "curves.png", "reach.png", "warmup.png"):
        assert (out / "analysis" / name).stat().st_size > 0, name
