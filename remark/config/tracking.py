"""Experiment-tracking fields: ``report_to``'s loggers installed, and the baseline run of steps-to-reach.

``report_to`` is TRL's / transformers' field: ``tensorboard`` writes event files under ``logging_dir``
(transformers' ``TensorBoardCallback``), ``wandb`` logs to Weights & Biases (``WANDB_MODE=offline`` keeps
the run local, ``wandb sync`` uploads it later). A logger that is not installed is an ``InputError``
naming the extra to install, before any model loads (transformers would fail at trainer construction).
``baseline_run`` must be a finished run's folder with an ``eval_log.jsonl`` (it acts only with
``validation_steps``: ``remark.config.effects``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError

#: report_to name -> (modules any one of which it needs, the extra that installs it)
LOGGERS = {
    "tensorboard": (("tensorboard", "tensorboardX"), "remark[tensorboard]"),
    "wandb": (("wandb",), "remark[wandb]"),
}


def _requested(report_to: Any) -> list[str]:
    if report_to is None:
        return []
    names = [report_to] if isinstance(report_to, str) else list(report_to)
    return [str(n) for n in names]


def validate_tracking(cfg: Any) -> None:
    """Check ``report_to``'s loggers are importable and ``baseline_run`` is usable."""
    for name in _requested(cfg.report_to):
        if name in LOGGERS:
            modules, extra = LOGGERS[name]
            if not any(importlib.util.find_spec(m) is not None for m in modules):
                raise InputError(
                    f"report_to asks for {name}, which is not installed",
                    field="report_to",
                    hint=f"pip install '{extra}', or drop {name} from report_to",
                )
    if cfg.baseline_run is None:  # without validation_steps it has no effect (remark.config.effects)
        return
    if not (Path(cfg.baseline_run) / "eval_log.jsonl").is_file():
        raise InputError(
            "the baseline run has no eval_log.jsonl",
            path=cfg.baseline_run,
            field="baseline_run",
            hint="name the output_dir of a run trained with validation_steps",
        )
