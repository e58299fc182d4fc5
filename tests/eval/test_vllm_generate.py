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


def _small_budget_engine(model):
    from tests.vllm_helpers import new_engine

    return new_engine(model, max_model_len=64, max_num_batched_tokens=64)


def test_seeded_sampling_on_a_small_token_budget_is_admitted_whole(tmp_path):
    """vLLM splits a request's prefill when the step's token budget runs out and then rewinds the request's
    seeded generator, which a CPU generator cannot do (``RuntimeError: CPU Generator does not use
    offset``). The runner feeds the engine prompt ranges it admits whole (``whole_prefill_batches``):
    30 prompts x 2 seeded samples on an engine of 64 batched tokens run, and the same call gives the same
    lists; the same prompts in one call of a fresh engine fail (the case is real)."""
    import pytest
    from transformers import AutoTokenizer
    from vllm import SamplingParams

    from eval.generate import GenerationConfig, vllm_runner
    from tests.vllm_helpers import CORPUS, build_random_model

    model = build_random_model(tmp_path / "m", arch="qwen2", tied=True)
    tok = AutoTokenizer.from_pretrained(model)
    texts = [CORPUS[i][: 12 + i % 10] for i in range(30)]  # 12-21 characters
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert 2 * sum(map(len, ids)) > 64 and 2 * max(map(len, ids)) <= 64  # one call chunks; no prompt must
    cfg = GenerationConfig(k=3, max_new_tokens=8, temperature=1.0, top_p=1.0, seed=3, num_samples=2)
    run = vllm_runner(_small_budget_engine(model), tok, cfg)
    first = run(texts, 2, True)
    assert len(first) == 30 and all(len(lists) == 2 for lists in first)
    assert run(texts, 2, True) == first
    params = SamplingParams(n=2, temperature=1.0, max_tokens=8, seed=3)
    with pytest.raises(RuntimeError, match="does not use offset"):
        _small_budget_engine(model).generate([{"prompt_token_ids": p} for p in ids], params, use_tqdm=False)


def test_demo_test_evaluation_runs_vllm_with_the_settings_kv_cache(vllm_world, tmp_path, monkeypatch):
    """The demo's test stage (``remark.demo.worker`` ``eval`` job) with ``use_vllm``: the engine's KV cache is
    the settings' ``vllm_kv_cache_gib`` in bytes, fractions included, and nothing is put in
    ``VLLM_CPU_KVCACHE_SPACE`` (vLLM parses that as whole GiB: ``"1.0"`` failed the engine's config after
    the whole RL grid had run)."""
    import dataclasses
    import os

    import vllm

    from remark.demo.settings import DemoSettings
    from remark.demo.worker import KINDS

    kwargs_seen = []

    class Recorded(vllm.LLM):
        def __init__(self, *args, **kwargs):
            kwargs_seen.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(vllm, "LLM", Recorded)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    data, model = vllm_world
    s = DemoSettings(fast=True, use_vllm=True, vllm_kv_cache_gib=0.75, k=3, eval_samples=1, ci_resamples=50)
    spec = {
        "settings": json.loads(json.dumps(dataclasses.asdict(s))),
        "models": {"sft": str(model)},
        "data_dir": str(data),
        "out": str(tmp_path / "eval"),
    }
    results = KINDS["eval"](spec, lambda **_: None)
    assert "VLLM_CPU_KVCACHE_SPACE" not in os.environ
    assert [kw["kv_cache_memory_bytes"] for kw in kwargs_seen] == [int(0.75 * (1 << 30))]
    assert results["sft"]["generation"]["engine"] == "vllm"
    assert (tmp_path / "eval" / "sft" / "per_request_sampled.parquet").is_file()
