"""``--resume`` continues the run that was saved, not another one: the new config is compared field by field
with the one the checkpoint was trained with.

The checkpoint's optimizer state, learning-rate schedule, sampler position and rewards belong to the
settings that produced them. A resume that changed ``reward_scheme`` or ``learning_rate`` would train the
remaining steps as a different method (and the restored scheduler would keep the old learning rate anyway),
while the run's record said the new values held throughout. So every field is compared, and a change is
refused (``InputError`` on ``--resume``, one line naming each changed field with its saved and new value)
unless the field is in :data:`RESUMABLE`: the run's length (``max_steps``), the logging, validation and
checkpoint cadence, and where output goes or how many threads do the work (nothing that changes what is
learned). Those changes are recorded: :func:`resume_record` appends one entry per resume to the
``resumes`` list of ``remark_config.json`` (the step, the checkpoint, each changed field as
``[saved, new]``, the command), which otherwise holds the config that ran.

What ran is read from the checkpoint's ``training_args.json`` (written with every checkpoint), else the run's
``remark_config.json``. Path fields are compared as absolute paths. The fields the group-size advisor sets
on resume (``adapt_group_size``, ``remark.planning.adaptive``) are its to change, so they are not compared
when it is on. A field the saved config does not hold (written by an older remark) is not compared.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError

#: fields a resume may change (and records): the run's length, cadence, outputs and resources.
RESUMABLE = frozenset(
    {
        "max_steps",
        "logging_steps", "logging_first_step", "logging_strategy", "logging_dir", "logging_nan_inf_filter",
        "log_level", "log_level_replica", "log_on_each_node", "log_completions", "num_completions_to_print",
        "disable_tqdm", "report_to", "run_name", "project", "trackio_space_id",
        "validation_steps", "validation_batch_size",
        "save_steps", "save_strategy", "save_total_limit", "save_on_each_node", "save_only_model",
        "eval_steps", "eval_strategy", "eval_delay",
        "cpu_threads", "scoring_workers", "dataloader_num_workers", "dataloader_pin_memory",
        "dataloader_persistent_workers", "dataloader_prefetch_factor",
        "resume_from_checkpoint", "overwrite_output_dir", "output_dir",
        "push_to_hub", "hub_model_id", "hub_strategy", "hub_token", "hub_private_repo", "hub_always_push",
        "hub_revision",
    }
)  # fmt: skip
#: path-valued fields, compared as absolute paths
PATH_FIELDS = (
    "data_dir",
    "validation_data_dir",
    "model_name_or_path",
    "adapter_base_model",
    "baseline_run",
    "group_size_profile",
)
#: what the group-size advisor changes on resume when ``adapt_group_size`` is on
ADVISOR_FIELDS = (
    "num_generations",
    "per_device_train_batch_size",
    "generation_batch_size",
    "steps_per_generation",
    "ignore_data_skip",
)
RECORD = "remark_config.json"
TRAINING_ARGS = "training_args.json"


def saved_config(output_dir: str | Path, checkpoint: str | Path) -> tuple[dict[str, Any], Path] | None:
    """(the config the checkpoint was trained with, the file it was read from), or None when neither the
    checkpoint's ``training_args.json`` nor the run's ``remark_config.json`` holds one."""
    for path in (Path(checkpoint) / TRAINING_ARGS, Path(output_dir) / RECORD):
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(value, dict) and value:
            return value, path
    return None


def _same(name: str, old: Any, new: Any) -> bool:
    if old == new:
        return True
    if name in PATH_FIELDS and isinstance(old, str) and isinstance(new, str):
        return os.path.realpath(os.path.expanduser(old)) == os.path.realpath(os.path.expanduser(new))
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(old, bool):
        return float(old) == float(new)
    return False


def resume_changes(saved: dict[str, Any], asked: dict[str, Any]) -> tuple[dict[str, list], dict[str, list]]:
    """``(refused, allowed)``: the fields whose value differs between ``saved`` and ``asked`` (both as
    ``to_dict`` / JSON gives them), each ``name -> [saved, asked]``, split by :data:`RESUMABLE`."""
    skip = set(ADVISOR_FIELDS) if asked.get("group_size_profile") and asked.get("adapt_group_size") else set()
    refused: dict[str, list] = {}
    allowed: dict[str, list] = {}
    for name, new in asked.items():
        if name.startswith("_") or name in skip or name not in saved:
            continue
        old = saved[name]
        if _same(name, old, new):
            continue
        (allowed if name in RESUMABLE else refused)[name] = [old, new]
    return refused, allowed


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_resume(cfg_dict: dict[str, Any], output_dir: str | Path, checkpoint: str | Path) -> dict[str, list]:
    """Refuse (``InputError``, one line naming every changed field) a resume whose config changes a field
    that defines the run; return the allowed changes (``name -> [saved, new]``) to record."""
    found = saved_config(output_dir, checkpoint)
    if found is None:
        return {}
    saved, source = found
    refused, allowed = resume_changes(saved, cfg_dict)
    if refused:
        listed = "; ".join(f"{n} {_show(o)} -> {_show(v)}" for n, (o, v) in sorted(refused.items()))
        raise InputError(
            f"--resume would continue {Path(checkpoint).name} with settings that define the run changed "
            f"({listed}); its optimizer, schedule and rewards belong to the saved ones",
            path=source,
            field="--resume",
            hint="resume with the saved settings (max_steps and the logging, validation and checkpoint "
            "cadence may change), or start a new run in another output_dir",
        )
    return allowed


def resume_record(
    output_dir: str | Path, checkpoint: str | Path, allowed: dict[str, list], command: str | None
) -> list[dict[str, Any]]:
    """The ``resumes`` list for ``remark_config.json``: the earlier entries the run's record holds, plus one
    for this resume (step, checkpoint, changed fields ``[saved, new]``, command)."""
    earlier: list[dict[str, Any]] = []
    try:
        record = json.loads((Path(output_dir) / RECORD).read_text(encoding="utf-8"))
        if isinstance(record, dict) and isinstance(record.get("resumes"), list):
            earlier = record["resumes"]
    except (OSError, ValueError):
        pass
    try:
        state = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
        step = state.get("global_step") if isinstance(state, dict) else None
    except (OSError, ValueError):
        step = None
    entry = {"step": step, "checkpoint": Path(checkpoint).name, "changed": allowed, "command": command}
    return [*earlier, entry]
