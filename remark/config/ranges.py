"""Ranges of the numeric config fields (remark's and the TRL / transformers ones a run commonly sets).

Checked after the types (``remark.config.fieldtypes``) and before any model loads. Each bound says why,
because the failures they prevent are late or silent: ``temperature: 0`` divides TRL's logits by zero,
``advantage_eps: 0`` turns the first zero-variance group into NaN advantages, ``max_steps: 0`` silently
falls back to ``num_train_epochs`` (a whole epoch instead of no training), a negative ``seed`` breaks
numpy's generator after the model has loaded. Every float field must be finite (YAML's ``.nan`` and
``.inf`` read as floats) unless its default is not.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from catalog.shared.errors import InputError


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` (``<`` where ``*_open``); None = unbounded on that side."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str | None = None

    def holds(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))

    def text(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {_num(self.low)}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {_num(self.high)}")
        return " and ".join(parts)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


POSITIVE = Bound(0, low_open=True)
AT_LEAST_0 = Bound(0)
AT_LEAST_1 = Bound(1)
UNIT = Bound(0, 1)
SEED = Bound(0, 2**32 - 1, why="numpy and torch seeds are unsigned 32-bit integers")

#: field -> its bound (fields set to None, where allowed, are not checked)
RANGES: dict[str, Bound] = {
    # optimisation (transformers.TrainingArguments)
    "learning_rate": Bound(0, low_open=True, why="the optimizer's step size"),
    "num_train_epochs": POSITIVE,
    "per_device_train_batch_size": AT_LEAST_1,
    "per_device_eval_batch_size": AT_LEAST_1,
    "gradient_accumulation_steps": AT_LEAST_1,
    "warmup_steps": AT_LEAST_0,
    "weight_decay": AT_LEAST_0,
    "max_grad_norm": AT_LEAST_0,
    "adam_beta1": Bound(0, 1, high_open=True),
    "adam_beta2": Bound(0, 1, high_open=True),
    "adam_epsilon": POSITIVE,
    "logging_steps": POSITIVE,
    "save_steps": POSITIVE,
    "eval_steps": POSITIVE,
    "seed": SEED,
    "data_seed": SEED,
    "dataloader_num_workers": AT_LEAST_0,
    # generation and the GRPO loss (trl.GRPOConfig)
    "temperature": Bound(
        0, low_open=True, why="TRL divides the logits by it; for near-greedy sampling use e.g. 0.1"
    ),
    "top_p": Bound(0, 1, low_open=True),
    "top_k": AT_LEAST_0,
    "min_p": UNIT,
    "repetition_penalty": POSITIVE,
    "num_generations_eval": AT_LEAST_1,
    "generation_batch_size": AT_LEAST_1,
    "steps_per_generation": AT_LEAST_1,
    "max_completion_length": AT_LEAST_1,
    "num_iterations": Bound(1, why="policy updates per generation batch"),
    "beta": Bound(0, why="the KL coefficient; 0 turns the KL term off"),
    "epsilon": Bound(0, low_open=True, why="the clip range's lower width"),
    "epsilon_high": Bound(0, low_open=True, why="the clip range's upper width"),
    "delta": Bound(1, low_open=True, why="the two-sided clip's upper bound on the ratio itself"),
    "vllm_gpu_memory_utilization": Bound(0, 1, low_open=True),
    "ref_model_mixup_alpha": UNIT,
    "ref_model_sync_steps": AT_LEAST_1,
    "top_entropy_quantile": UNIT,
    # remark's own (the rest are checked with their combinations in remark.config.validate)
    "validation_batch_size": AT_LEAST_1,
    "scoring_workers": AT_LEAST_0,
    "cpu_threads": AT_LEAST_1,
    "validation_max_requests": AT_LEAST_1,
    "divergence_kl": POSITIVE,
    "divergence_log_ratio": POSITIVE,
    "vllm_kv_cache_gib": Bound(0, low_open=True, why="the colocated vLLM engine's KV cache, in GiB"),
}


def _fail(name: str, value: Any, bound: Bound) -> InputError:
    return InputError(f"{name}={value!r} must be {bound.text()}", field=name, hint=bound.why)


def check_ranges(cfg: Any) -> None:
    """Raise ``InputError`` for the first numeric field out of range, not finite, or contradicting another."""
    for name, bound in RANGES.items():
        value = getattr(cfg, name, None)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and (not math.isfinite(value) or not bound.holds(value)):
            raise _fail(name, value, bound)
    _finite_floats(cfg)
    steps = getattr(cfg, "max_steps", -1)
    if steps != -1 and steps < 1:
        raise InputError(
            f"max_steps={steps} must be >= 1, or -1 to train for num_train_epochs",
            field="max_steps",
            hint="transformers reads max_steps <= 0 as 'use num_train_epochs', which trains a whole epoch",
        )
    scaling = getattr(cfg, "advantage_scaling", None)
    eps = getattr(cfg, "advantage_eps", None)
    number = isinstance(eps, int | float) and not isinstance(eps, bool)
    if number and scaling in ("group", "batch") and not eps > 0:
        raise InputError(
            f"advantage_eps={eps!r} must be > 0 with advantage_scaling={scaling!r}",
            field="advantage_eps",
            hint="a group whose G rewards are all equal has std 0; with eps 0 its advantages are 0/0 = NaN "
            "(Rank-GRPO uses 1e-4)",
        )
    _check_report_to(getattr(cfg, "report_to", None))


def _finite_floats(cfg: Any) -> None:
    if not dataclasses.is_dataclass(cfg):
        return
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name, None)
        if isinstance(value, float) and not math.isfinite(value) and value != f.default:
            raise InputError(f"{f.name}={value!r} is not a finite number", field=f.name)


def _check_report_to(value: Any) -> None:
    """transformers fails with a KeyError traceback at trainer creation on an unknown integration name."""
    if value is None:
        return
    names = [value] if isinstance(value, str) else list(value)
    if names in (["all"], ["none"]):
        return
    try:
        from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK
    except ImportError:  # a transformers without the table: leave the names to it
        return
    valid = sorted(INTEGRATION_TO_CALLBACK)
    for name in names:
        if name not in valid:
            raise InputError(
                f"unknown report_to integration {name!r}",
                field="report_to",
                hint=f"use none, all, or some of {', '.join(valid)}",
            )
