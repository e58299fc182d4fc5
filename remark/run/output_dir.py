"""A run's ``output_dir`` before training starts: a previous run found and refused or cleared
(``remark train --overwrite``), the checkpoint to resume from (``--resume``), and the group size a
resumed run continues with.

A new run refuses an ``output_dir`` that holds a previous run (its logs, eval tables, ``best/``,
``final/``, checkpoints or summary), which it would otherwise mix with its own; ``overwrite=True``
removes exactly those (:data:`RUN_OUTPUTS` and ``checkpoint-N/``; of TensorBoard's ``runs/`` only its
event-file folders, ``merged_base/`` only when its marker says remark merged it) and nothing else
(``assets/`` is kept: it is reused when its settings match). ``resume=True`` takes the newest *complete*
and sound checkpoint (``remark.step.checkpoint``: marker, sizes, a trial read of its JSON files and
safetensors headers, content hashes), printing the incomplete or damaged ones it skipped and why; an
explicit checkpoint that is incomplete or damaged, or no checkpoint at all, is an ``InputError``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from catalog.shared.errors import InputError
from catalog.shared.outputs import output_kind
from remark.step.checkpoint import find_checkpoints, inspect_checkpoint, select_checkpoint

#: what a run writes into ``output_dir`` besides ``checkpoint-N/`` (``overwrite`` removes exactly these).
RUN_OUTPUTS = (
    "eval_log.jsonl",
    "eval",
    "sampled",
    "best",
    "final",
    "train_summary.json",
    "stopped.json",
    "remark_config.json",
    "runs",
    "merged_base",
)
#: outputs a run writes before its first step: alone they are no previous run (``--overwrite`` still clears them).
SETUP_OUTPUTS = ("remark_config.json", "runs", "merged_base")
#: the ``catalog.shared.outputs.atomic_dir`` kind of ``merged_base/`` (``eval.adapters.merge_adapter``).
MERGED_KIND = "merged-model"


def _valid_group_sizes(cfg: Any, limit: int = 64) -> list[int]:
    """G in 2..limit for which the same requests per step fill whole per-device batches (see resume)."""
    requests = cfg.generation_batch_size // cfg.num_generations
    per_step = cfg.world_size * cfg.steps_per_generation
    return [g for g in range(2, limit + 1) if (requests * g) % per_step == 0]


def tensorboard_logs(runs: Path) -> list[Path]:
    """The entries of ``runs/`` that are TensorBoard logs (transformers' ``runs/<time>_<host>/`` folders, or
    event files): every file in them is an ``events.out.tfevents.*`` file. Anything else there is not ours."""
    if not runs.is_dir() or runs.is_symlink():
        return []
    found = []
    for entry in sorted(runs.iterdir()):
        if entry.is_symlink():
            continue
        files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if not p.is_dir()]
        if files and all(p.name.startswith("events.out.tfevents.") and not p.is_symlink() for p in files):
            found.append(entry)
    return found


def previous_run(output_dir: str | Path) -> list[Path]:
    """What an earlier run left in ``output_dir``: its :data:`RUN_OUTPUTS` and checkpoints (``runs/`` when
    it holds TensorBoard logs, ``merged_base/`` when it is a merged model remark wrote)."""
    root = Path(output_dir)
    found = []
    for name in RUN_OUTPUTS:
        path = root / name
        if not (path.exists() or path.is_symlink()):
            continue
        if name == "runs" and not tensorboard_logs(path):
            continue
        if name == "merged_base" and output_kind(path) != MERGED_KIND:
            continue
        found.append(path)
    return found + find_checkpoints(root)


def _remove_run_output(path: Path) -> None:
    """Remove one of :func:`previous_run`'s paths; of ``runs/`` only the TensorBoard logs (then the folder,
    when that leaves it empty)."""
    if path.name == "runs" and path.is_dir() and not path.is_symlink():
        for entry in tensorboard_logs(path):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        if not any(path.iterdir()):
            path.rmdir()
    elif path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def prepare_output_dir(output_dir: str | Path, *, resume: bool, overwrite: bool) -> list[Path]:
    """Refuse (``InputError``) or clear a used ``output_dir`` before anything loads; returns what was removed.

    What a run writes before its first step (:data:`SETUP_OUTPUTS`: the config, TensorBoard's ``runs/``,
    a ``merged_base/``) is not a run: a run that crashed before its first step may be started again.
    """
    if resume and overwrite:
        raise InputError("--resume and --overwrite contradict each other", field="--overwrite")
    found = previous_run(output_dir)
    if resume or not [p for p in found if p.name not in SETUP_OUTPUTS]:
        return []
    names = ", ".join(p.name + ("/" if p.is_dir() else "") for p in found[:8])
    if not overwrite:
        raise InputError(
            f"output_dir holds a previous run ({names}{', ...' if len(found) > 8 else ''}); a new run "
            "would mix its logs, eval tables and best/ with that run's",
            path=output_dir,
            field="output_dir",
            hint="continue it with --resume, clear those files with --overwrite, or set another output_dir",
        )
    if int(os.environ.get("RANK", "0")) == 0:  # one process clears; torchrun's others find it done or empty
        for path in found:
            _remove_run_output(path)
    return found


def resume_checkpoint(output_dir: str | Path, resume: str | bool | None) -> Path | None:
    """The checkpoint to resume from: ``resume`` itself (a path, which must be complete and sound) or, for
    True, the newest sound one in ``output_dir``, printing the incomplete or damaged ones it skipped."""
    if resume is None or resume is False:
        return None
    main = int(os.environ.get("RANK", "0")) == 0
    if resume is not True:
        problem, note = inspect_checkpoint(resume)
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
        if main:
            if note is not None:
                print(f"resume: note: {note}")
            print(f"resume: from {resume}")
        return Path(resume)
    notes: list[str] = []
    chosen, skipped = select_checkpoint(output_dir, notes=notes)
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
    if main:
        for note in notes:
            print(f"resume: note: {note}")
        print(f"resume: from {chosen}")
    return chosen


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
