"""Inputs whose size sets the memory a command needs are refused up front with one line (exit 2) naming
the flag, the estimate and the limit (``catalog.io.memory``), instead of a kill by the kernel.

``REMARK_MEMORY_LIMIT_GB`` pins the limit, so the refusals do not depend on this machine's memory.
"""

from __future__ import annotations

import importlib

import pytest

from catalog.io.memory import ENV, SIZE_INPUTS, format_bytes, memory_limit
from tests.test_bad_input_table import run_cli, world  # noqa: F401  (the shared world fixture)


def _refused(argv, *fragments):
    code, _, err = run_cli(argv)
    assert "Traceback" not in err and code == 2, f"exit {code}\n{err[-2000:]}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("remark "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def limit_4gb(monkeypatch):
    monkeypatch.setenv(ENV, "4")


def test_eval_run_refuses_samples_that_cannot_be_held(tiny_model_dir, tmp_path, limit_4gb):
    from tests.eval.conftest import write_tiny_dataset

    data = write_tiny_dataset(tmp_path / "data")
    base = ["eval", "run", "--model", str(tiny_model_dir), "--data", str(data), "--out", str(tmp_path / "o")]
    base += ["--engine", "transformers", "--split", "all"]
    # every completion is held until scored: 1e6 samples of 320 tokens per request
    _refused(
        [*base, "--num-samples", "1000000"],
        "field '--num-samples'",
        "prompts x 1000001 lists of up to 320 tokens",
        "over the limit of 4.0 GB (REMARK_MEMORY_LIMIT_GB=4)",
        "lower --num-samples or --max-new-tokens",
    )
    # one generate call of 16 prompts x 20000 sequences: its KV cache
    _refused(
        [*base, "--num-samples", "20000", "--batch-size", "16"],
        "field '--batch-size'",
        "x 20000 sequences x",
        "(its KV cache and logits)",
        "lower --batch-size, --num-samples or --max-new-tokens",
    )
    assert not (tmp_path / "o").exists()


def test_kv_cache_estimate_of_a_known_config():
    from eval.generate import LOGIT_COPIES, kv_cache_bytes

    # Qwen2.5-0.5B-Instruct's config: 24 layers, 2 KV heads of 64, bf16, vocab 151936
    qwen = {"num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "hidden_size": 896,
            "vocab_size": 151936, "torch_dtype": "bfloat16"}  # fmt: skip
    per_token = 2 * 24 * 2 * 64 * 2  # 12 kB
    assert kv_cache_bytes(qwen, 16, 400) == 16 * 400 * per_token + 16 * 151936 * 4 * LOGIT_COPIES
    assert kv_cache_bytes({"model_type": "x"}, 16, 400) == 0  # sizes unknown: not estimated


def test_bootstrap_resamples_that_cannot_be_held_are_refused(world, limit_4gb):  # noqa: F811
    from eval.bootstrap import BOOTSTRAP_BASE_BYTES, BYTES_PER_DRAW, bootstrap_memory

    assert bootstrap_memory(60, 10**8) == BYTES_PER_DRAW * 60 * 10**8 + BOOTSTRAP_BASE_BYTES
    argv = ["eval", "score", "--data", str(world / "ds"), "--predictions", str(world / "preds.jsonl")]
    line = _refused(
        [*argv, "--resamples", "100000000"],
        "field '--resamples'",
        "a bootstrap of 100000000 resamples x ",
        "statistics needs about",
        "over the limit of 4.0 GB",
        "lower --resamples (the default is 9999)",
    )
    assert "GB of memory" in line


def test_plan_candidates_that_cannot_be_held_are_refused(world, monkeypatch):  # noqa: F811
    monkeypatch.setenv(ENV, "0.0001")  # 100 kB: 2000 candidates x 5 requests x 64 bytes = 640 kB
    grid = ",".join(str(g) for g in range(2, 2002))
    _refused(["plan-group-size", "--profile", str(world / "profile.json"), "--pass-rates", str(world / "rates.jsonl"),
              "--memory-budget", "40", "--candidates", grid],
             "field '--candidates'", "2000 candidate G x 5 requests needs about 640.0 kB of memory")  # fmt: skip


def test_a_synthetic_world_that_cannot_be_held_is_refused(tmp_path, limit_4gb):
    _refused(["prep", "synthetic", "--out", str(tmp_path / "o"), "--n-requests", "10000000"],
             "field '--n-requests'", "a synthetic world of 10000000 requests and 96 items needs about 505.8 GB")  # fmt: skip
    assert not (tmp_path / "o").exists()


def test_the_limit_and_the_table(monkeypatch):
    monkeypatch.setenv(ENV, "2.5")
    assert memory_limit() == (2_500_000_000, "REMARK_MEMORY_LIMIT_GB=2.5")
    monkeypatch.delenv(ENV)
    cap, source = memory_limit()
    assert cap > 0 and ("available now" in source or "could not be read" in source)
    assert [format_bytes(x) for x in (999, 1500, 2.5e9, 3e12)] == ["999 bytes", "1.5 kB", "2.5 GB", "3.0 TB"]
    for row in SIZE_INPUTS.values():  # every estimator the table names exists
        name = row.split(": ", 1)[1].split(" ")[0]
        module, _, attr = name.rpartition(".")
        assert hasattr(importlib.import_module(module), attr), name


def test_prep_of_one_request_with_30000_responders_is_linear_and_under_2_gb(tmp_path):
    """Rank-GRPO's rows hold each responder's own list and the request id, not the request's lists: the
    rows' list entries equal the grounded mentions, and ``remark prep threads`` of one request answered by
    30,000 responders (a subprocess, so its peak is its own) stays under 2 GB of resident memory."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    import polars as pl

    n = 30_000
    titles = [f"Film {i}" for i in range(500)]
    (tmp_path / "cat.csv").write_text(
        "title,year\n" + "".join(f"{t},{1950 + i % 70}\n" for i, t in enumerate(titles))
    )
    rows = [
        {"request_id": "r0", "prompt": "films like Arrival?", "responder_id": f"u{r}", "title": titles[(r * 7 + j) % 500],
         "year": 1950 + (r * 7 + j) % 500 % 70}
        for r in range(n) for j in range(1 + r % 3)
    ]  # fmt: skip
    (tmp_path / "threads.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    repo = Path(__file__).resolve().parents[1]
    argv = [sys.executable, "-m", "remark.cli.main", "prep", "threads", "--input", str(tmp_path / "threads.jsonl"),
            "--catalog", str(tmp_path / "cat.csv"), "--out", str(tmp_path / "ds")]  # fmt: skip
    # a fresh parent, whose only child is the command: its RUSAGE_CHILDREN peak is the command's (Linux: kB)
    probe = ("import resource, subprocess, sys\n"
             "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
             "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
             "sys.stderr.write(done.stderr)\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(repo)})  # fmt: skip
    code, peak_kb = map(int, done.stdout.split())
    assert code == 0, done.stderr[-2000:]
    assert peak_kb < 2 * 2**20, peak_kb
    written = pl.read_parquet(tmp_path / "ds" / "responder_rows.parquet")
    assert written.columns == ["request_id", "responder_id", "responder_index", "items"]
    assert written.height == n and written["items"].list.len().sum() == len(rows)


def test_train_refuses_completions_past_the_models_positions_and_generation_that_cannot_be_held(
    world,  # noqa: F811
    tiny_model_dir,
    tmp_path,
    monkeypatch,
):
    """Before any training step: max_completion_length alone past the positions, then with the longest
    prompt (tokenized with the chat template), then one generation step's KV cache over the memory limit."""
    import json

    positions = json.loads((tiny_model_dir / "config.json").read_text())["max_position_embeddings"]
    base = ["train", "--config", str(world / "base.yaml"), "--set", f"model_name_or_path={tiny_model_dir}",
            f"output_dir={tmp_path / 'run'}"]  # fmt: skip
    _refused([*base, "max_completion_length=100000000"], "field 'max_completion_length'",
             f"max_completion_length=100000000 does not fit the model's {positions} positions",
             "(max_position_embeddings in ")  # fmt: skip
    line = _refused([*base, f"max_completion_length={positions - 2}"], "field 'max_completion_length'",
                    "the longest training prompt (", f"+ max_completion_length={positions - 2} = ")  # fmt: skip
    prompt = int(line.split("the longest training prompt (")[1].split(" tokens")[0])
    assert 10 < prompt < positions and f"lower max_completion_length to at most {positions - prompt}" in line
    monkeypatch.setenv(ENV, "0.000001")  # 1 kB: no generation step fits
    _refused(base, "field 'per_device_train_batch_size'", "one generation step of 8 completions (generation_batch_size 8",
             f"x {prompt + 32} tokens (prompt + max_completion_length; KV cache and logits)",
             "over the limit of")  # fmt: skip
    assert not (tmp_path / "run").exists()
