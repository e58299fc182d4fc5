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

DeepSpeed and FSDP keep their own checkpoint formats (their engines write the optimizer shards); with
them the mixin defers to ``transformers``. Resuming from a checkpoint written by plain ``transformers``
still works: the mixin falls back to the parent loaders when its own files are absent.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

OPTIMIZER_TENSORS = "optimizer.safetensors"
OPTIMIZER_META = "optimizer.json"
SCHEDULER_META = "scheduler.json"
TRAINING_ARGS_JSON = "training_args.json"


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
    return _unjson(json.loads(path.read_text()))


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


class SafeCheckpointMixin:
    """Mix into a ``transformers.Trainer`` subclass (before the Trainer in the bases) to drop pickle."""

    def _uses_engine_checkpoints(self) -> bool:
        return bool(getattr(self, "is_deepspeed_enabled", False) or getattr(self, "is_fsdp_enabled", False))

    def _save_rng_state(self, output_dir: str) -> None:
        save_rng_state(output_dir, world_size=self.args.world_size, process_index=self.args.process_index)

    def _load_rng_state(self, checkpoint: str | None) -> None:
        if checkpoint is None:
            return
        if not load_rng_state(
            checkpoint, world_size=self.args.world_size, process_index=self.args.process_index
        ):
            super()._load_rng_state(checkpoint)

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        if self._uses_engine_checkpoints():
            super()._save_optimizer_and_scheduler(output_dir)
            return
        if self.args.should_save:
            os.makedirs(output_dir, exist_ok=True)
            save_optimizer_state(self.optimizer.state_dict(), output_dir)
            _write_json(Path(output_dir) / SCHEDULER_META, self.lr_scheduler.state_dict())

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        if checkpoint is None or not (Path(checkpoint) / OPTIMIZER_TENSORS).is_file():
            super()._load_optimizer_and_scheduler(checkpoint)
            return
        state = load_optimizer_state(checkpoint)
        self.optimizer.load_state_dict(state)
        self.lr_scheduler.load_state_dict(_read_json(Path(checkpoint) / SCHEDULER_META))
        # TRL's GRPOTrainer keeps its adaptive-entropy controller beside the optimizer state.
        entropy = Path(checkpoint) / "entropy_ctrl_state.json"
        if getattr(self, "use_adaptive_entropy", False) and entropy.is_file():
            saved = json.loads(entropy.read_text())
            self.entropy_coef = saved["entropy_coef"]
            self._last_world_entropy = saved["last_world_entropy"]

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        super()._save(output_dir, state_dict)
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        pickled = Path(output_dir) / "training_args.bin"
        if self.args.should_save:
            (Path(output_dir) / TRAINING_ARGS_JSON).write_text(self.args.to_json_string())
            pickled.unlink(missing_ok=True)
