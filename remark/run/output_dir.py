"""A run's ``output_dir`` before training starts: a folder a run may not write into refused, the checkpoint
to resume from (``--resume``), a finished run left alone, and the group size a resumed run continues with.
(What a run writes and owns there, a previous run refused or cleared: ``remark.run.run_files``.)

A run writes many files into ``output_dir``, so ``output_dir`` may not be another command's output or an
input (:func:`check_run_dir`, nothing overrides it): not a folder written whole by
``catalog.io.outputs.atomic_dir`` nor inside one (a dataset, a model, ``best/``, a score folder), not a
prepared dataset or a model folder without that marker, and not one of the run's inputs (``data_dir``, the
model, ``validation_data_dir``, ``baseline_run``, the config file) nor inside one. Nor may an input lie
inside what the run writes or replaces in ``output_dir`` (``eval/``, ``final/``, ``best/``, ``sampled/``,
``checkpoint-N/``, ... ``remark.run.run_files.run_writes``): a dataset kept as ``output_dir/eval`` would be
written into, and removed by ``--overwrite``. A ``README.md`` the run did not write is refused up front
(``remark.run.run_files.write_run_card``).

``resume=True`` takes the newest *complete* and sound checkpoint (``remark.step.checkpoint``: marker,
sizes, a trial read of its JSON files and safetensors headers, content hashes, and no file in a pickle
format), printing the incomplete or damaged ones it skipped and why; an explicit checkpoint that is
incomplete or damaged, a checkpoint holding a pickle file, or no checkpoint at all, is an ``InputError``.

Resume means continue (:func:`finished_run`): a run whose ``train_summary.json`` and ``final/`` say it
reached its ``max_steps`` (the one asked for now, or the one it was planned with when ``max_steps`` is -1)
is not trained again: ``--resume`` says so and writes nothing (``final/`` stays byte for byte), with exit
status 0 (the state asked for holds already, so a scheduler that re-runs a finished job sees success, not
an error); a changed setting that defines the run (``remark.run.resume_check``) is refused there too, as
for any resume. A ``max_steps`` above the step reached continues, and says from where to where.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from catalog.io.outputs import output_kind, owning_output
from remark.run.run_files import (
    DATASET_FILES,
    FINAL_KIND,
    MODEL_FILES,
    RUN_CARD,
    describe_kind,
    run_card_is_ours,
    run_writes,
)
from remark.step.checkpoint import checkpoint_problem, pickle_problem, select_checkpoint

#: the settings ``remark.run.training`` passes to :func:`check_run_dir` as ``inputs``, in that order.
INPUT_FIELDS = ("data_dir", "model_name_or_path", "adapter_base_model", "validation_data_dir", "baseline_run")


def command_inputs(command: str | None = None) -> dict[str, str]:
    """The files a ``remark train`` command line reads (``--config FILE``, a ``--recipe`` given as a file),
    as ``{flag: path}``; ``command`` defaults to this process's (``catalog.io.locks.current_command``)."""
    import shlex

    from catalog.io.locks import current_command

    try:
        words = shlex.split(command if command is not None else current_command())
    except ValueError:
        return {}
    if "train" not in words:
        return {}
    found: dict[str, str] = {}
    for i, word in enumerate(words):
        for flag in ("--config", "--recipe"):
            value = None
            if word == flag and i + 1 < len(words):
                value = words[i + 1]
            elif word.startswith(flag + "="):
                value = word.split("=", 1)[1]
            if value and Path(value).is_file():
                found[flag] = value
    return found


def _named_inputs(
    inputs: Sequence[str | Path | None] | dict[str, str | Path | None],
) -> list[tuple[str, Any]]:
    if isinstance(inputs, dict):
        named = list(inputs.items())
    else:
        items = list(inputs)
        fields = INPUT_FIELDS if len(items) == len(INPUT_FIELDS) else ("input",) * len(items)
        named = list(zip(fields, items, strict=True))
    return named + list(command_inputs().items())


def check_run_dir(
    output_dir: str | Path, inputs: Sequence[str | Path | None] | dict[str, str | Path | None] = ()
) -> None:
    """Refuse (``InputError``, before anything loads) an ``output_dir`` a run may not write into (see the
    module docstring); ``inputs`` are the run's input paths (hub ids and None are skipped): a mapping
    ``{setting: path}``, or the values of :data:`INPUT_FIELDS` in that order. The files the command line
    reads (:func:`command_inputs`) are inputs too."""
    root = Path(output_dir)
    here = Path(os.path.abspath(root)).resolve()
    for name, item in _named_inputs(inputs):
        if item is None or not Path(item).exists():
            continue
        other = Path(os.path.abspath(item)).resolve()
        if other != here and other.is_relative_to(here):
            top = other.relative_to(here).parts[0]
            if run_writes(top):
                how = "is" if other == here / top else "lies inside"
                raise InputError(
                    f"{name} {how} {root / top}, which the run writes (and --overwrite removes): the run "
                    "would change or delete its own input",
                    path=item,
                    field=name,
                    hint=f"move {name} out of output_dir, or set output_dir to a folder of its own",
                )
            continue
        if here == other or here.is_relative_to(other):
            how = "is" if here == other else "lies inside"
            raise InputError(
                f"output_dir {how} the run's input {item}; the run's files would be written into it",
                path=output_dir,
                field="output_dir",
                hint="set output_dir to a folder of its own, e.g. runs/NAME; --overwrite does not override this",
            )
    owner = owning_output(root)
    if owner is not None:
        folder, kind = owner
        where = "is" if folder == Path(os.path.abspath(root)) else f"lies inside {folder},"
        raise InputError(
            f"output_dir {where} the output of {kind!r} ({describe_kind(kind)}); a run's files would change it",
            path=output_dir,
            field="output_dir",
            hint="set output_dir to a folder of its own, e.g. runs/NAME; --overwrite does not override this",
        )
    what = None
    if all((root / name).is_file() for name in DATASET_FILES):
        what = "a prepared dataset (meta.json, requests.parquet)"
    elif (root / "config.json").is_file() and any((root / name).is_file() for name in MODEL_FILES):
        what = "a model folder (config.json and weights)"
    elif (root / "adapter_config.json").is_file():
        what = "an adapter folder (adapter_config.json)"
    if what is not None:
        raise InputError(
            f"output_dir is {what}; a run's files would be written into it",
            path=output_dir,
            field="output_dir",
            hint="set output_dir to a folder of its own, e.g. runs/NAME; --overwrite does not override this",
        )
    if not run_card_is_ours(root):
        raise InputError(
            "refusing to replace a file that remark did not write (a run writes TRL's draft model card "
            "there at each checkpoint)",
            path=root / RUN_CARD,
            field="output_dir",
            hint="move or rename your README.md, or set another output_dir; the run's own cards are "
            "best/README.md and final/README.md",
        )


def _valid_group_sizes(cfg: Any, limit: int = 64) -> list[int]:
    """G in 2..limit for which the same requests per step fill whole per-device batches (see resume)."""
    requests = cfg.generation_batch_size // cfg.num_generations
    per_step = cfg.world_size * cfg.steps_per_generation
    return [g for g in range(2, limit + 1) if (requests * g) % per_step == 0]


def resume_checkpoint(output_dir: str | Path, resume: str | bool | None) -> Path | None:
    """The checkpoint to resume from: ``resume`` itself (a path, which must be complete and sound) or, for
    True, the newest sound one in ``output_dir``, printing the incomplete or damaged ones it skipped."""
    if resume is None or resume is False:
        return None
    main = int(os.environ.get("RANK", "0")) == 0
    if resume is not True:
        problem = checkpoint_problem(resume)
        if problem is not None:
            newest, _ = select_checkpoint(Path(resume).parent)
            raise InputError(
                f"cannot resume from this checkpoint: {problem}",
                path=resume,
                field="--resume",
                hint=f"resume from {newest}, the newest complete one"
                if newest is not None
                else "pass --resume alone to take the newest complete checkpoint in output_dir",
            )
        _refuse_pickle(resume)
        if main:
            print(f"resume: from {resume}")
        return Path(resume)
    chosen, skipped = select_checkpoint(output_dir)
    for path, why in skipped:
        if main:
            print(f"resume: skipped {path.name}: {why}")
    if chosen is None:
        raise InputError(
            "no complete checkpoint to resume from"
            + (
                f" ({len(skipped)} incomplete or damaged, listed above)"
                if skipped
                else " (there is no checkpoint-N)"
            ),
            path=output_dir,
            field="--resume",
            hint="start the run without --resume; checkpoints are written every save_steps",
        )
    _refuse_pickle(chosen)
    if main:
        print(f"resume: from {chosen}")
    return chosen


def _refuse_pickle(checkpoint: str | Path) -> None:
    """``InputError`` (one line: the file, what to do) when ``checkpoint`` holds a file in a pickle format:
    resume reads only what remark writes (``remark.step.checkpoint.pickle_problem``)."""
    found = pickle_problem(checkpoint)
    if found is not None:
        path, why, hint = found
        raise InputError(why, path=path, field="--resume", hint=hint)


def _read_json(path: Path) -> dict[str, Any] | None:
    import json

    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def planned_steps(output_dir: str | Path, max_steps: int) -> int | None:
    """The step count the run trains to: ``max_steps`` when > 0, else what the run itself recorded (its
    summary's ``max_steps``, or its newest checkpoint's ``trainer_state.json``), None when nothing says."""
    if max_steps > 0:
        return max_steps
    root = Path(output_dir)
    summary = _read_json(root / "train_summary.json") or {}
    if isinstance(summary.get("max_steps"), int):
        return summary["max_steps"]
    chosen, _ = select_checkpoint(root)
    state = _read_json(chosen / "trainer_state.json") if chosen is not None else None
    return state.get("max_steps") if state and isinstance(state.get("max_steps"), int) else None


def finished_run(output_dir: str | Path, max_steps: int) -> dict[str, Any] | None:
    """The ``train_summary.json`` of a run in ``output_dir`` that already reached ``max_steps`` (its
    ``final/`` complete), else None: what ``--resume`` must leave alone (see the module docstring)."""
    root = Path(output_dir)
    summary = _read_json(root / "train_summary.json")
    if summary is None or output_kind(root / "final") != FINAL_KIND:
        return None
    step, target = summary.get("global_step"), planned_steps(root, max_steps)
    if not isinstance(step, int) or target is None or step < target:
        return None
    return summary


def resume_message(output_dir: str | Path, max_steps: int, checkpoint: Path) -> str | None:
    """What a resume from ``checkpoint`` trains, when ``max_steps`` differs from the run's own plan."""
    state = _read_json(Path(checkpoint) / "trainer_state.json") or {}
    step, planned = state.get("global_step"), state.get("max_steps")
    if not isinstance(step, int) or not isinstance(planned, int) or max_steps <= 0:
        return None
    if step >= max_steps:  # a run killed after its last checkpoint, before final/: nothing left to train
        return (
            f"resume: {Path(checkpoint).name} is at step {step}, already at max_steps={max_steps}: nothing to "
            "train; final/ and train_summary.json are written from it"
        )
    if max_steps == planned:
        return None
    change = "raised" if max_steps > planned else "lowered"
    return (
        f"resume: max_steps {change} from {planned} (the run's plan) to {max_steps}: training steps "
        f"{step + 1} to {max_steps}"
        + (
            "; final/ and train_summary.json are replaced at the end"
            if (Path(output_dir) / "final").exists()
            else ""
        )
    )


def resume_group_size(cfg: Any, checkpoint: Path) -> Any:
    """Apply a checkpoint's group-size recommendation (``remark.planning.adaptive``) before training resumes.

    Requests per step stay fixed: the generation batch becomes requests x new G, spread over the same
    processes and generation steps. When G changes, the data sampler's saved position no longer means
    the same thing, so ``ignore_data_skip`` is set.
    """
    import dataclasses

    from remark.planning.adaptive import resolve_group_size

    group, note = resolve_group_size(cfg.num_generations, checkpoint, adapt=cfg.adapt_group_size)
    print(note)
    if group == cfg.num_generations:
        return cfg
    requests = cfg.generation_batch_size // cfg.num_generations
    per_step = cfg.world_size * cfg.steps_per_generation
    if (requests * group) % per_step:
        raise InputError(
            f"{requests} requests x G = {group} completions do not split over {cfg.world_size} process(es) x "
            f"{cfg.steps_per_generation} generation step(s)",
            field="adapt_group_size",
            hint="restrict group_size_candidates to such G, or set adapt_group_size: false",
        )
    return dataclasses.replace(
        cfg,
        num_generations=group,
        per_device_train_batch_size=requests * group // per_step,
        generation_batch_size=requests * group,
        steps_per_generation=None,
        ignore_data_skip=True,
    )
