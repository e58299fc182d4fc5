"""Checkpoint state without pickle (optimizer, scheduler and RNG round trips) and checkpoint completeness
and integrity: the marker (sizes and sha256), what an incomplete or damaged folder is told apart by,
selection and rotation."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from remark.step.checkpoint import (
    COMPLETE_MARKER,
    checkpoint_problem,
    file_sha256,
    load_optimizer_state,
    load_rng_state,
    rotate_checkpoints,
    save_optimizer_state,
    save_rng_state,
    select_checkpoint,
    write_complete_marker,
)
from remark.step.run_ledger import LEDGER, claim


def _stepped_adam():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(5, 4)).pow(2).sum().backward()
        opt.step()
    return model, opt


def test_optimizer_state_round_trip_continues_identically(tmp_path):
    model, opt = _stepped_adam()
    save_optimizer_state(opt.state_dict(), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["optimizer.json", "optimizer.safetensors"]

    clone = torch.nn.Linear(4, 3)
    clone.load_state_dict(model.state_dict())
    opt2 = torch.optim.AdamW(clone.parameters(), lr=0.5)  # wrong lr: must come back from the file
    opt2.load_state_dict(load_optimizer_state(tmp_path))
    assert opt2.param_groups[0]["lr"] == 1e-3
    assert tuple(opt2.param_groups[0]["betas"]) == (0.9, 0.99)

    x = torch.randn(5, 4)
    for m, o in ((model, opt), (clone, opt2)):
        o.zero_grad()
        m(x).pow(2).sum().backward()
        o.step()
    for a, b in zip(model.parameters(), clone.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_rng_state_round_trip(tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    save_rng_state(tmp_path)
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(9)
    np.random.seed(9)
    torch.manual_seed(9)
    assert load_rng_state(tmp_path)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
    assert not load_rng_state(tmp_path / "absent")


# -- completeness --------------------------------------------------------------------------------------


TRAINER_STATE = '{"global_step": 2, "log_history": [{"step": 1, "loss": 0.5}]}'


def _complete(folder, step=2):
    folder.mkdir(parents=True)
    save_file({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}, str(folder / "model.safetensors"))
    (folder / "trainer_state.json").write_text(TRAINER_STATE)
    save_file({"state/0/exp_avg": torch.zeros(3)}, str(folder / "optimizer.safetensors"))
    write_complete_marker(folder, step)
    return folder


def _model_only(folder):
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"0123456789")


def _truncated(folder):
    _complete(folder)
    with (folder / "model.safetensors").open("r+b") as fh:
        fh.truncate(4)


def _overwrite(path, offset, data: bytes):
    """Overwrite bytes of ``path`` in place (same size), as a disk error or a stray write would."""
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.seek(offset if offset >= 0 else size + offset)
        fh.write(data)
    assert path.stat().st_size == size


def _flipped_weights(folder):
    _complete(folder)
    _overwrite(folder / "model.safetensors", -4, b"\xff\xff\xff\xff")  # a tensor's bytes: header intact


def _damaged_header(folder):
    _complete(folder)
    _overwrite(folder / "model.safetensors", 0, b"\xff\xff\xff\xff")  # "header too large"


def _damaged_state(folder):
    _complete(folder)
    _overwrite(folder / "trainer_state.json", 0, b"#")  # same size, not JSON any more


def _state_without_step(folder):
    _complete(folder)
    text = TRAINER_STATE.replace('"global_step"', '"global_stap"')
    (folder / "trainer_state.json").write_text(text)
    write_complete_marker(folder, 2)  # the marker agrees: the trial read still refuses it


def _missing(folder):
    _complete(folder)
    (folder / "optimizer.safetensors").unlink()


def _bad_marker(folder):
    _complete(folder)
    (folder / COMPLETE_MARKER).write_text("{not json")


INCOMPLETE = {
    "empty folder": (lambda f: f.mkdir(parents=True), "empty folder"),
    "model only": (
        _model_only,
        f"no {COMPLETE_MARKER}, the save was interrupted (it holds model.safetensors)",
    ),
    "truncated safetensors": (_truncated, "model.safetensors has 4 bytes, 96 when it was saved"),
    "a file missing": (_missing, "optimizer.safetensors is missing"),
    "unreadable marker": (_bad_marker, f"{COMPLETE_MARKER} is unreadable"),
    "absent": (lambda f: None, "not found"),
    "flipped weight bytes": (
        _flipped_weights,
        "model.safetensors does not match its recorded sha256 (its content changed after the save",
    ),
    "damaged safetensors header": (
        _damaged_header,
        "the safetensors header of model.safetensors claims 4294967295 bytes in a file of",
    ),
    "damaged trainer state": (_damaged_state, "trainer_state.json is unreadable: not valid JSON"),
    "trainer state without its step": (
        _state_without_step,
        "trainer_state.json is unreadable: missing (field 'global_step')",
    ),
}


@pytest.mark.parametrize("case", list(INCOMPLETE))
def test_incomplete_checkpoints_are_named_for_what_is_wrong(tmp_path, case):
    make, message = INCOMPLETE[case]
    folder = tmp_path / "checkpoint-4"
    make(folder)
    assert message in checkpoint_problem(folder)


def test_a_complete_checkpoint_lists_its_files_sizes_and_hashes(tmp_path):
    folder = _complete(tmp_path / "checkpoint-2")
    assert checkpoint_problem(folder) is None
    marker = json.loads((folder / COMPLETE_MARKER).read_text())
    assert (marker["format"], marker["step"]) == (2, 2)
    names = ["model.safetensors", "optimizer.safetensors", "trainer_state.json"]
    assert marker["files"] == {
        n: {"size": (folder / n).stat().st_size, "sha256": file_sha256(folder / n)} for n in names
    }
    assert marker["files"]["trainer_state.json"]["size"] == len(TRAINER_STATE)
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


def test_damage_that_keeps_sizes_passes_the_cheap_check_only(tmp_path):
    """Rotation's check (marker and sizes) does not read the files; resume's does."""
    _flipped_weights(tmp_path / "checkpoint-4")
    assert checkpoint_problem(tmp_path / "checkpoint-4", verify=False) is None
    assert "sha256" in checkpoint_problem(tmp_path / "checkpoint-4")


def test_a_marker_of_another_format_is_unreadable_and_its_checkpoint_skipped(tmp_path):
    """A marker that records sizes alone cannot vouch for the content: the checkpoint is not resumed from."""
    _complete(tmp_path / "checkpoint-2")
    folder = _complete(tmp_path / "checkpoint-4", step=4)
    marker = json.loads((folder / COMPLETE_MARKER).read_text())
    sizes_only = {
        "step": 4,
        "saved_at": marker["saved_at"],
        "files": {n: e["size"] for n, e in marker["files"].items()},
    }
    (folder / COMPLETE_MARKER).write_text(json.dumps(sizes_only))
    assert checkpoint_problem(folder) == f"{COMPLETE_MARKER} is unreadable: missing (field 'format')"
    (folder / COMPLETE_MARKER).write_text(json.dumps({**sizes_only, "format": 1}))
    assert checkpoint_problem(folder) == (
        f"{COMPLETE_MARKER} is unreadable: format 1, not 2 (a size and a sha256 per file) (field 'format')"
    )
    chosen, skipped = select_checkpoint(tmp_path)
    assert chosen == tmp_path / "checkpoint-2" and [p.name for p, _ in skipped] == ["checkpoint-4"]


@pytest.mark.parametrize(
    ("marker", "field"),
    [
        ({"format": 2, "step": 2, "saved_at": 1.0}, "files"),
        ({"format": 2, "step": "2", "saved_at": 1.0, "files": {}}, "step"),
        (
            {"format": 2, "step": 2, "saved_at": 1.0, "files": {"model.safetensors": {"size": 4}}},
            "files.model.safetensors.sha256",
        ),
        (
            {"format": 2, "step": 2, "saved_at": 1.0, "files": {"a": {"size": 4, "sha256": "abc"}}},
            "files.a.sha256",
        ),
        ({"format": 2, "step": 2, "saved_at": 1.0, "files": {"a": 4}}, "files.a"),
    ],
)
def test_a_marker_with_a_missing_or_mistyped_field_names_it(tmp_path, marker, field):
    folder = _complete(tmp_path / "checkpoint-2")
    (folder / COMPLETE_MARKER).write_text(json.dumps(marker))
    assert checkpoint_problem(folder).startswith(f"{COMPLETE_MARKER} is unreadable: ")
    assert checkpoint_problem(folder).endswith(f"(field {field!r})")


def test_select_takes_the_newest_complete_and_names_the_skipped(tmp_path):
    _complete(tmp_path / "checkpoint-2")
    _complete(tmp_path / "checkpoint-10", step=10)
    _truncated(tmp_path / "checkpoint-12")
    _flipped_weights(tmp_path / "checkpoint-13")
    (tmp_path / "checkpoint-14").mkdir()
    (tmp_path / "checkpoint-x").mkdir()  # not a checkpoint name
    chosen, skipped = select_checkpoint(tmp_path)
    assert chosen == tmp_path / "checkpoint-10"  # by step, not by name (10 > 2)
    assert [(p.name, " ".join(why.split(" ")[:3])) for p, why in skipped] == [
        ("checkpoint-14", "empty folder (the"),
        ("checkpoint-13", "model.safetensors does not"),
        ("checkpoint-12", "model.safetensors has 4"),
    ]
    assert select_checkpoint(tmp_path / "absent") == (None, [])


def test_rotation_counts_complete_checkpoints_by_completion_time(tmp_path):
    # resumed from 4 after an abandoned continuation had completed 8 and half-written 10; now 6 completes
    for step in (2, 4, 8):
        _complete(tmp_path / f"checkpoint-{step}", step=step)
    _model_only(tmp_path / "checkpoint-10")
    _complete(tmp_path / "checkpoint-6", step=6)  # completed last
    claim(
        tmp_path, [f"checkpoint-{step}" for step in (2, 4, 6, 8, 10)]
    )  # the run's own (its trainer claims them)
    assert rotate_checkpoints(tmp_path, None) == []
    deleted = rotate_checkpoints(tmp_path, 2, keep=tmp_path / "checkpoint-2")
    assert sorted(p.name for p in deleted) == ["checkpoint-10", "checkpoint-4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        LEDGER,
        "checkpoint-2",
        "checkpoint-6",
        "checkpoint-8",
    ]
    rotate_checkpoints(tmp_path, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        LEDGER,
        "checkpoint-6",
    ]  # the newest completed, not the highest N
