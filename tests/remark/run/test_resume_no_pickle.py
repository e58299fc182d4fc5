"""``remark train --resume`` reads only what remark writes: safetensors and JSON.

A checkpoint whose weights, RNG, optimizer, scheduler or scaler state (or any other file) is in a pickle
format is refused before anything loads, exit 2, one line naming the file and what to do; so is one
without weights or optimizer state remark can read. The trainer's loaders refuse the same files again and
never fall back to ``transformers``' ``torch.load``. An engine's checkpoint (DeepSpeed, FSDP) keeps that
engine's own files.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from safetensors.torch import save_file

from catalog.io.errors import InputError
from remark.cli.main import main
from remark.run.output_dir import resume_checkpoint
from remark.step.checkpoint import (
    COMPLETE_MARKER,
    SafeCheckpointMixin,
    pickle_problem,
    save_optimizer_state,
    save_rng_state,
    write_complete_marker,
)
from tests.remark.run.run_fields import tiny_run_fields


def remark_checkpoint(folder: Path, step: int = 2) -> Path:
    """A checkpoint as remark writes it (the files resume reads), marked complete."""
    folder.mkdir(parents=True)
    save_file({"w": torch.zeros(2, 3)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text("{}")
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    save_optimizer_state(opt.state_dict(), folder)
    (folder / "scheduler.json").write_text(json.dumps({"last_epoch": step}))
    save_rng_state(folder)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    (folder / "training_args.json").write_text("{}")
    write_complete_marker(folder, step)
    return folder


def remark_again(folder: Path, step: int = 2) -> None:
    (folder / COMPLETE_MARKER).unlink()
    write_complete_marker(folder, step)  # a marker that lists the changed files: complete and sound


#: name -> (files replaced by the pickle, the pickle written)
PICKLED = {
    "weights": (["model.safetensors"], "pytorch_model.bin"),
    "sharded-weights": (["model.safetensors"], "pytorch_model-00001-of-00002.bin"),
    "adapter": (["model.safetensors"], "adapter_model.bin"),
    "rng": (["rng_state.safetensors", "rng_state.json"], "rng_state.pth"),
    "rng-rank": (["rng_state.safetensors", "rng_state.json"], "rng_state_0.pth"),
    "optimizer": (["optimizer.safetensors", "optimizer.json"], "optimizer.pt"),
    "scheduler": (["scheduler.json"], "scheduler.pt"),
    "scaler": ([], "scaler.pt"),
    "training-args": ([], "training_args.bin"),
    "other": ([], "extra_state.pkl"),
}


@pytest.mark.parametrize("case", list(PICKLED))
@pytest.mark.parametrize("how", ["newest", "explicit"])
def test_a_pickle_file_in_the_checkpoint_is_refused_naming_it(tmp_path, case, how):
    run = tmp_path / "run"
    ckpt = remark_checkpoint(run / "checkpoint-2")
    assert resume_checkpoint(run, True) == ckpt and pickle_problem(ckpt) is None
    gone, pickled = PICKLED[case]
    for name in gone:
        (ckpt / name).unlink()
    torch.save({"x": torch.zeros(1)}, ckpt / pickled)
    remark_again(ckpt)
    with pytest.raises(InputError) as err:
        resume_checkpoint(run, True if how == "newest" else str(ckpt))
    text = str(err.value)
    assert err.value.path == str(ckpt / pickled) and err.value.field == "--resume"
    assert f"{pickled} is a pickle file" in text and "remark never unpickles" in text
    assert "\n" not in text


@pytest.mark.parametrize("missing", ["model.safetensors", "optimizer.safetensors", "scheduler.json"])
def test_a_checkpoint_without_remarks_own_state_is_refused(tmp_path, missing):
    ckpt = remark_checkpoint(tmp_path / "checkpoint-2")
    (ckpt / missing).unlink()
    remark_again(ckpt)
    with pytest.raises(InputError, match=r"no weights remark can read|missing: remark writes it"):
        resume_checkpoint(tmp_path, str(ckpt))


def test_an_engines_own_files_are_its_format(tmp_path):
    ckpt = remark_checkpoint(tmp_path / "checkpoint-2")
    (ckpt / "latest").write_text("global_step2")
    (ckpt / "global_step2").mkdir()
    torch.save({}, ckpt / "global_step2" / "mp_rank_00_model_states.pt")
    torch.save({}, ckpt / "scheduler.pt")
    assert pickle_problem(ckpt) is None
    torch.save({}, ckpt / "rng_state.pth")  # not the engine's: remark writes the RNG state itself
    assert pickle_problem(ckpt)[0] == ckpt / "rng_state.pth"


class _Parent:
    """What the mixin would defer to: transformers' loaders (which unpickle)."""

    calls: list[str]

    def _load_rng_state(self, checkpoint):
        self.calls.append("rng")

    def _load_optimizer_and_scheduler(self, checkpoint):
        self.calls.append("optimizer")

    def _load_from_checkpoint(self, checkpoint, model=None):
        self.calls.append("weights")

    def _load_scaler(self, checkpoint):
        self.calls.append("scaler")


class Trainer(SafeCheckpointMixin, _Parent):
    def __init__(self):
        self.calls = []
        self.args = SimpleNamespace(world_size=1, process_index=0)
        self.accelerator = SimpleNamespace(scaler=None)


@pytest.mark.parametrize("case", ["weights", "rng", "optimizer", "scaler"])
def test_the_trainers_loaders_never_fall_back_to_torch_load(tmp_path, case):
    ckpt = remark_checkpoint(tmp_path / "checkpoint-2")
    gone, pickled = PICKLED[case]
    for name in gone:
        (ckpt / name).unlink()
    torch.save({}, ckpt / pickled)
    trainer = Trainer()
    loaders = {
        "weights": trainer._load_from_checkpoint,
        "rng": trainer._load_rng_state,
        "optimizer": trainer._load_optimizer_and_scheduler,
        "scaler": trainer._load_scaler,
    }
    with pytest.raises(InputError, match=re.escape(f"{pickled} is a pickle file")):
        loaders[case](str(ckpt))
    assert trainer.calls == []


def test_the_trainers_loaders_read_remarks_files(tmp_path):
    ckpt = remark_checkpoint(tmp_path / "checkpoint-2")
    trainer = Trainer()
    trainer._load_rng_state(str(ckpt))
    trainer._load_scaler(str(ckpt))
    trainer._load_from_checkpoint(str(ckpt))  # checked, then transformers' own (safetensors) loading
    assert trainer.calls == ["weights"]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["weights", "rng"])
def test_remark_train_resume_refuses_a_pickled_checkpoint(
    hand_dataset, hand_model_dir, tmp_path, capsys, case
):
    run = tmp_path / "run"
    fields = tiny_run_fields(
        run,
        data_dir=str(hand_dataset.path),
        model_name_or_path=str(hand_model_dir),
        max_steps=2,
        save_strategy="steps",
        save_steps=2,
    )
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(fields))
    assert main(["train", "--config", str(cfg)]) == 0
    ckpt = run / "checkpoint-2"
    gone, pickled = PICKLED[case]
    from safetensors.torch import load_file

    if case == "weights":
        torch.save(load_file(ckpt / "model.safetensors"), ckpt / pickled)
    else:
        torch.save({"cpu": torch.random.get_rng_state()}, ckpt / pickled)
    for name in gone:
        (ckpt / name).unlink()
    remark_again(ckpt)
    shutil.rmtree(run / "final")
    (run / "train_summary.json").unlink()
    before = sorted(p.name for p in run.iterdir())
    capsys.readouterr()
    assert main(["train", "--config", str(cfg), "--resume", "--set", "max_steps=4"]) == 2
    err = capsys.readouterr().err
    assert f"{ckpt / pickled}, field '--resume': {pickled} is a pickle file" in err and "Traceback" not in err
    assert sorted(p.name for p in run.iterdir()) == before and not (run / "checkpoint-4").exists()
