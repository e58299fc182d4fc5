"""The RL runs: ReMaRk and Rank-GRPO from the one warm-up, each its own process.

Two rounds. The *grid*: on the first RL seed, one run per method and learning rate of ``lr_grid``; each
method's rate is then chosen by validation alone (:func:`choose_rates`: the best validation value of the
primary metric, the same value that picks the run's ``best/`` checkpoint), before any test request is read.
The *seeds*: every further RL seed, one run per method at its chosen rate.

Each run is ``remark.run.training.run_training`` in a ``remark.demo.worker`` process (kind ``rl``), configured by
:func:`rl_fields`: the two methods differ only in reward scheme, sampling and (chosen) learning rate, the seeds
only in ``seed`` (RL's sampling, the order of requests, the validation samples). The library's
``ValidationCallback`` does greedy and sampled validation and keeps ``best/`` by sampled per-responder recall.
A run's folder ``<method>/lr<rate>/seed<k>/`` holds what ``remark train`` writes (``eval_log.jsonl``,
``sampled/``, ``best/``, ``final/``, ``train_summary.json``); its process's log, progress and thread record are
in ``logs/<method>-lr<rate>-seed<k>/`` (``remark.demo.jobs``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from remark.demo.jobs import Job, read_progress
from remark.demo.settings import METHODS, DemoSettings


def run_name(method: str, seed: int) -> str:
    """``remark-seed0``: a method's run of one seed at its chosen rate, as the ``eval/`` folders name it."""
    return f"{method}-seed{seed}"


def lr_tag(lr: float) -> str:
    """``2e-04`` for 2e-4: a learning rate as folder and job names write it."""
    return f"{lr:.0e}"


def job_name(method: str, seed: int, lr: float) -> str:
    """``remark-lr2e-04-seed0``: the job (and ``logs/``) name of one run."""
    return f"{method}-lr{lr_tag(lr)}-seed{seed}"


def run_dir(method: str, seed: int, lr: float) -> Path:
    """A run's output folder, relative to the demo folder: ``<method>/lr<rate>/seed<k>``."""
    return Path(method) / f"lr{lr_tag(lr)}" / f"seed{seed}"


def rl_fields(
    method: str,
    s: DemoSettings,
    data_dir: Path,
    model_dir: Path,
    out_dir: Path,
    *,
    seed: int | None = None,
    learning_rate: float | None = None,
) -> dict[str, Any]:
    """``RemarkGRPOConfig`` fields of one run; methods differ only in reward scheme, sampling and rate."""
    _, scheme, sampling = METHODS[method]
    seed = s.rl_seeds[0] if seed is None else seed
    learning_rate = s.lr_grid[0] if learning_rate is None else learning_rate
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
        "learning_rate": learning_rate,
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
    } | (vllm_fields(s) if s.use_vllm else {})


def vllm_fields(s: DemoSettings) -> dict[str, Any]:
    """``RemarkGRPOConfig`` fields of a run with vLLM: an eager engine colocated with the trainer (it starts in
    seconds), its KV cache, and the validation lists from that engine (``validation_engine: auto``)."""
    return {
        "use_vllm": True,
        "vllm_mode": "colocate",
        "vllm_kv_cache_gib": s.vllm_kv_cache_gib,
        "vllm_enforce_eager": True,
        "vllm_max_model_length": 1024,
    }


def _job(m: str, s: DemoSettings, data_dir: Path, model_dir: Path, seed: int, lr: float) -> Job:
    fields = rl_fields(m, s, data_dir, model_dir, run_dir(m, seed, lr), seed=seed, learning_rate=lr)
    return Job(job_name(m, seed, lr), "rl", {"config": fields}, threads=s.threads)


def grid_jobs(s: DemoSettings, data_dir: Path, model_dir: Path) -> list[Job]:
    """The grid: one job per (rate, method) on the first RL seed, rate by rate (a rate's two runs side by side)."""
    return [_job(m, s, data_dir, model_dir, s.rl_seeds[0], lr) for lr in s.lr_grid for m in METHODS]


def seed_jobs(s: DemoSettings, data_dir: Path, model_dir: Path, chosen: dict[str, float]) -> list[Job]:
    """Every further RL seed: one job per method at its chosen rate, seed by seed."""
    return [_job(m, s, data_dir, model_dir, seed, chosen[m]) for seed in s.rl_seeds[1:] for m in METHODS]


def choose_rates(best: dict[str, dict[float, float | None]]) -> dict[str, float]:
    """Per method, the rate whose run reached the highest validation value (ties: the smaller rate).

    ``best[method][rate]`` is the run's best validation value of the primary metric (None: never validated,
    never chosen while another rate has a value). Validation values only: the test split is not read.
    """
    chosen = {}
    for method, values in best.items():
        scored = [(v if v is not None and v == v else -np.inf, -lr, lr) for lr, v in values.items()]
        chosen[method] = max(scored)[2]
    return chosen


def train_diagnostics(log_folder: Path) -> dict[str, Any]:
    """Training reward (mean, and mean over the first and the last ``window`` steps) and the mean share of
    zero-signal groups. ``window = min(10, max(1, steps // 2))``: the two windows never overlap, so a
    10-step run compares steps 1-5 with 6-10 rather than the same ten steps twice."""
    steps = read_progress(log_folder)
    window = min(10, max(1, len(steps) // 2))

    def mean(key: str) -> float | None:
        vals = [h[key] for h in steps if key in h and h[key] == h[key]]
        return float(np.mean(vals)) if vals else None

    head, tail = steps[:window], steps[-window:]
    return {
        "steps": len(steps),
        "reward_window": window,
        "reward_mean": mean("reward"),
        "reward_first": float(np.mean([h["reward"] for h in head])) if head else None,
        "reward_last": float(np.mean([h["reward"] for h in tail])) if tail else None,
        "zero_signal_frac_mean": mean("train/zero_signal_frac"),
    }
