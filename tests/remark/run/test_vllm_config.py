"""``configs/tiny_cpu_vllm.yaml`` (the published recipe's settings with vLLM colocate, on the tiny model)
runs to the end as written, at a smaller scale (``--set``: fewer requests, SFT epochs and steps): vLLM
generation in float32, validation through the engine, checkpoints, ``best/`` and ``final/`` with their
cards, the summary."""

from __future__ import annotations

import json
from pathlib import Path

from remark.cli.main import main
from tests.vllm_helpers import VLLM_MARKS

pytestmark = VLLM_MARKS

CONFIG = str(Path(__file__).resolve().parents[3] / "configs" / "tiny_cpu_vllm.yaml")

SMALL = [
    "build_tiny={n_requests: 60, n_items: 24, sft_epochs: 1, spec: {vocab_size: 512, hidden_size: 64, "
    "intermediate_size: 128, num_attention_heads: 2}}",
    "max_steps=2",
    "save_steps=1",
    "validation_steps=1",
    "validation_max_requests=8",
    "per_device_train_batch_size=16",
    "vllm_kv_cache_gib=0.0625",
]


def test_tiny_cpu_vllm_config_runs_to_the_end(tmp_path, capsys):
    from remark.config import load_config

    cfg = load_config(CONFIG)
    assert cfg.use_vllm and cfg.vllm_mode == "colocate" and cfg.vllm_importance_sampling_correction
    assert cfg.rank_level_ratio and cfg.bf16 is False
    out = tmp_path / "run"
    argv = ["train", "--config", CONFIG, "--set", f"output_dir={out}", *SMALL]
    assert main(argv) == 0
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    diffs = [h["sampling/sampling_logp_difference/mean"] for h in state["log_history"] if "loss" in h]
    assert len(diffs) == 2 and max(diffs) <= 2e-3
    log = [json.loads(x) for x in (out / "eval_log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in log] == [0, 1, 2]
    assert all("eval/recall@5/per_responder" in x for x in log)
    for folder in ("best", "final"):
        assert {"README.md", "card.json", "model.safetensors"} <= {p.name for p in (out / folder).iterdir()}
    assert json.loads((out / "train_summary.json").read_text())["global_step"] == 2
    assert (out / "checkpoint-1").is_dir() and (out / "checkpoint-2").is_dir()
