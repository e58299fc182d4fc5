"""Checkpoint state without pickle (optimizer, scheduler and RNG round trips) and checkpoint completeness:
the marker, what an incomplete folder is told apart by, selection and rotation."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from remark.step.checkpoint import (
    COMPLETE_MARKER,
    checkpoint_problem,
    load_optimizer_state,
    load_rng_state,
    rotate_checkpoints,
    save_optimizer_state,
    save_rng_state,
    select_checkpoint,
    write_complete_marker,
)


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


def _complete(folder, step=2, weights=b"0123456789"):
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "trainer_state.json").write_text("{}")
    (folder / "optimizer.safetensors").write_bytes(b"opt")
    write_complete_marker(folder, step)
    return folder


def _model_only(folder):
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"0123456789")


def _truncated(folder):
    _complete(folder)
    with (folder / "model.safetensors").open("r+b") as fh:
        fh.truncate(4)


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
    "truncated safetensors": (_truncated, "model.safetensors has 4 bytes, 10 when it was saved"),
    "a file missing": (_missing, "optimizer.safetensors is missing"),
    "unreadable marker": (_bad_marker, f"{COMPLETE_MARKER} is unreadable"),
    "absent": (lambda f: None, "not found"),
}


@pytest.mark.parametrize("case", list(INCOMPLETE))
def test_incomplete_checkpoints_are_named_for_what_is_wrong(tmp_path, case):
    make, message = INCOMPLETE[case]
    folder = tmp_path / "checkpoint-4"
    make(folder)
    assert message in checkpoint_problem(folder)


def test_a_complete_checkpoint_lists_its_files_and_sizes(tmp_path):
    folder = _complete(tmp_path / "checkpoint-2")
    assert checkpoint_problem(folder) is None
    marker = json.loads((folder / COMPLETE_MARKER).read_text())
    assert marker["step"] == 2
    assert marker["files"] == {"model.safetensors": 10, "optimizer.safetensors": 3, "trainer_state.json": 2}
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


def test_select_takes_the_newest_complete_and_names_the_skipped(tmp_path):
    _complete(tmp_path / "checkpoint-2")
    _complete(tmp_path / "checkpoint-10", step=10)
    _truncated(tmp_path / "checkpoint-12")
    (tmp_path / "checkpoint-14").mkdir()
    (tmp_path / "checkpoint-x").mkdir()  # not a checkpoint name
    chosen, skipped = select_checkpoint(tmp_path)
    assert chosen == tmp_path / "checkpoint-10"  # by step, not by name (10 > 2)
    assert [(p.name, why.split(" ")[0]) for p, why in skipped] == [
        ("checkpoint-14", "empty"),
        ("checkpoint-12", "model.safetensors"),
    ]
    assert select_checkpoint(tmp_path / "absent") == (None, [])


def test_rotation_counts_complete_checkpoints_by_completion_time(tmp_path):
    # resumed from 4 after an abandoned continuation had completed 8 and half-written 10; now 6 completes
    for step in (2, 4, 8):
        _complete(tmp_path / f"checkpoint-{step}", step=step)
    _model_only(tmp_path / "checkpoint-10")
    _complete(tmp_path / "checkpoint-6", step=6)  # completed last
    assert rotate_checkpoints(tmp_path, None) == []
    deleted = rotate_checkpoints(tmp_path, 2, keep=tmp_path / "checkpoint-2")
    assert sorted(p.name for p in deleted) == ["checkpoint-10", "checkpoint-4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2", "checkpoint-6", "checkpoint-8"]
    rotate_checkpoints(tmp_path, 1)
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-6"]  # the newest completed, not the highest N
