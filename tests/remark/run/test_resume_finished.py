"""``--resume`` means continue: a run that reached its ``max_steps`` is left byte for byte as it is (exit 0,
a message saying so), also with a smaller ``max_steps``; raising ``max_steps`` continues from the newest
checkpoint, says from where to where and records it in ``remark_config.json``; a resume that changes what
defines the run is refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from remark.cli.main import main
from tests.remark.run.run_fields import tiny_run_fields

pytestmark = pytest.mark.slow


def digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (names relative to it), and of nothing else."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def finished(hand_model_dir, tmp_path):
    """A 2-step run with a checkpoint at step 2, trained to the end: (config path, run folder)."""
    from tests.remark.conftest import write_hand_dataset

    data = tmp_path / "hand"
    write_hand_dataset(data)
    fields = tiny_run_fields(tmp_path / "run", data_dir=str(data), model_name_or_path=str(hand_model_dir),
                             max_steps=2, save_strategy="steps", save_steps=2)  # fmt: skip
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(fields))
    assert main(["train", "--config", str(path)]) == 0
    return path, tmp_path / "run"


def test_resume_of_a_finished_run_changes_nothing(finished, capsys):
    cfg, run = finished
    before = digest(run)
    assert {"final/model.safetensors", "train_summary.json", "checkpoint-2/model.safetensors"} <= set(before)
    capsys.readouterr()
    for extra in ([], ["--set", "max_steps=1"]):  # the same max_steps, and a smaller one
        assert main(["train", "--config", str(cfg), "--resume", *extra]) == 0
        out = capsys.readouterr().out
        assert digest(run) == before  # final/, checkpoints, logs and summary: byte for byte
        assert f"resume: the run in {run} already reached max_steps=" in out
        assert "(step 2, final/ written): nothing to train, nothing rewritten" in out
        assert f"final model: {run / 'final'} (unchanged, step 2)" in out


def test_raising_max_steps_continues_and_says_so(finished, capsys):
    cfg, run = finished
    final_before = digest(run / "final")
    capsys.readouterr()
    assert main(["train", "--config", str(cfg), "--resume", "--set", "max_steps=4"]) == 0
    out = capsys.readouterr().out
    assert f"resume: from {run / 'checkpoint-2'}" in out
    assert "resume: max_steps raised from 2 (the run's plan) to 4: training steps 3 to 4" in out
    summary = json.loads((run / "train_summary.json").read_text())
    assert (summary["global_step"], summary["max_steps"]) == (4, 4)
    assert (run / "checkpoint-4" / "model.safetensors").is_file()
    assert digest(run / "final") != final_before
    record = json.loads((run / "remark_config.json").read_text())
    assert record["max_steps"] == 4 and record["learning_rate"] == 5e-3  # what ran, and the resume recorded
    (resume,) = record["resumes"]
    assert resume["step"] == 2 and resume["checkpoint"] == "checkpoint-2"
    assert resume["changed"] == {"max_steps": [2, 4]} and "--resume --set max_steps=4" in resume["command"]


def test_a_resume_that_changes_the_method_is_refused_naming_the_fields(finished, capsys):
    """The saved run is continued or nothing: a changed reward, sampling or learning rate is exit 2 in one
    line, and the run folder is left byte for byte as it was."""
    cfg, run = finished
    before = digest(run)
    capsys.readouterr()
    argv = ["train", "--config", str(cfg), "--resume", "--set", "max_steps=4", "reward_scheme=responder",
            "sampling=per_responder", "learning_rate=1.0e-3"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert err[0].startswith(
        f"remark train: error: {run / 'checkpoint-2' / 'training_args.json'}, field '--resume'"
    )
    for change in ("learning_rate 0.005 -> 0.001", "reward_scheme 'union' -> 'responder'",
                   "sampling 'uniform' -> 'per_responder'"):  # fmt: skip
        assert change in err[0], err[0]
    assert "max_steps" not in err[0].split("(resume with")[0]  # allowed: not named
    assert digest(run) == before


def test_a_finished_run_resumed_with_another_method_is_refused_not_called_done(finished, capsys):
    """Nothing to train is not "the state asked for holds": a resume of a finished run that changes the
    reward is exit 2 naming the field (read from final/training_args.json), the folder unchanged."""
    cfg, run = finished
    before = digest(run)
    capsys.readouterr()
    assert main(["train", "--config", str(cfg), "--resume", "--set", "reward_scheme=responder"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert err[0].startswith(
        f"remark train: error: {run / 'final' / 'training_args.json'}, field '--resume'"
    ), err[0]
    assert "reward_scheme 'union' -> 'responder'" in err[0]
    assert "nothing to train" not in captured.out
    assert digest(run) == before


def test_a_run_killed_before_final_gets_final_from_its_last_checkpoint_without_training(finished, capsys):
    import shutil

    cfg, run = finished
    shutil.rmtree(run / "final")
    (run / "train_summary.json").unlink()  # as if killed between checkpoint-2 and the final save
    checkpoint = digest(run / "checkpoint-2")
    capsys.readouterr()
    assert main(["train", "--config", str(cfg), "--resume"]) == 0
    out = capsys.readouterr().out
    assert "resume: checkpoint-2 is at step 2, already at max_steps=2: nothing to train" in out
    assert json.loads((run / "train_summary.json").read_text())["global_step"] == 2
    assert digest(run / "final")["model.safetensors"] == checkpoint["model.safetensors"]
