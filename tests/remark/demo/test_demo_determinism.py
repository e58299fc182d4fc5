"""Same settings, same numbers, whatever else runs: the demo's stage processes are bit-for-bit repeatable.

The warm-up (data, tokenizer, tiny model, SFT) and a test evaluation of the warmed model run twice at toy
size in ``remark.demo.worker`` processes: once with ``PYTHONHASHSEED=1``, once with ``PYTHONHASHSEED=2``
and a CPU-bound process beside it. Every file that carries a number must be byte-identical. This would
catch a thread count read from the load, a set or dict of strings iterated in hash order, a worker seed,
or a wall-clock dependence.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from remark.demo import default_settings
from remark.demo.jobs import Job, run_jobs
from remark.demo.worker_env import THREAD_ENV, apply_threads, worker_env


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(root: Path, s, hash_seed: str) -> dict[str, str]:
    root.mkdir()
    spec = {"settings": dataclasses.asdict(s)}
    env = {"PYTHONHASHSEED": hash_seed}
    done = run_jobs([Job("warmup", "warmup", spec, threads=1)], root, slots=1, extra_env=env)
    ev = Job(
        "eval",
        "eval",
        spec | {"data_dir": "data", "out": "eval", "models": {"sft": "sft_model"}},
        threads=1,
    )
    done |= run_jobs([ev], root, slots=1, extra_env=env)
    assert done["warmup"]["threads"]["torch_intra_op"] == 1 and done["warmup"]["threads"]["polars"] == 1
    files = [
        *sorted((root / "data").glob("*.parquet")),
        root / "base_model" / "tokenizer.json",
        root / "base_model" / "model.safetensors",
        root / "sft_model" / "model.safetensors",
        root / "eval" / "sft" / "per_request.parquet",
        root / "eval" / "sft" / "per_request_sampled.parquet",
        root / "eval" / "sft" / "predictions.jsonl",
        root / "eval" / "sft" / "samples.jsonl",
    ]
    out = {str(p.relative_to(root)): _digest(p) for p in files}
    sft = {k: v for k, v in done["warmup"]["result"]["sft"].items() if k != "wall_s"}
    out["sft losses"] = json.dumps(sft)
    cells = done["eval"]["result"]["sft"]
    out["test metrics"] = json.dumps([cells["per_responder"], cells["sampled"]["per_responder"]])
    return out


@pytest.mark.slow
def test_warm_up_and_evaluation_identical_across_hash_seeds_and_a_busy_neighbour(tmp_path):
    s = dataclasses.replace(default_settings(fast=True), sft_epochs=2.0)
    first = _run(tmp_path / "a", s, "1")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        second = _run(tmp_path / "b", s, "2")
    finally:
        busy.kill()
        busy.wait()
    assert first == second
    assert json.loads(first["sft losses"])["steps"] > 1  # it trained


def test_worker_env_fixes_every_pool_and_apply_threads_refuses_without_it(monkeypatch):
    env = worker_env(3, base={"PATH": "/bin", "OMP_NUM_THREADS": "8"})
    assert all(env[name] == "3" for name in THREAD_ENV)
    assert env["PATH"] == "/bin" and env["PYTHONHASHSEED"] == "0" and env["TOKENIZERS_PARALLELISM"] == "false"
    assert env["MKL_DYNAMIC"] == "FALSE"
    assert env["MALLOC_MMAP_THRESHOLD_"] == env["MALLOC_TRIM_THRESHOLD_"] == str(1 << 32)
    own = worker_env(1, base={"MALLOC_TRIM_THRESHOLD_": "131072"})  # a user's own malloc settings stay
    assert own["MALLOC_TRIM_THRESHOLD_"] == "131072" and "MALLOC_MMAP_THRESHOLD_" not in own
    with pytest.raises(ValueError, match="threads"):
        worker_env(0)
    monkeypatch.delenv("POLARS_MAX_THREADS", raising=False)
    with pytest.raises(RuntimeError, match="POLARS_MAX_THREADS"):
        apply_threads(1)  # polars' pool cannot be fixed from inside a process that did not start with it
