"""Checkpoints without pickle: optimizer, scheduler and RNG state as safetensors + JSON.

``transformers.Trainer`` writes ``optimizer.pt``, ``scheduler.pt``, ``rng_state.pth`` and
``training_args.bin`` with ``torch.save`` (pickle). remark's house rule is no pickle for data or
checkpoints, so :class:`SafeCheckpointMixin` replaces those four files, for the plain single-process and
DDP paths, by:

- ``optimizer.safetensors`` (every tensor of ``optimizer.state_dict()["state"]``, keyed
  ``state/<param index>/<name>``) and ``optimizer.json`` (non-tensor state values and ``param_groups``);
- ``scheduler.json`` (the scheduler's ``state_dict``, which holds numbers only);
- ``rng_state[_<rank>].safetensors`` (torch CPU and CUDA generator states) and ``.json`` (python and
  numpy generator states);
- ``training_args.json`` (``TrainingArguments.to_dict()``).

- ``scaler.json`` (the mixed-precision gradient scaler's ``state_dict``, numbers only), when there is one.

DeepSpeed and FSDP keep their own checkpoint formats (their engines write the optimizer shards); with
them the mixin defers to ``transformers`` for the optimizer and scheduler.

Resume reads only what remark writes (:func:`resume_problem`, checked before the model loads by
``remark.run.output_dir`` and again by each loader): a checkpoint holding a file in a pickle format
(``pytorch_model.bin``, ``rng_state.pth``, ``optimizer.pt``, ``scaler.pt``, ``training_args.bin``, ...;
of an engine's checkpoint only the engine's own files are allowed) is refused with ``InputError`` naming
the file, and so is one whose weights or optimizer state is missing; the loaders never fall back to
``transformers``' ``torch.load`` of those files.

Ownership: the trainer claims ``checkpoint-N`` in the run's ledger (``remark.step.run_ledger``) before it
saves into it, and rotation deletes only claimed checkpoints: a ``checkpoint-N`` folder the run did not
write is never deleted.

Completeness and integrity (remark's addition; ``transformers`` has neither):
``checkpoint-N/checkpoint_complete.json`` is written last, after the model, optimizer, scheduler, RNG and
trainer state of every process and the callbacks' ``on_save`` files (the group-size advice), once they
are flushed to disk; it lists every file with its size and sha256 (``{"format": 2, "step", "saved_at",
"files": {name: {"size", "sha256"}}}``). A folder without it, or whose files differ from it (truncated,
missing), is incomplete; one whose content no longer matches it is damaged. ``checkpoint_problem(path,
verify=True)`` checks, cheapest first: the marker itself, every file's size, a trial read of every JSON
file (``trainer_state.json`` must be an object with an integer ``global_step`` and a ``log_history``
list) and of every safetensors header (its length, its JSON, each tensor's dtype, shape and byte range
inside the file), then every file's sha256. ``select_checkpoint`` takes the newest checkpoint that passes
and names each newer one it skipped and why. Hashing reads every file once (``hashlib.file_digest``), at
each save and, on resume, for the checkpoints examined (the chosen one and those skipped). A marker of
another ``format`` is unreadable: its checkpoint is skipped with that reason.

Rotation (``save_total_limit``) runs after the marker and counts the run's complete checkpoints only, newest by
completion time, checked by marker and sizes (hashing every kept checkpoint at every save would cost more
than the save); ``transformers`` rotates before the trainer state is even written and counts interrupted
folders, so a crash at the wrong moment could leave no complete checkpoint, or keep an incomplete one in
place of a complete one. Under rotation, incomplete folders are deleted (nothing can resume from them);
without it they stay and every resume reports them.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers import TrainerCallback

from remark.step.run_ledger import claim, claims

OPTIMIZER_TENSORS = "optimizer.safetensors"
OPTIMIZER_META = "optimizer.json"
SCHEDULER_META = "scheduler.json"
TRAINING_ARGS_JSON = "training_args.json"
SCALER_META = "scaler.json"
#: extensions of the formats ``torch.load`` / ``pickle`` read (a file that can run code when loaded)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib")
#: the weights file a checkpoint must hold, one of (safetensors, or an index of safetensors shards)
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "adapter_model.safetensors")
COMPLETE_MARKER = "checkpoint_complete.json"
CHECKPOINT_PREFIX = "checkpoint-"
#: the marker's format: a size and a sha256 per file
MARKER_FORMAT = 2
#: what a marker must hold (``catalog.io.files.check_fields``); each ``files`` value: ``FILE_SCHEMA``
MARKER_SCHEMA = {"format": int, "step": int, "saved_at": float, "files": dict}
FILE_SCHEMA = {"size": int, "sha256": str}
#: what a checkpoint's ``trainer_state.json`` must hold for ``transformers`` to resume from it
TRAINER_STATE_SCHEMA = {"global_step": int, "log_history": list}


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return {"__tuple__": [_jsonable(v) for v in value]}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot store {type(value).__name__} in a JSON checkpoint file")


def _unjson(value: Any) -> Any:
    if isinstance(value, dict):
        if "__tuple__" in value:
            return tuple(_unjson(v) for v in value["__tuple__"])
        if "__ndarray__" in value:
            return np.asarray(value["__ndarray__"], dtype=value["dtype"])
        return {k: _unjson(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unjson(v) for v in value]
    return value


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_jsonable(obj)))
    os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    from catalog.io.files import read_json

    return _unjson(read_json(path, what="checkpoint file"))


def save_optimizer_state(state_dict: dict, directory: str | Path) -> None:
    """Split ``optimizer.state_dict()`` into tensors (safetensors) and everything else (JSON)."""
    directory = Path(directory)
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, entry in state_dict["state"].items():
        for name, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state/{index}/{name}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(index), {})[name] = value
    tmp = directory / (OPTIMIZER_TENSORS + ".tmp")
    save_file(tensors, str(tmp))
    os.replace(tmp, directory / OPTIMIZER_TENSORS)
    _write_json(directory / OPTIMIZER_META, {"scalars": scalars, "param_groups": state_dict["param_groups"]})


def load_optimizer_state(directory: str | Path) -> dict:
    """Inverse of :func:`save_optimizer_state`: a dict ready for ``optimizer.load_state_dict``."""
    directory = Path(directory)
    meta = _read_json(directory / OPTIMIZER_META)
    state: dict[int, dict[str, Any]] = {}
    for key, tensor in load_file(str(directory / OPTIMIZER_TENSORS)).items():
        _, index, name = key.split("/", 2)
        state.setdefault(int(index), {})[name] = tensor
    for index, entry in meta["scalars"].items():
        state.setdefault(int(index), {}).update(entry)
    return {"state": state, "param_groups": meta["param_groups"]}


def _rng_stem(world_size: int, process_index: int) -> str:
    return "rng_state" if world_size <= 1 else f"rng_state_{process_index}"


def save_rng_state(directory: str | Path, *, world_size: int = 1, process_index: int = 0) -> None:
    """Python, numpy, torch CPU (and CUDA) generator states, without pickle."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stem = _rng_stem(world_size, process_index)
    tensors = {"cpu": torch.random.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.random.get_rng_state_all()):
            tensors[f"cuda/{i}"] = s
    tmp = directory / f"{stem}.safetensors.tmp"
    save_file(tensors, str(tmp))
    os.replace(tmp, directory / f"{stem}.safetensors")
    _write_json(directory / f"{stem}.json", {"python": random.getstate(), "numpy": np.random.get_state()})


def load_rng_state(directory: str | Path, *, world_size: int = 1, process_index: int = 0) -> bool:
    """Restore what :func:`save_rng_state` wrote; False when the files are absent."""
    directory = Path(directory)
    stem = _rng_stem(world_size, process_index)
    if not (directory / f"{stem}.safetensors").is_file():
        return False
    meta = _read_json(directory / f"{stem}.json")
    python_state = meta["python"]
    random.setstate((python_state[0], tuple(python_state[1]), python_state[2]))
    np.random.set_state(tuple(meta["numpy"]))
    tensors = load_file(str(directory / f"{stem}.safetensors"))
    torch.random.set_rng_state(tensors["cpu"])
    cuda = [tensors[k] for k in sorted(k for k in tensors if k.startswith("cuda/"))]
    if cuda and torch.cuda.is_available():
        torch.cuda.random.set_rng_state_all(cuda)
    return True


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_sha256(path: str | Path) -> str:
    """The sha256 of ``path``'s content (hex), read in chunks (``hashlib.file_digest``)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _files(folder: Path) -> list[str]:
    return [
        str(p.relative_to(folder))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != COMPLETE_MARKER
    ]


def write_complete_marker(folder: str | Path, step: int) -> Path:
    """Flush every file of ``folder`` to disk, then write its completion marker (atomically, last):
    each file's size and sha256."""
    folder = Path(folder)
    files = {}
    for name in _files(folder):
        _fsync(folder / name)
        files[name] = {"size": (folder / name).stat().st_size, "sha256": file_sha256(folder / name)}
    marker = folder / COMPLETE_MARKER
    tmp = folder / f".{COMPLETE_MARKER}.tmp"
    record = {"format": MARKER_FORMAT, "step": step, "saved_at": time.time(), "files": files}
    tmp.write_text(json.dumps(record, indent=1))
    _fsync(tmp)
    os.replace(tmp, marker)
    _fsync(folder)
    return marker


def checkpoint_step(path: str | Path) -> int | None:
    """N for a ``checkpoint-N`` folder name, else None."""
    name = Path(path).name
    tail = name[len(CHECKPOINT_PREFIX) :]
    return int(tail) if name.startswith(CHECKPOINT_PREFIX) and tail.isdigit() else None


def read_marker(folder: str | Path) -> dict[str, dict[str, Any]]:
    """The files a checkpoint's marker records, as ``{name: {"size": int, "sha256": str}}``; ``InputError``
    naming the field when the marker is not what :func:`write_complete_marker` writes."""
    from catalog.io.errors import InputError
    from catalog.io.files import check_fields, read_json

    path = Path(folder) / COMPLETE_MARKER
    marker = read_json(path, schema=MARKER_SCHEMA, what=COMPLETE_MARKER)
    if marker["format"] != MARKER_FORMAT:
        raise InputError(
            f"format {marker['format']}, not {MARKER_FORMAT} (a size and a sha256 per file)",
            path=path,
            field="format",
        )
    out: dict[str, dict[str, Any]] = {}
    for name, entry in marker["files"].items():
        where = f"files.{name}"
        check_fields(entry, FILE_SCHEMA, path=path, prefix=where)
        if len(entry["sha256"]) != 64:
            raise InputError("not a sha256 (64 hex digits)", path=path, field=f"{where}.sha256")
        out[name] = entry
    return out


def json_state_problem(path: str | Path) -> str | None:
    """Why the JSON file ``path`` of a checkpoint cannot be read back (None when it can): UTF-8, JSON, and
    for ``trainer_state.json`` the fields ``transformers`` resumes from."""
    from catalog.io.errors import InputError
    from catalog.io.files import read_json

    p = Path(path)
    try:
        read_json(p, schema=TRAINER_STATE_SCHEMA if p.name == "trainer_state.json" else None)
    except InputError as err:
        return f"{p.name} is unreadable: {err.message}" + (f" (field {err.field!r})" if err.field else "")
    return None


def checkpoint_problem(path: str | Path, *, verify: bool = True) -> str | None:
    """Why ``path`` is not a sound checkpoint (None when it is): what a user can check by hand.

    Without ``verify``: the marker and every recorded file's size (cheap: what rotation counts). With
    it: also a trial read of every JSON file and safetensors header, then every recorded sha256."""
    from catalog.io.errors import InputError

    folder = Path(path)
    if not folder.is_dir():
        return "not found" if not folder.exists() else "not a folder"
    names = sorted(p.name for p in folder.iterdir())
    if not names:
        return "empty folder (the save was interrupted before anything was written)"
    if COMPLETE_MARKER not in names:
        held = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        return f"no {COMPLETE_MARKER}, the save was interrupted (it holds {held})"
    try:
        files = read_marker(folder)
    except InputError as err:
        where = f" (field {err.field!r})" if err.field else ""
        return f"{COMPLETE_MARKER} is unreadable: {err.message}{where}"
    for name, entry in files.items():
        f = folder / name
        if not f.is_file():
            return f"{name} is missing"
        if f.stat().st_size != entry["size"]:
            return f"{name} has {f.stat().st_size} bytes, {entry['size']} when it was saved (truncated or changed)"
    if not verify:
        return None
    for name in files:
        if name.endswith(".safetensors"):
            from catalog.io.files import safetensors_problem

            problem = safetensors_problem(folder / name)
        elif name.endswith(".json"):
            problem = json_state_problem(folder / name)
        else:
            continue
        if problem is not None:
            return problem
    for name, entry in files.items():
        if file_sha256(folder / name) != entry["sha256"]:
            return (
                f"{name} does not match its recorded sha256 (its content changed after the save: "
                "damaged on disk or edited)"
            )
    return None


def engine_layout(folder: str | Path) -> str | None:
    """``"deepspeed"`` or ``"fsdp"`` when ``folder`` is laid out as that engine's checkpoint, else None."""
    root = Path(folder)
    names = [p.name for p in root.iterdir()] if root.is_dir() else []
    if "latest" in names or any(n.startswith("global_step") for n in names):
        return "deepspeed"
    if any("fsdp" in n for n in names):
        return "fsdp"
    return None


def _engine_file(rel: Path) -> bool:
    """Whether ``rel`` (inside a checkpoint) is one of an engine's own files (its formats are its own)."""
    top = rel.parts[0]
    if len(rel.parts) > 1:
        return top.startswith(("global_step", "pytorch_model_fsdp", "optimizer"))
    return top.startswith(("pytorch_model_fsdp", "optimizer")) or top in ("scheduler.pt", "zero_to_fp32.py")


def _pickle_hint(name: str) -> str:
    why = "remark never unpickles a file, since loading one can run code: "
    if name.startswith(("pytorch_model", "adapter_model")):
        return (
            why
            + "save the weights as model.safetensors and remove the pickle file, or start a new run from them with model_name_or_path"
        )
    if name.startswith("rng_state"):
        return (
            why
            + "resume from a checkpoint remark wrote (its RNG state is rng_state.safetensors and rng_state.json)"
        )
    return (
        why
        + "resume from a checkpoint remark wrote, or start a new run from its weights with model_name_or_path"
    )


def pickle_problem(folder: str | Path) -> tuple[Path, str, str] | None:
    """``(file, why, what to do)`` for the first file of checkpoint ``folder`` that resume must not read
    (see the module docstring), or None. Resume reads safetensors and JSON only; an engine's checkpoint
    (DeepSpeed, FSDP: :func:`engine_layout`) may hold that engine's own files. Without an engine the
    weights (:data:`WEIGHT_FILES`), the optimizer state and the trainer state must be there."""
    root = Path(folder)
    if not root.is_dir():
        return None
    engine = engine_layout(root)
    for path in sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink()):
        rel = path.relative_to(root)
        if engine is not None and _engine_file(rel):
            continue
        if path.suffix.lower() in PICKLE_SUFFIXES:
            why = f"{rel} is a pickle file ({path.suffix}); resume reads only what remark writes (safetensors and JSON)"
            return path, why, _pickle_hint(path.name)
    if engine is not None:
        return None
    adapters = [p for p in root.iterdir() if p.is_dir() and (p / "adapter_model.safetensors").is_file()]
    if not any((root / n).is_file() for n in WEIGHT_FILES) and not adapters:
        return (
            root,
            f"no weights remark can read here ({', '.join(WEIGHT_FILES)})",
            "resume from a checkpoint remark wrote, or start a new run from the weights with model_name_or_path",
        )
    for name in (OPTIMIZER_TENSORS, OPTIMIZER_META, SCHEDULER_META, "trainer_state.json"):
        if not (root / name).is_file():
            return (
                root / name,
                "missing: remark writes it with every checkpoint (a checkpoint saved with save_only_model "
                "holds the weights alone)",
                "resume from a checkpoint remark wrote, or start a new run from the weights with model_name_or_path",
            )
    return None


def _refuse(found: tuple[Path, str, str] | None) -> None:
    if found is not None:
        from catalog.io.errors import InputError

        path, why, hint = found
        raise InputError(why, path=path, field="--resume", hint=hint)


def find_checkpoints(output_dir: str | Path) -> list[Path]:
    """The ``checkpoint-N`` folders of ``output_dir``, by N."""
    root = Path(output_dir)
    found = (
        [p for p in root.glob(f"{CHECKPOINT_PREFIX}*") if checkpoint_step(p) is not None]
        if root.is_dir()
        else []
    )
    return sorted(found, key=checkpoint_step)


def select_checkpoint(output_dir: str | Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """(the newest sound checkpoint or None, [(incomplete or damaged checkpoint, why)] newest first),
    each verified (:func:`checkpoint_problem`)."""
    skipped = []
    for path in reversed(find_checkpoints(output_dir)):
        problem = checkpoint_problem(path)
        if problem is None:
            return path, skipped
        skipped.append((path, problem))
    return None, skipped


def _saved_at(path: Path) -> float:
    try:
        return float(json.loads((path / COMPLETE_MARKER).read_bytes())["saved_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return float(checkpoint_step(path) or 0)


def rotate_checkpoints(
    output_dir: str | Path, limit: int | None, *, keep: str | Path | None = None
) -> list[Path]:
    """Keep the ``limit`` most recently completed checkpoints (and ``keep``, the best); delete the other
    complete ones and every incomplete one. Only the checkpoints the run's ledger claims count: any other
    ``checkpoint-N`` folder is not the run's and is left alone. No-op without a positive limit. Returns
    what was deleted."""
    if limit is None or limit <= 0:
        return []
    complete, deleted = [], []
    owned = claims(output_dir)
    for path in find_checkpoints(output_dir):
        if path.name not in owned:
            continue
        if checkpoint_problem(path, verify=False) is None:
            complete.append(path)
        else:
            shutil.rmtree(path, ignore_errors=True)
            deleted.append(path)
    complete.sort(key=_saved_at)
    protected = set(complete[-limit:]) | ({Path(keep)} if keep is not None else set())
    for path in complete:
        if path not in protected:
            shutil.rmtree(path, ignore_errors=True)
            deleted.append(path)
    return deleted


class _CompletionMarker(TrainerCallback):
    """Runs last in ``on_save``: waits for every process, then marks the checkpoint complete and rotates."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def on_save(self, args, state, control, **kwargs):
        folder = self.trainer._pending_checkpoint
        if folder is None:
            return
        self.trainer._pending_checkpoint = None
        self.trainer.accelerator.wait_for_everyone()  # each process's RNG state is in the folder
        if args.should_save:
            write_complete_marker(folder, state.global_step)
            rotate_checkpoints(folder.parent, self.trainer._save_limit, keep=state.best_model_checkpoint)
        self.trainer.accelerator.wait_for_everyone()


class SafeCheckpointMixin:
    """Mix into a ``transformers.Trainer`` subclass (before the Trainer in the bases) to drop pickle."""

    _pending_checkpoint: Path | None = None

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        """The parent's save, minus its rotation; the marker and the rotation follow in ``on_save``."""
        folder = Path(self._get_output_dir(trial=trial)) / f"{CHECKPOINT_PREFIX}{self.state.global_step}"
        if self.args.should_save:  # a re-save into the folder of an abandoned continuation
            claim(folder.parent, [folder.name])  # the run's own from now on (rotation deletes only those)
            (folder / COMPLETE_MARKER).unlink(missing_ok=True)
        marker = next((c for c in self.callback_handler.callbacks if isinstance(c, _CompletionMarker)), None)
        if marker is None:
            marker = _CompletionMarker(self)
        else:
            self.callback_handler.callbacks.remove(marker)
        self.callback_handler.callbacks.append(marker)  # after every other on_save
        self._save_limit = self.args.save_total_limit
        self.args.save_total_limit = None
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = self._save_limit
        self._pending_checkpoint = folder

    def _uses_engine_checkpoints(self) -> bool:
        return bool(getattr(self, "is_deepspeed_enabled", False) or getattr(self, "is_fsdp_enabled", False))

    def _save_rng_state(self, output_dir: str) -> None:
        save_rng_state(output_dir, world_size=self.args.world_size, process_index=self.args.process_index)

    def _load_rng_state(self, checkpoint: str | None) -> None:
        """The RNG state remark wrote; never ``transformers``' pickle (``rng_state.pth``): one is refused, and
        without either the run goes on unseeded, as ``transformers`` does (said in the log)."""
        if checkpoint is None:
            return
        _refuse(pickle_problem(checkpoint))
        if not load_rng_state(
            checkpoint, world_size=self.args.world_size, process_index=self.args.process_index
        ):
            import logging

            logging.getLogger(__name__).warning(
                "%s holds no %s.safetensors: the random state is not restored (a run resumed on another "
                "number of processes), so the continuation is not bit for bit the uninterrupted run",
                checkpoint,
                _rng_stem(self.args.world_size, self.args.process_index),
            )

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        """``transformers``' weight loading, after checking that it will read safetensors only."""
        if not self._uses_engine_checkpoints():
            _refuse(pickle_problem(resume_from_checkpoint))
        super()._load_from_checkpoint(resume_from_checkpoint, model)

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        if self._uses_engine_checkpoints():
            super()._save_optimizer_and_scheduler(output_dir)
            return
        if self.args.should_save:
            os.makedirs(output_dir, exist_ok=True)
            save_optimizer_state(self.optimizer.state_dict(), output_dir)
            _write_json(Path(output_dir) / SCHEDULER_META, self.lr_scheduler.state_dict())

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        if checkpoint is None or self._uses_engine_checkpoints():
            super()._load_optimizer_and_scheduler(checkpoint)
            return
        _refuse(pickle_problem(checkpoint))  # never transformers' torch.load of optimizer.pt / scheduler.pt
        state = load_optimizer_state(checkpoint)
        self.optimizer.load_state_dict(state)
        self.lr_scheduler.load_state_dict(_read_json(Path(checkpoint) / SCHEDULER_META))
        # TRL's GRPOTrainer keeps its adaptive-entropy controller beside the optimizer state.
        entropy = Path(checkpoint) / "entropy_ctrl_state.json"
        if getattr(self, "use_adaptive_entropy", False) and entropy.is_file():
            saved = _read_json(entropy)
            self.entropy_coef = saved["entropy_coef"]
            self._last_world_entropy = saved["last_world_entropy"]

    def _save_scaler(self, output_dir: str) -> None:
        """The gradient scaler's state (numbers only) as ``scaler.json``, not ``transformers``' ``scaler.pt``."""
        scaler = getattr(self.accelerator, "scaler", None)
        if scaler is None or not self.args.should_save:
            return
        os.makedirs(output_dir, exist_ok=True)
        _write_json(Path(output_dir) / SCALER_META, scaler.state_dict())

    def _load_scaler(self, checkpoint: str | None) -> None:
        if checkpoint is None:
            return
        _refuse(pickle_problem(checkpoint))  # a scaler.pt is refused, never unpickled
        path = Path(checkpoint) / SCALER_META
        scaler = getattr(self.accelerator, "scaler", None)
        if scaler is not None and path.is_file():
            scaler.load_state_dict(_read_json(path))

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        super()._save(output_dir, state_dict)
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        pickled = Path(output_dir) / "training_args.bin"
        if self.args.should_save:
            (Path(output_dir) / TRAINING_ARGS_JSON).write_text(self.args.to_json_string())
            pickled.unlink(missing_ok=True)
