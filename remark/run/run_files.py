"""What a training run writes and owns in its ``output_dir``, and what ``remark train --overwrite`` removes.

A run writes its files beside whatever else the user keeps in ``output_dir`` (:data:`RUN_OUTPUTS`,
``checkpoint-N/``, TRL's draft model card ``README.md``, the ledger: :func:`run_writes`). What it owns there
is proven by its ledger, never by a name (``remark.step.run_ledger``: ``.remark-run.json`` claims each name
before the run creates it). ``README.md`` is an owned single file of kind :data:`RUN_KIND`
(``catalog.io.outputs.atomic_file``): a ``README.md`` the run did not write is never replaced
(:func:`write_run_card`); the run's own cards are ``best/README.md`` and ``final/README.md``.

:func:`prepare_output_dir` (before anything loads): a new run refuses an ``output_dir`` that holds a
previous run (its logs, eval tables, ``best/``, ``final/``, checkpoints or summary, as the ledger claims
them), which it would otherwise mix with its own; ``overwrite=True`` removes exactly those (of
TensorBoard's ``runs/`` only its event-file folders) and nothing else (``assets/`` is kept: it is reused
when its settings match). A path under a name the run writes that the ledger does not claim (a dataset
called ``eval/``, a folder of a run made before the ledger) is no previous run: it is named for what it is
(:func:`describe_path`) and refused, with or without ``--overwrite``, and never removed. Then the run
claims in its ledger the names it is about to write.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from catalog.io.errors import InputError
from catalog.io.outputs import atomic_file, file_kind, owning_output
from remark.step.checkpoint import checkpoint_step, find_checkpoints
from remark.step.run_ledger import LEDGER, claim, claims

#: what a run writes into ``output_dir`` besides ``checkpoint-N/`` (``overwrite`` removes these, when the
#: run's ledger claims them).
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
#: the ``catalog.io.outputs.atomic_dir`` kind of ``merged_base/`` (``eval.adapters.merge_adapter``).
MERGED_KIND = "merged-model"
#: the ``catalog.io.outputs.atomic_dir`` kind of ``final/`` (``best/`` is ``"train-best"``, remark.run.callbacks).
FINAL_KIND = "train-final"
#: the ``catalog.io.outputs.atomic_file`` kind of the single files a run writes in ``output_dir``.
RUN_KIND = "train"
#: TRL's draft model card in ``output_dir``.
RUN_CARD = "README.md"
#: what a folder holds that makes it a prepared dataset, or a model (any one file of the second group).
DATASET_FILES = ("meta.json", "requests.parquet")
MODEL_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "adapter_config.json",
)


def describe_kind(kind: str) -> str:
    """What an output of ``kind`` (``catalog.io.outputs``) is, in words: a prepared dataset, a model."""
    from data_prep.dataset import DATASET_KIND

    if kind == DATASET_KIND:
        return "a prepared dataset"
    if kind in ("sft", "train-best", "train-final", "merged-model", "tiny-model"):
        return "a model"
    return "a folder remark writes whole"


def run_card_is_ours(output_dir: str | Path) -> bool:
    """Whether the run may write ``output_dir/README.md``: absent, or recorded as the run's."""
    card = Path(output_dir) / RUN_CARD
    if not (card.exists() or card.is_symlink()):
        return True
    return file_kind(card) == RUN_KIND


def write_run_card(output_dir: str | Path, text: str) -> bool:
    """Write TRL's draft card ``text`` as ``output_dir/README.md`` (atomically, recorded as the run's);
    False, writing nothing, when a ``README.md`` the run did not write is there."""
    if not run_card_is_ours(output_dir):
        return False
    with atomic_file(Path(output_dir) / RUN_CARD, RUN_KIND, force=True, field="output_dir") as tmp:
        tmp.write_text(text, encoding="utf-8")
    return True


def run_writes(name: str) -> bool:
    """Whether a run writes, replaces or (``--overwrite``) removes ``output_dir/<name>``."""
    return name in RUN_OUTPUTS or name in (RUN_CARD, LEDGER) or checkpoint_step(name) is not None


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


def run_paths(output_dir: str | Path) -> list[Path]:
    """What is in ``output_dir`` under a name a run writes (:data:`RUN_OUTPUTS`, then ``checkpoint-N/``),
    whoever wrote it."""
    root = Path(output_dir)
    found = [root / n for n in RUN_OUTPUTS if (root / n).exists() or (root / n).is_symlink()]
    return found + find_checkpoints(root)


def previous_run(output_dir: str | Path) -> list[Path]:
    """What an earlier run left in ``output_dir``: the paths of :func:`run_paths` its ledger claims
    (``runs/`` when it holds TensorBoard logs)."""
    owned = claims(output_dir)
    return [
        p
        for p in run_paths(output_dir)
        if p.name in owned and not (p.name == "runs" and not tensorboard_logs(p))
    ]


def foreign_paths(output_dir: str | Path) -> list[Path]:
    """The paths of :func:`run_paths` no run's ledger in ``output_dir`` claims, but ``runs/`` (TensorBoard
    only adds a folder of its own there)."""
    owned = claims(output_dir)
    return [p for p in run_paths(output_dir) if p.name not in owned and p.name != "runs"]


def describe_path(path: Path) -> str:
    """What ``path`` is, in words, for a refusal: ``eval/ (a prepared dataset)``."""
    shown = path.name + ("/" if path.is_dir() else "")
    owner = owning_output(path) if path.is_dir() else None
    if owner is not None and owner[0] == Path(os.path.abspath(path)):
        return f"{shown} ({describe_kind(owner[1])})"
    if path.is_dir() and all((path / n).is_file() for n in DATASET_FILES):
        return f"{shown} (a prepared dataset)"
    if path.is_dir() and (path / "config.json").is_file() and any((path / n).is_file() for n in MODEL_FILES):
        return f"{shown} (a model folder)"
    return shown


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
    """Refuse (``InputError``) or clear a used ``output_dir`` before anything loads, then claim in the run's
    ledger the names the run is about to write; returns what was removed.

    What a run writes before its first step (:data:`SETUP_OUTPUTS`: the config, TensorBoard's ``runs/``,
    a ``merged_base/``) is not a run: a run that crashed before its first step may be started again. A
    path under a name the run writes that no ledger claims is refused (new runs; a resume writes beside
    it), and is never removed.
    """
    if resume and overwrite:
        raise InputError("--resume and --overwrite contradict each other", field="--overwrite")
    root = Path(output_dir)
    main = int(os.environ.get("RANK", "0")) == 0  # one process writes; torchrun's others find it done
    absent = [n for n in RUN_OUTPUTS if not ((root / n).exists() or (root / n).is_symlink())]
    if resume:
        if main:
            claim(root, absent)
        return []
    foreign = foreign_paths(root)
    if foreign:
        names = ", ".join(describe_path(p) for p in foreign[:6]) + (", ..." if len(foreign) > 6 else "")
        them = "it" if len(foreign) == 1 else "them"
        raise InputError(
            f"output_dir holds {names} under names a run writes, and no run's ledger here ({LEDGER}) claims "
            f"{them}: remark has no record of writing {them}, and the run would write into or replace {them}",
            path=output_dir,
            field="output_dir",
            hint=f"move {them} out of output_dir or remove {them} yourself, or set another output_dir; "
            "--overwrite removes only what a run's ledger claims",
        )
    found = previous_run(root)
    prior = [p for p in found if p.name not in SETUP_OUTPUTS]
    if prior and not overwrite:
        names = ", ".join(p.name + ("/" if p.is_dir() else "") for p in found[:8])
        raise InputError(
            f"output_dir holds a previous run ({names}{', ...' if len(found) > 8 else ''}); a new run "
            "would mix its logs, eval tables and best/ with that run's",
            path=output_dir,
            field="output_dir",
            hint="continue it with --resume, clear those files with --overwrite, or set another output_dir",
        )
    removed = found if overwrite and prior else []
    if main:
        for path in removed:
            _remove_run_output(path)
        claim(
            root,
            [n for n in RUN_OUTPUTS if not ((root / n).exists() or (root / n).is_symlink())],
            new_run=True,
        )
    return removed
