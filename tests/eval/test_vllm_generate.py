"""``remark eval run --engine vllm`` (vLLM's CPU build): the engine runs in the checkpoint's float32 (vLLM's
``auto`` would take bfloat16), and its greedy lists, and so every metric, equal transformers' on the same
model and requests."""

from __future__ import annotations

import json

from remark.cli.main import main
from tests.vllm_helpers import VLLM_MARKS

pytestmark = VLLM_MARKS

CI = ["--ci-method", "percentile", "--resamples", "200"]


def test_eval_run_with_vllm_equals_transformers(vllm_world, tmp_path, capsys, monkeypatch):
    import torch
    import vllm

    engines = []

    class Recorded(vllm.LLM):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            engines.append(self)

    monkeypatch.setattr(vllm, "LLM", Recorded)
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    data, model = vllm_world
    results, lists = {}, {}
    for engine in ("transformers", "vllm"):
        out = tmp_path / engine
        argv = [
            "eval",
            "run",
            "--model",
            str(model),
            "--data",
            str(data),
            "--out",
            str(out),
            "--split",
            "valid",
        ]
        argv += ["--k", "1", "3", "--max-new-tokens", "24", "--engine", engine, *CI, "--json"]
        assert main(argv) == 0
        results[engine] = json.loads(capsys.readouterr().out)
        lists[engine] = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert results["vllm"]["generation"]["engine"] == "vllm"
    (engine,) = engines
    assert engine.llm_engine.model_config.dtype == torch.float32
    assert [r["completion"] for r in lists["vllm"]] == [r["completion"] for r in lists["transformers"]]
    assert any(g is not None for r in lists["vllm"] for g in r["grounded"])  # lists of catalog titles
    for view in ("per_responder", "union"):
        assert results["vllm"][view] == results["transformers"][view]
