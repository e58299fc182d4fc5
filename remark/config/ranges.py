"""The one table of numeric ranges: every numeric config field and every numeric command-line flag.

:data:`RANGES` maps a name to its :class:`Bound`. A name is a config field (``seed``), a key of a
mapping field (``build_tiny.n_requests``, ``build_tiny.spec.hidden_size``), or a flag (``--seed``; a flag
whose range depends on the command is spelled with it: ``eval --k``). Config values are checked by
:func:`check_ranges` (after the types, ``remark.config.fieldtypes``, before any model loads); flags get
their argparse type from :func:`flag_type`, so a bad value is refused by argparse (exit 2, one line naming
the flag, the value and the range) before a command starts. Other parsers of
numbers (``--split-fractions``, ``--candidates``, ``--curve``) call :func:`check_number`.

Each bound says why where the failure it prevents is late or silent: ``temperature: 0`` divides TRL's
logits by zero, ``advantage_eps: 0`` turns the first zero-variance group into NaN advantages,
``max_steps: 0`` silently falls back to ``num_train_epochs`` (a whole epoch instead of no training), a
negative seed breaks numpy's generator after the model has loaded, ``--level 1`` asks the profile
interval for a NaN threshold. Every number must be finite (YAML's ``.nan`` and ``.inf`` read as floats;
``float("nan")`` parses) unless a float field's default is not.

This module imports nothing heavy (``remark --help`` reads it through every command's flags).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from catalog.io.errors import InputError


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` (``<`` where ``*_open``); None = unbounded on that side. ``kind`` is what
    a flag parses (``int`` or ``float``; config fields take their annotation's)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str | None = None
    kind: type = float

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))

    def text(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {_num(self.low)}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {_num(self.high)}")
        return " and ".join(parts) if parts else "a finite number"

    def outside(self) -> float | str:
        """A value this bound refuses (tests use it): just below ``low``, else just above ``high``, else NaN."""
        step = 1 if self.kind is int else 0.5
        if self.low is not None:
            return self.low if self.low_open else self.low - step
        if self.high is not None:
            return self.high if self.high_open else self.high + step
        return "nan"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _int(bound: Bound) -> Bound:
    return dataclasses.replace(bound, kind=int)


POSITIVE = Bound(0, low_open=True)
AT_LEAST_0 = Bound(0)
UNIT = Bound(0, 1)
OPEN_UNIT = Bound(0, 1, low_open=True, high_open=True)
FINITE = Bound()
INT_0 = _int(AT_LEAST_0)
INT_1 = Bound(1, kind=int)
SEED = Bound(0, 2**32 - 1, why="numpy and torch seeds are unsigned 32-bit integers", kind=int)
PORT = Bound(1, 65535, kind=int)
#: a bootstrap or profile interval's coverage
LEVEL = dataclasses.replace(OPEN_UNIT, why="an interval's coverage, e.g. 0.95")
#: ``remark eval``'s cut-offs (eval.metrics.MAX_K; spelled out so that ``remark --help`` imports no numpy)
MAX_K = 50
#: the synthetic world needs a few items per genre (data_prep.synthetic.generate_world)
MIN_SYNTHETIC_ITEMS = 20

#: name -> its bound (config fields set to None, where allowed, are not checked)
RANGES: dict[str, Bound] = {
    # --- config: optimisation (transformers.TrainingArguments) ---------------------------------------
    "learning_rate": Bound(0, low_open=True, why="the optimizer's step size"),
    "num_train_epochs": POSITIVE,
    "per_device_train_batch_size": INT_1,
    "per_device_eval_batch_size": INT_1,
    "gradient_accumulation_steps": INT_1,
    "warmup_steps": AT_LEAST_0,
    "weight_decay": AT_LEAST_0,
    "max_grad_norm": AT_LEAST_0,
    "adam_beta1": Bound(0, 1, high_open=True),
    "adam_beta2": Bound(0, 1, high_open=True),
    "adam_epsilon": POSITIVE,
    "logging_steps": POSITIVE,
    "save_steps": POSITIVE,
    "save_total_limit": INT_1,
    "eval_steps": POSITIVE,
    "seed": SEED,
    "data_seed": SEED,
    "dataloader_num_workers": INT_0,
    # --- config: generation and the GRPO loss (trl.GRPOConfig) ---------------------------------------
    "temperature": Bound(
        0, low_open=True, why="TRL divides the logits by it; for near-greedy sampling use e.g. 0.1"
    ),
    "top_p": Bound(0, 1, low_open=True),
    "top_k": INT_0,
    "min_p": UNIT,
    "repetition_penalty": POSITIVE,
    "num_generations": Bound(2, why="group advantages compare G >= 2 lists of one request", kind=int),
    "num_generations_eval": INT_1,
    "generation_batch_size": INT_1,
    "steps_per_generation": INT_1,
    "max_completion_length": INT_1,
    "num_iterations": Bound(1, why="policy updates per generation batch", kind=int),
    "beta": Bound(0, why="the KL coefficient; 0 turns the KL term off"),
    "epsilon": Bound(0, low_open=True, why="the clip range's lower width"),
    "epsilon_high": Bound(0, low_open=True, why="the clip range's upper width"),
    "delta": Bound(1, low_open=True, why="the two-sided clip's upper bound on the ratio itself"),
    "sapo_temperature_pos": POSITIVE,
    "sapo_temperature_neg": POSITIVE,
    "vespo_k_pos": AT_LEAST_0,
    "vespo_k_neg": AT_LEAST_0,
    "vespo_lambda_pos": AT_LEAST_0,
    "vespo_lambda_neg": AT_LEAST_0,
    "off_policy_mask_threshold": Bound(
        0, low_open=True, why="DeepSeek-V3.2's delta, e.g. 0.5; null turns the mask off"
    ),
    "vllm_gpu_memory_utilization": Bound(0, 1, low_open=True),
    "vllm_tensor_parallel_size": INT_1,
    "vllm_max_model_length": INT_1,
    "vllm_server_port": PORT,
    "vllm_group_port": PORT,
    "vllm_server_timeout": POSITIVE,
    "vllm_importance_sampling_clip_max": POSITIVE,
    "vllm_importance_sampling_clip_min": AT_LEAST_0,
    "ref_model_mixup_alpha": UNIT,
    "ref_model_sync_steps": INT_1,
    "top_entropy_quantile": UNIT,
    "entropy_coef": AT_LEAST_0,
    # --- config: remark's own ---------------------------------------------------------------------------
    "num_ranks": Bound(1, why="K, the list length", kind=int),
    "advantage_eps": AT_LEAST_0,
    "year_tolerance": Bound(0, why="years a title may be off (+-)", kind=int),
    "match_threshold": Bound(0, 100, why="rapidfuzz scores are in [0, 100]"),
    "pass_rate_drop": Bound(0, 1, low_open=True, why="a pass rate in (0, 1], e.g. 0.9"),
    "refill_max_rounds": INT_1,
    "scoring_workers": INT_0,
    "cpu_threads": INT_1,
    "validation_steps": Bound(0, why="0 turns validation off", kind=int),
    "validation_max_requests": INT_1,
    "validation_batch_size": INT_1,
    "validation_num_samples": INT_0,
    "validation_temperature": Bound(0, low_open=True, why="the sampled lists' temperature"),
    "divergence_kl": POSITIVE,
    "divergence_log_ratio": POSITIVE,
    "vllm_kv_cache_gib": Bound(0, low_open=True, why="the colocated vLLM engine's KV cache, in GiB"),
    "group_size_memory_budget_gb": POSITIVE,
    "group_size_every": INT_1,
    "group_size_candidates": Bound(2, why="each is a group size G >= 2", kind=int),
    "lora_r": Bound(1, why="the adapter's rank, e.g. 16", kind=int),
    "lora_alpha": Bound(0, low_open=True, why="e.g. 2 x lora_r"),
    "lora_dropout": Bound(0, 1, high_open=True, why="a dropout probability, e.g. 0.05"),
    # --- config: build_tiny's keys (remark.config.tiny.TINY_DEFAULTS) ----------------------------------
    "build_tiny.n_requests": INT_1,
    "build_tiny.n_items": Bound(MIN_SYNTHETIC_ITEMS, why="the synthetic world's genres need them", kind=int),
    "build_tiny.relevant_size": Bound(1, why="[min, max] relevant items per request", kind=int),
    "build_tiny.seed": SEED,
    "build_tiny.sft_epochs": POSITIVE,
    "build_tiny.sft_lr": POSITIVE,
    "build_tiny.spec.vocab_size": Bound(64, why="the tokenizer needs its specials and the bytes", kind=int),
    "build_tiny.spec.hidden_size": INT_1,
    "build_tiny.spec.intermediate_size": INT_1,
    "build_tiny.spec.num_hidden_layers": INT_1,
    "build_tiny.spec.num_attention_heads": INT_1,
    "build_tiny.spec.num_key_value_heads": INT_1,
    "build_tiny.spec.max_position_embeddings": INT_1,
    # --- flags ------------------------------------------------------------------------------------------
    "--seed": SEED,
    "--seeds": SEED,
    "--split-seed": SEED,
    "--gen-seed": SEED,
    "--n-requests": INT_1,
    "--n-items": Bound(MIN_SYNTHETIC_ITEMS, why="the synthetic world's genres need them", kind=int),
    "--split-fractions": Bound(0, 1, why="each split's share of the requests; they sum to 1"),
    "--year-tolerance": Bound(0, why="years a title may be off (+-)", kind=int),
    "--match-threshold": Bound(0, 100, why="rapidfuzz scores are in [0, 100]"),
    "--k": Bound(1, why="K, the list length", kind=int),
    "eval --k": Bound(1, MAX_K, why="the metrics' cut-offs", kind=int),
    "--group-size": Bound(2, why="group advantages compare G >= 2 lists of one request", kind=int),
    "--candidates": Bound(2, why="each is a group size G >= 2", kind=int),
    "--batch-size": INT_1,
    "--resamples": Bound(1, why="bootstrap resamples, e.g. 9999", kind=int),
    "--confidence": LEVEL,
    "--level": LEVEL,
    "--num-samples": INT_0,
    "--temperature": Bound(0, low_open=True, why="sampling divides the logits by it"),
    "--top-p": Bound(0, 1, low_open=True, why="the nucleus' probability mass"),
    "--max-new-tokens": INT_1,
    "--limit": INT_1,
    "--step": Bound(0, why="a validation step of the baseline run", kind=int),
    "--hit-prob": Bound(0, 1, why="the chance a slot is a true item"),
    "--copies": INT_1,
    "--lr": Bound(0, low_open=True, why="the optimizer's step size"),
    "--epochs": POSITIVE,
    "--max-steps": INT_1,
    "--lora-r": Bound(1, why="the adapter's rank, e.g. 16", kind=int),
    "--lora-alpha": Bound(0, low_open=True, why="e.g. 2 x --lora-r"),
    "--lora-dropout": Bound(0, 1, high_open=True, why="a dropout probability, e.g. 0.05"),
    "--memory-budget": POSITIVE,
    "--r0": Bound(why="a score, like the eval log's"),
    "--a": Bound(why="the ceiling, a score"),
    "--b": Bound(0, low_open=True, why="the curve's efficiency exponent"),
    "--c-mid": Bound(0, low_open=True, why="the compute at half the gain"),
    "--at": Bound(0, why="compute values"),
    "--min-x": Bound(0, why="compute"),
    "--steps": INT_1,
    "--threads": INT_1,
    "--warmup-threads": INT_1,
    "--jobs": INT_1,
    "--lr-grid": Bound(0, 1, low_open=True, high_open=True, why="learning rates tried per method"),
}


def _fail(name: str, value: Any, bound: Bound) -> InputError:
    return InputError(f"{name}={value!r} must be {bound.text()}", field=name, hint=bound.why)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_number(name: str, value: Any, *, field: str | None = None) -> None:
    """Raise ``InputError(field=field or name)`` unless ``value`` is within ``RANGES[name]`` (and finite).
    Non-numbers are left to the type checks."""
    bound = RANGES[name]
    if _is_number(value) and not bound.holds(value):
        err = _fail(name, value, bound)
        raise InputError(err.message, field=field or name, hint=err.hint)


def _config_names() -> Iterable[str]:
    return (n for n in RANGES if not n.startswith("--") and " " not in n and "." not in n)


def check_ranges(cfg: Any) -> None:
    """Raise ``InputError`` for the first numeric field out of range, not finite, or contradicting another
    (a list field: each of its numbers; ``build_tiny``: each of its keys in the table)."""
    for name in _config_names():
        value = getattr(cfg, name, None)
        for item in value if isinstance(value, list | tuple) else [value]:
            if _is_number(item) and not RANGES[name].holds(item):
                raise _fail(name, value, RANGES[name])
    check_build_tiny_ranges(getattr(cfg, "build_tiny", None))
    _finite_floats(cfg)
    steps = getattr(cfg, "max_steps", -1)
    if _is_number(steps) and steps != -1 and steps < 1:
        raise InputError(
            f"max_steps={steps} must be >= 1, or -1 to train for num_train_epochs",
            field="max_steps",
            hint="transformers reads max_steps <= 0 as 'use num_train_epochs', which trains a whole epoch",
        )
    scaling = getattr(cfg, "advantage_scaling", None)
    eps = getattr(cfg, "advantage_eps", None)
    if _is_number(eps) and scaling in ("group", "batch") and not eps > 0:
        raise InputError(
            f"advantage_eps={eps!r} must be > 0 with advantage_scaling={scaling!r}",
            field="advantage_eps",
            hint="a group whose G rewards are all equal has std 0; with eps 0 its advantages are 0/0 = NaN "
            "(Rank-GRPO uses 1e-4)",
        )
    _check_report_to(getattr(cfg, "report_to", None))


def check_build_tiny_ranges(opts: Any) -> None:
    """Each numeric key of a ``build_tiny`` mapping within its ``build_tiny.KEY`` row (``spec`` one level
    down), and ``relevant_size`` as ``[min, max]`` with min <= max."""
    if not isinstance(opts, dict):
        return
    for prefix, mapping in (("build_tiny", opts), ("build_tiny.spec", opts.get("spec"))):
        if not isinstance(mapping, dict):
            continue
        for key, value in mapping.items():
            name = f"{prefix}.{key}"
            if name not in RANGES:
                continue
            for item in value if isinstance(value, list | tuple) else [value]:
                if _is_number(item) and not RANGES[name].holds(item):
                    raise InputError(
                        f"{name}={value!r} must be {RANGES[name].text()}",
                        field="build_tiny",
                        hint=RANGES[name].why,
                    )
    size = opts.get("relevant_size")
    if isinstance(size, list | tuple) and (
        len(size) != 2 or (all(_is_number(s) for s in size) and size[0] > size[1])
    ):
        raise InputError(
            f"build_tiny.relevant_size={list(size)!r} must be [min, max] with min <= max", field="build_tiny"
        )


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


# --- command-line flags ------------------------------------------------------------------------------


def parse_number(text: str, kind: type) -> float:
    """``text`` as ``kind`` (int or a finite float), or ``argparse.ArgumentTypeError`` saying what it is not."""
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not {'an integer' if kind is int else 'a number'}"
        ) from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def flag_type(name: str) -> Callable[[str], Any]:
    """The argparse ``type`` of the flag ``name`` (a key of :data:`RANGES`): parses ``int`` or ``float``
    as the row says and refuses a value outside the row's bound, naming the value and the range."""
    bound = RANGES[name]

    def parse(text: str) -> Any:
        value = parse_number(text, bound.kind)
        if not bound.holds(value):
            why = f" ({bound.why})" if bound.why else ""
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: must be {bound.text()}{why}")
        return value

    parse.range_key = name  # type: ignore[attr-defined]  (tests/remark/test_ranges.py reads it)
    parse.__name__ = "an integer" if bound.kind is int else "a number"
    return parse
