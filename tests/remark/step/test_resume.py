"""Checkpoints that survive ``kill -9``, resume from the newest complete one, and a used output_dir.

A run killed in the middle of saving checkpoint-4 (model written, optimizer not; or everything written
but the completion marker) leaves checkpoint-2 complete; ``remark train --resume`` skips checkpoint-4,
saying why, continues from checkpoint-2 and reproduces the uninterrupted run's losses. A complete
checkpoint damaged afterwards (bytes of its weights or its trainer state overwritten, sizes unchanged) is
skipped the same way, and the run resumed past it equals one resumed from checkpoint-2 directly. A new run
into a used output_dir is refused; ``--overwrite`` removes exactly the old run's files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from remark.cli.main import main
from remark.run.run_files import prepare_output_dir
from remark.step.checkpoint import COMPLETE_MARKER, checkpoint_problem, file_sha256
from remark.step.run_ledger import claim
from tests.killable import run_and_kill
from tests.remark.run.run_fields import tiny_run_fields

pytestmark = pytest.mark.slow


def write_config(tmp_path: Path, data: Path, model: Path, name: str, **overrides) -> Path:
    own = dict(data_dir=str(data), model_name_or_path=str(model), save_strategy="steps", save_steps=2)
    fields = tiny_run_fields(tmp_path / name, **(own | overrides))
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(fields))
    return path


def logged_losses(checkpoint: Path) -> dict[int, float]:
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return {h["step"]: h["loss"] for h in state["log_history"] if "loss" in h}


@pytest.fixture(scope="module")
def uninterrupted(hand_model_dir, tmp_path_factory):
    from tests.remark.conftest import write_hand_dataset

    root = tmp_path_factory.mktemp("uninterrupted")
    data = root / "hand"
    write_hand_dataset(data)
    assert main(["train", "--config", str(write_config(root, data, hand_model_dir, "full"))]) == 0
    losses = logged_losses(root / "full" / "checkpoint-4")
    assert sorted(losses) == [1, 2, 3, 4]
    return data, losses


@pytest.mark.parametrize("point", ["ckpt-optimizer:4", "ckpt-marker:4"], ids=["model-only", "all-but-marker"])
def test_kill_during_a_checkpoint_save_then_resume_reproduces_the_losses(
    uninterrupted, hand_model_dir, tmp_path, capsys, point
):
    data, expected = uninterrupted
    cfg = write_config(tmp_path, data, hand_model_dir, "part")
    run_and_kill(tmp_path / "ready", point, ["train", "--config", str(cfg)])
    run = tmp_path / "part"
    assert checkpoint_problem(run / "checkpoint-2") is None
    assert checkpoint_problem(run / "checkpoint-4").startswith(
        f"no {COMPLETE_MARKER}, the save was interrupted"
    )
    held = {p.name for p in (run / "checkpoint-4").iterdir()}
    assert "model.safetensors" in held
    if point.startswith("ckpt-optimizer"):
        assert "optimizer.safetensors" not in held and "trainer_state.json" not in held
    else:
        assert {
            "optimizer.safetensors",
            "scheduler.json",
            "rng_state.safetensors",
            "trainer_state.json",
        } <= held
    assert not (run / "final").exists() and not (run / "train_summary.json").exists()
    # an explicit path to the incomplete checkpoint is refused, naming the complete one
    capsys.readouterr()
    assert main(["train", "--config", str(cfg), "--resume", str(run / "checkpoint-4")]) == 2
    err = capsys.readouterr().err
    assert "cannot resume from this checkpoint" in err and "checkpoint-2, the newest complete one" in err
    assert "Traceback" not in err
    # --resume takes checkpoint-2, says it skipped checkpoint-4, and lands where the whole run did
    assert main(["train", "--config", str(cfg), "--resume"]) == 0
    out = capsys.readouterr().out
    assert "resume: skipped checkpoint-4: no checkpoint_complete.json" in out
    assert f"resume: from {run / 'checkpoint-2'}" in out
    assert checkpoint_problem(run / "checkpoint-4") is None  # saved again, whole this time
    got = logged_losses(run / "checkpoint-4")
    assert sorted(got) == [1, 2, 3, 4]
    for step in (3, 4):
        assert got[step] == pytest.approx(expected[step], rel=1e-5, abs=1e-7)
    assert json.loads((run / "train_summary.json").read_text())["global_step"] == 4
    assert (run / "final" / "model.safetensors").is_file()


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): file_sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def _weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path))


def _copy_run(
    uninterrupted_root: Path, tmp_path: Path, name: str, data: Path, model: Path
) -> tuple[Path, Path]:
    """The uninterrupted run's folder (checkpoint-2 and checkpoint-4, both complete) copied to ``name`` as a
    run killed after its last checkpoint (no final/, no train_summary.json: a finished run is left as it
    is by --resume), with a config whose output_dir is the copy."""
    shutil.copytree(uninterrupted_root / "full", tmp_path / name)
    shutil.rmtree(tmp_path / name / "final")
    (tmp_path / name / "train_summary.json").unlink()
    return tmp_path / name, write_config(tmp_path, data, model, name)


@pytest.fixture(scope="module")
def resumed_from_2(uninterrupted, hand_model_dir, tmp_path_factory) -> Path:
    """The uninterrupted run copied, then resumed from its checkpoint-2 by path (the reference)."""
    data, _ = uninterrupted
    ref, cfg = _copy_run(Path(data).parent, tmp_path_factory.mktemp("reference"), "ref", data, hand_model_dir)
    assert main(["train", "--config", str(cfg), "--resume", str(ref / "checkpoint-2")]) == 0
    return ref


DAMAGE = {
    # flipped bytes inside a tensor: the header still parses, only the hash can tell
    "weights": (
        "model.safetensors",
        -64,
        b"\x7f" * 16,
        "model.safetensors does not match its recorded sha256",
    ),
    # the header length itself: safetensors would say "header too large"
    "weights-header": (
        "model.safetensors",
        0,
        b"\xff" * 8,
        "the safetensors header of model.safetensors claims",
    ),
    "trainer-state": ("trainer_state.json", 0, b"#", "trainer_state.json is unreadable: not valid JSON"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_checkpoint_is_skipped_and_the_resume_equals_one_from_the_older(
    uninterrupted, resumed_from_2, hand_model_dir, tmp_path, capsys, damage
):
    data, _ = uninterrupted
    root = Path(data).parent
    name, offset, garbage, why = DAMAGE[damage]
    run, cfg = _copy_run(root, tmp_path, "damaged", data, hand_model_dir)
    target = run / "checkpoint-4" / name
    size = target.stat().st_size
    with target.open("r+b") as fh:  # same size: the marker's sizes still agree
        fh.seek(offset if offset >= 0 else size + offset)
        fh.write(garbage)
    assert target.stat().st_size == size and checkpoint_problem(run / "checkpoint-4", verify=False) is None
    older = _hashes(run / "checkpoint-2")
    capsys.readouterr()
    # passed by path, the damaged checkpoint is refused before anything loads
    assert main(["train", "--config", str(cfg), "--resume", str(run / "checkpoint-4")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"{run / 'checkpoint-4'}, field '--resume': cannot resume from this checkpoint: {why}" in err
    # --resume skips it, says why, and continues from checkpoint-2
    assert main(["train", "--config", str(cfg), "--resume"]) == 0
    out = capsys.readouterr().out
    assert f"resume: skipped checkpoint-4: {why}" in out
    assert f"resume: from {run / 'checkpoint-2'}" in out
    assert _hashes(run / "checkpoint-2") == older  # the sound checkpoint is left intact
    assert checkpoint_problem(run / "checkpoint-4") is None  # saved again, sound this time
    # the same as a run resumed from checkpoint-2 directly, bit for bit
    ref = resumed_from_2
    assert logged_losses(run / "checkpoint-4") == logged_losses(ref / "checkpoint-4")
    got, want = _weights(run / "final" / "model.safetensors"), _weights(ref / "final" / "model.safetensors")
    assert got.keys() == want.keys()
    assert all(got[k].equal(want[k]) for k in want)


def test_rotation_keeps_only_complete_checkpoints(uninterrupted, hand_model_dir, tmp_path, capsys):
    data, _ = uninterrupted
    cfg = write_config(tmp_path, data, hand_model_dir, "rot", save_steps=1, save_total_limit=2)
    run = tmp_path / "rot"
    run.mkdir()
    (run / "checkpoint-9").mkdir()  # a half-written folder from some earlier crash of a run here
    claim(run, ["checkpoint-9"])  # which its trainer claimed before saving into it
    assert main(["train", "--config", str(cfg), "--overwrite"]) == 0
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-3", "checkpoint-4"]
    assert all(checkpoint_problem(p) is None for p in run.glob("checkpoint-*"))


def test_resume_without_a_checkpoint_is_a_clear_error(uninterrupted, hand_model_dir, tmp_path, capsys):
    data, _ = uninterrupted
    cfg = write_config(tmp_path, data, hand_model_dir, "none")
    assert main(["train", "--config", str(cfg), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "field '--resume': no complete checkpoint to resume from (there is no checkpoint-N)" in err
    assert "start the run without --resume" in err and "Traceback" not in err
    (tmp_path / "none" / "checkpoint-2").mkdir(parents=True)
    assert main(["train", "--config", str(cfg), "--resume"]) == 2
    captured = capsys.readouterr()
    assert "resume: skipped checkpoint-2: empty folder" in captured.out
    assert "no complete checkpoint to resume from (1 incomplete or damaged, listed above)" in captured.err
    assert main(["train", "--config", str(cfg), "--resume", "--overwrite"]) == 2
    assert "--resume and --overwrite contradict each other" in capsys.readouterr().err


def test_a_used_output_dir_is_refused_and_overwrite_clears_only_the_old_run(
    uninterrupted, hand_model_dir, tmp_path, capsys
):
    data, _ = uninterrupted
    name = "used"
    first = write_config(
        tmp_path,
        data,
        hand_model_dir,
        name,
        validation_steps=2,
        valid_split="train",
        validation_metric="eval/recall@3/union",
    )
    assert main(["train", "--config", str(first)]) == 0
    run = tmp_path / name
    (run / "notes.txt").write_text("mine")
    (run / "assets").mkdir()
    (run / "assets" / "build.json").write_text("{}")
    assert sorted(p.name for p in run.iterdir()) == [
        ".remark-outputs.json",  # records README.md as the run's own file
        ".remark-run.json",  # the run's ledger: the names the run claimed before it wrote them
        "README.md",  # TRL's model card, rewritten at every checkpoint save
        "assets",
        "best",
        "checkpoint-2",
        "checkpoint-4",
        "eval",
        "eval_log.jsonl",
        "final",
        "notes.txt",
        "remark_config.json",
        "train_summary.json",
    ]
    # a second, shorter run without --resume would keep the old log lines, tables and best/: refused
    second = write_config(
        tmp_path, data, hand_model_dir, name, max_steps=2, validation_steps=2, valid_split="train",
        validation_metric="eval/recall@3/union",
    )  # fmt: skip
    capsys.readouterr()
    assert main(["train", "--config", str(second)]) == 2
    err = capsys.readouterr().err
    assert "output_dir holds a previous run (eval_log.jsonl, eval/, best/, final/, train_summary.json" in err
    assert "--resume" in err and "--overwrite" in err and "Traceback" not in err
    assert (run / "checkpoint-4").is_dir()  # nothing touched
    assert main(["train", "--config", str(second), "--overwrite"]) == 0
    out = capsys.readouterr().out
    assert "overwrite: removed the previous run's eval_log.jsonl, eval, best, final" in out
    assert (run / "notes.txt").read_text() == "mine" and (run / "assets" / "build.json").is_file()
    assert not (run / "checkpoint-4").exists()
    log = [json.loads(x) for x in (run / "eval_log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in log] == [0, 2]
    summary = json.loads((run / "train_summary.json").read_text())
    assert summary["global_step"] == 2 and summary["best"]["step"] in (0, 2)


def test_remark_config_alone_is_not_a_previous_run(tmp_path):
    claim(tmp_path, ["remark_config.json"])  # a run here wrote it, then crashed before its first step
    (tmp_path / "remark_config.json").write_text("{}")
    assert prepare_output_dir(tmp_path, resume=False, overwrite=False) == []
    assert prepare_output_dir(tmp_path / "new", resume=False, overwrite=False) == []
