"""`remark train --config configs/tiny_cpu.yaml` end to end through the CLI (shrunk with --set)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from catalog.io.outputs import file_kind
from remark.cli.main import main

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_tiny_cpu_config_trains_validates_and_summarises(tmp_path, capsys):
    out = tmp_path / "tiny"
    code = main(
        [
            "train",
            "--config",
            str(REPO / "configs" / "tiny_cpu.yaml"),
            "--set",
            f"output_dir={out}",
            "max_steps=2",
            "save_steps=2",
            "validation_steps=1",
            "validation_max_requests=4",
            "validation_num_samples=2",
            "validation_metric=sampled/recall@5/per_responder",
            "build_tiny={n_requests: 40, sft_epochs: 1, spec: {vocab_size: 512, hidden_size: 32, intermediate_size: 64}}",
            "--json",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "train_summary.json").read_text())
    assert json.loads(printed[printed.index("{\n") :]) == summary
    assert summary["global_step"] == 2
    log = [json.loads(x) for x in (out / "eval_log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in log] == [0, 1, 2]
    sampled = [json.loads(x) for x in (out / "sampled" / "eval_log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in sampled] == [0, 1, 2]
    assert all(0.0 <= x["eval/recall@5/union"] <= 1.0 for x in log + sampled)
    best = json.loads((out / "best" / "best.json").read_text())
    assert best["metric"] == "sampled/recall@5/per_responder"
    assert best["value"] == max(x["eval/recall@5/per_responder"] for x in sampled)
    assert (out / "final" / "model.safetensors").is_file()
    assert json.loads((out / "remark_config.json").read_text())["reward_scheme"] == "union"
    assert (out / "assets" / "data" / "requests.parquet").is_file()
    # TRL's draft card in output_dir is the run's own file (recorded, so a rerun may replace it)
    assert file_kind(out / "README.md") == "train" and "- trl" in (out / "README.md").read_text()
