"""The two RL runs: ReMaRk and Rank-GRPO from the same warm-up, side by side or one after the other.

Each run is ``remark.train.run_training`` in its own process (:func:`rl_worker`), configured by
:func:`rl_fields` (the two methods differ only in reward scheme and sampling), with the library's
``ValidationCallback`` doing greedy and sampled validation and keeping ``best/`` by sampled per-responder
recall. One extra callback writes ``progress.jsonl`` (one line per logged step: step, reward, share of
zero-signal groups, wall time), which the parent turns into progress bars and the report's training
signal. A run's files: ``demo_config.json``, ``worker.log``, ``progress.jsonl`` and what ``remark train``
writes (``eval_log.jsonl``, ``sampled/``, ``best/``, ``final/``, ``train_summary.json``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from catalog.io import atomic_write
from remark.demo.settings import METHODS, DemoSettings


def rl_fields(method: str, s: DemoSettings, data_dir: Path, model_dir: Path, run_dir: Path) -> dict[str, Any]:
    """``RemarkGRPOConfig`` fields of one method; the two differ only in reward scheme and sampling."""
    _, scheme, sampling = METHODS[method]
    return {
        "output_dir": str(run_dir),
        "data_dir": str(data_dir),
        "model_name_or_path": str(model_dir),
        "reward_scheme": scheme,
        "sampling": sampling,
        "advantage_scaling": "group",
        "scale_rewards": "group",
        "num_ranks": s.k,
        "loss_type": "bnpo",
        "num_generations": s.num_generations,
        "per_device_train_batch_size": s.prompts_per_step * s.num_generations,
        "learning_rate": s.learning_rate,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "beta": 0.0,
        "temperature": 1.0,
        "max_completion_length": s.max_completion_length,
        "max_steps": s.steps,
        "use_cpu": True,
        "bf16": False,
        "save_strategy": "no",
        "validation_steps": s.validation_every,
        "validation_metric": s.metric,
        "validation_num_samples": s.validation_samples,
        "validation_temperature": 1.0,
        "validation_batch_size": 64,
        "logging_steps": 1,
        "report_to": "none",
        "disable_tqdm": True,
        "seed": s.seed,
        "data_seed": s.seed,
    }


def rl_worker(config_path: str | Path, threads: int = 1) -> int:
    """Train one method (its own process): ``run_training`` on a JSON file of ``RemarkGRPOConfig`` fields."""
    import torch

    torch.set_num_threads(threads)
    from transformers import TrainerCallback

    from remark.config import RemarkGRPOConfig
    from remark.train import run_training

    cfg = RemarkGRPOConfig(**json.loads(Path(config_path).read_text()))
    progress = Path(cfg.output_dir) / "progress.jsonl"
    progress.write_text("")
    t0 = time.monotonic()

    class Progress(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                rec = {"step": state.global_step, "max": state.max_steps, "wall_s": time.monotonic() - t0}
                rec |= {k: logs[k] for k in ("reward", "train/zero_signal_frac") if k in logs}
                with progress.open("a") as fh:
                    fh.write(json.dumps(rec) + "\n")

    run_training(cfg, callbacks=[Progress()])
    return 0


def _start_worker(fields: dict[str, Any], run_dir: Path, threads: int) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = run_dir / "demo_config.json"
    with atomic_write(cfg_path) as tmp:
        tmp.write_text(json.dumps(fields, indent=2) + "\n")
    env = dict(os.environ)
    env |= {
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    code = "import sys; from remark.demo.runs import rl_worker; sys.exit(rl_worker(sys.argv[1], int(sys.argv[2])))"
    with (run_dir / "worker.log").open("w") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-c", code, str(cfg_path), str(threads)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )


def read_progress(run_dir: Path) -> list[dict[str, Any]]:
    """The records of ``progress.jsonl`` so far (a line still being written is skipped)."""
    path = run_dir / "progress.jsonl"
    records = []
    for line in path.read_text().splitlines() if path.is_file() else ():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def auto_threads(max_threads: int = 2) -> int:
    """All cores up to ``max_threads`` when the 1-minute load leaves them idle, else 1 (see ``threads``)."""
    cpus = os.cpu_count() or 1
    n = min(cpus, max_threads)
    return n if n > 1 and os.getloadavg()[0] < cpus - 0.5 else 1


def run_methods(
    s: DemoSettings,
    data_dir: Path,
    model_dir: Path,
    out: Path,
    on_progress: Callable[[str, dict[str, Any]], None],
    *,
    threads: int = 1,
) -> dict[str, dict[str, Any]]:
    """Both RL runs (side by side with one thread each, or one after the other with ``threads``);
    returns each run's wall time and ``train_summary.json``."""
    batches = [list(METHODS)] if s.parallel else [[m] for m in METHODS]
    timing: dict[str, dict[str, Any]] = {}
    for batch in batches:
        pending = {}
        for m in batch:
            fields = rl_fields(m, s, data_dir, model_dir, out / m)
            pending[m] = (_start_worker(fields, out / m, 1 if s.parallel else threads), time.monotonic())
        while pending:
            time.sleep(0.5)
            for m in list(pending):
                proc, t0 = pending[m]
                records = read_progress(out / m)
                if records:
                    on_progress(m, records[-1])
                if proc.poll() is None:
                    continue
                del pending[m]
                timing[m] = {"wall_s": time.monotonic() - t0, "returncode": proc.returncode}
                if proc.returncode != 0:
                    for other, (p, _) in pending.items():
                        p.terminate()
                        p.wait()
                        timing[other] = {"returncode": "terminated"}
                    tail = (out / m / "worker.log").read_text()[-3000:]
                    raise RuntimeError(f"{METHODS[m][0]} training failed (exit {proc.returncode}):\n{tail}")
    for m in METHODS:
        timing[m]["summary"] = json.loads((out / m / "train_summary.json").read_text())
    return timing


def train_diagnostics(run_dir: Path) -> dict[str, Any]:
    """Training reward (mean, first and last 10 steps) and the mean share of zero-signal groups."""
    steps = read_progress(run_dir)

    def mean(key: str) -> float | None:
        vals = [h[key] for h in steps if key in h and h[key] == h[key]]
        return float(np.mean(vals)) if vals else None

    head, tail = steps[:10], steps[-10:]
    return {
        "steps": len(steps),
        "reward_mean": mean("reward"),
        "reward_first": float(np.mean([h["reward"] for h in head])) if head else None,
        "reward_last": float(np.mean([h["reward"] for h in tail])) if tail else None,
        "zero_signal_frac_mean": mean("train/zero_signal_frac"),
    }
