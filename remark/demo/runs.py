"""The RL runs: ReMaRk and Rank-GRPO from the one warm-up, once per RL seed, each its own process.

Each run is ``remark.run.training.run_training`` in a ``remark.demo.worker`` process (kind ``rl``), configured by
:func:`rl_fields`: the two methods differ only in reward scheme and sampling, the seeds only in ``seed``
(RL's sampling, the order of requests, the validation samples). The library's ``ValidationCallback``
does greedy and sampled validation and keeps ``best/`` by sampled per-responder recall. A run's folder
``<method>/seed<k>/`` holds what ``remark train`` writes (``eval_log.jsonl``, ``sampled/``, ``best/``,
``final/``, ``train_summary.json``); its process's log, progress and thread record are in
``logs/<method>-seed<k>/`` (``remark.demo.jobs``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from remark.demo.jobs import Job, read_progress
from remark.demo.settings import METHODS, DemoSettings


def run_name(method: str, seed: int) -> str:
    """``remark-seed0``: the job name and ``eval/`` folder of one run."""
    return f"{method}-seed{seed}"


def run_dir(method: str, seed: int) -> Path:
    """A run's output folder, relative to the demo folder: ``<method>/seed<k>``."""
    return Path(method) / f"seed{seed}"


def rl_fields(
    method: str, s: DemoSettings, data_dir: Path, model_dir: Path, out_dir: Path, *, seed: int | None = None
) -> dict[str, Any]:
    """``RemarkGRPOConfig`` fields of one run; methods differ only in reward scheme and sampling."""
    _, scheme, sampling = METHODS[method]
    seed = s.rl_seeds[0] if seed is None else seed
    return {
        "output_dir": str(out_dir),
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
        "dataloader_num_workers": 0,
        "seed": seed,
        "data_seed": seed,
    }


def rl_jobs(s: DemoSettings, data_dir: Path, model_dir: Path) -> list[Job]:
    """One job per (seed, method), seed by seed, so that a seed's two runs go side by side."""
    return [
        Job(
            run_name(m, seed),
            "rl",
            {"config": rl_fields(m, s, data_dir, model_dir, run_dir(m, seed), seed=seed)},
            threads=s.threads,
        )
        for seed in s.rl_seeds
        for m in METHODS
    ]


def train_diagnostics(log_folder: Path) -> dict[str, Any]:
    """Training reward (mean, first and last 10 steps) and the mean share of zero-signal groups."""
    steps = read_progress(log_folder)

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
