"""experiments/compare_hosts.py: the first differing training step of each stage, and the weights, of two runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("compare_hosts", REPO / "experiments" / "compare_hosts.py")
compare_hosts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_hosts)


def _stage(root: Path, sub: str, name: str, losses: list[str], log: str = "worker.log") -> None:
    folder = root / sub / name
    folder.mkdir(parents=True)
    lines = ["starting"] + [
        f"{{'loss': '{x}', 'grad_norm': '0.1', 'step_time': '{i}'}}" for i, x in enumerate(losses)
    ]
    (folder / log).write_text("\n".join(lines) + "\n")


def test_first_differing_step_and_weights(tmp_path):
    a, b = tmp_path / "demo", tmp_path / "reference"
    _stage(a, "logs", "warmup", ["0.5", "0.4"])
    _stage(b, "stages", "warmup", ["0.5", "0.4"], log="step_logs.txt")
    _stage(a, "logs", "remark-lr1e-03-seed0", ["0.1", "0.2", "0.3"])
    _stage(b, "stages", "remark-lr1e-03-seed0", ["0.1", "0.2", "0.31", "0.5"], log="step_logs.txt")
    (a / "summary.json").write_text(
        json.dumps({"weights": {"sft_model/model.safetensors": "aa", "x/m": "bb"}})
    )
    (b / "weights.sha256").write_text("aa  sft_model/model.safetensors\ncc  x/m\n")
    lines = compare_hosts.compare(a, b)
    assert lines == [
        "remark-lr1e-03-seed0: first differing step 3 of 3: loss 0.3 vs 0.31",  # step_time is left out
        "warmup: the 2 common steps are identical (2 and 2 logged)",
        "sft_model/model.safetensors: same weights",
        "x/m: different weights",
    ]
