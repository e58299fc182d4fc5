"""What ``remark train`` may delete in its ``output_dir``: only what a run's ledger claims (never a path
because of its name), and never an input.

An input (the dataset, the model, the validation data, the config file) lying in ``output_dir`` under a
name a run writes (``eval/``, ``final/``, ``best/``, ``sampled/``, ``checkpoint-N/``, ``remark_config.json``,
...) is refused with exit 2 in one line naming the setting, with and without ``--overwrite``, and nothing is
removed. A folder of the user's under such a name that is not an input is named for what it is (a prepared
dataset, a model), not called a previous run, and refused likewise. ``--overwrite`` and rotation remove only
what the ledger claims; a refused run leaves no ledger behind.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import yaml

from remark.cli.main import main
from remark.run.run_files import foreign_paths, prepare_output_dir, previous_run
from remark.step.checkpoint import rotate_checkpoints, write_complete_marker
from remark.step.run_ledger import LEDGER, claim, claims
from tests.remark.run.run_fields import tiny_run_fields


def tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its sha256 (what a refused command must leave as it was)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def config(path: Path, out: Path, data: Path, model: Path, **extra) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = tiny_run_fields(out, data_dir=str(data), model_name_or_path=str(model), **extra)
    path.write_text(yaml.safe_dump(fields))
    return path


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("name", ["eval", "final", "best", "sampled", "checkpoint-3", "merged_base"])
@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
def test_a_dataset_kept_under_a_name_the_run_writes_is_refused_and_kept(
    hand_dataset, hand_model_dir, tmp_path, capsys, name, overwrite
):
    out = tmp_path / "out"
    data = out / name
    shutil.copytree(hand_dataset.path, data)
    before = tree(out)
    cfg = config(tmp_path / "run.yaml", out, data, hand_model_dir)
    assert main(["train", "--config", str(cfg), *(["--overwrite"] if overwrite else [])]) == 2
    line = one_line(capsys)
    assert f"field 'data_dir': data_dir is {data}, which the run writes" in line, line
    assert "previous run" not in line and "move data_dir out of output_dir" in line
    assert tree(out) == before and not (out / LEDGER).exists()


@pytest.mark.parametrize(
    ("setting", "where"),
    [
        ("model_name_or_path", "final"),
        ("model_name_or_path", "checkpoint-2/model"),
        ("validation_data_dir", "eval/valid"),
        ("--config", "remark_config.json"),
        ("--config", "best/run.yaml"),
    ],
)
def test_every_input_inside_what_the_run_writes_is_refused(
    hand_dataset, hand_model_dir, tmp_path, capsys, setting, where
):
    out = tmp_path / "out"
    data, model, cfg_path = hand_dataset.path, hand_model_dir, tmp_path / "run.yaml"
    extra = {}
    if setting == "model_name_or_path":
        model = out / where
        shutil.copytree(hand_model_dir, model)
    elif setting == "validation_data_dir":
        shutil.copytree(hand_dataset.path, out / where)
        extra = {
            "validation_data_dir": str(out / where),
            "validation_steps": 2,
            "validation_metric": "eval/recall@3/union",
            "valid_split": "train",
        }
    else:
        cfg_path = out / where
    cfg = config(cfg_path, out, data, model, **extra)
    before = tree(out)
    for flags in ([], ["--overwrite"]):
        assert main(["train", "--config", str(cfg), *flags]) == 2
        line = one_line(capsys)
        assert f"field '{setting}': {setting} " in line and "which the run writes" in line, line
        assert tree(out) == before


def test_a_users_dataset_under_a_run_name_is_named_for_what_it_is_not_a_previous_run(
    hand_dataset, hand_model_dir, tmp_path, capsys
):
    out = tmp_path / "out"
    shutil.copytree(hand_dataset.path, out / "sampled")
    shutil.copytree(hand_model_dir, out / "final")
    (out / "eval_log.jsonl").write_text('{"mine": 1}\n')
    before = tree(out)
    cfg = config(tmp_path / "run.yaml", out, hand_dataset.path, hand_model_dir)
    for flags in ([], ["--overwrite"]):
        assert main(["train", "--config", str(cfg), *flags]) == 2
        line = one_line(capsys)
        assert "previous run" not in line
        assert "sampled/ (a prepared dataset)" in line and "final/ (a model folder)" in line, line
        assert "eval_log.jsonl" in line and "no run's ledger here" in line
        assert tree(out) == before


def test_overwrite_removes_only_what_the_ledger_claims(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "eval_log.jsonl").write_text("{}\n")
    (run / "final").mkdir()
    (run / "final" / "model.safetensors").write_bytes(b"w")
    (run / "checkpoint-2").mkdir()
    claim(run, ["eval_log.jsonl", "final", "checkpoint-2"])
    (run / "notes.txt").write_text("mine")
    assert [p.name for p in previous_run(run)] == ["eval_log.jsonl", "final", "checkpoint-2"]
    removed = prepare_output_dir(run, resume=False, overwrite=True)
    assert [p.name for p in removed] == ["eval_log.jsonl", "final", "checkpoint-2"]
    assert sorted(p.name for p in run.iterdir()) == [LEDGER, "notes.txt"]
    # the new run claims what it is about to write, under a new run id
    assert "final" in claims(run) and "checkpoint-2" not in claims(run)

    # a checkpoint-N the ledger does not claim: refused (with --overwrite too), never removed
    (run / "checkpoint-7").mkdir()
    (run / "checkpoint-7" / "weights").write_bytes(b"theirs")
    assert [p.name for p in foreign_paths(run)] == ["checkpoint-7"]
    with pytest.raises(Exception, match="no run's ledger here"):
        prepare_output_dir(run, resume=False, overwrite=True)
    assert (run / "checkpoint-7" / "weights").read_bytes() == b"theirs"


def test_a_resume_claims_what_it_will_write_and_refuses_nothing_it_finds(tmp_path):
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)  # a run made before ledgers: not claimed, not refused on resume
    assert prepare_output_dir(run, resume=True, overwrite=False) == []
    owned = claims(run)
    assert "eval" not in owned and "final" in owned and "train_summary.json" in owned


def test_rotation_deletes_only_the_runs_checkpoints(tmp_path):
    for step in (1, 2, 3):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"x" * step)
        write_complete_marker(folder, step)
    (tmp_path / "checkpoint-9").mkdir()  # incomplete, and not the run's
    claim(tmp_path, ["checkpoint-2", "checkpoint-3"])
    deleted = rotate_checkpoints(tmp_path, 1)
    assert [p.name for p in deleted] == ["checkpoint-2"]
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == [
        "checkpoint-1",
        "checkpoint-3",
        "checkpoint-9",
    ]


def test_a_run_refused_after_its_checks_leaves_no_ledger(hand_dataset, hand_model_dir, tmp_path, capsys):
    out = tmp_path / "new"
    cfg = config(tmp_path / "run.yaml", out, hand_dataset.path, hand_model_dir)
    assert main(["train", "--config", str(cfg), "--resume"]) == 2  # no checkpoint: refused after prepare
    assert "no complete checkpoint" in one_line(capsys)
    assert not out.exists()
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["train", "--config", str(cfg), "--resume"]) == 2
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
