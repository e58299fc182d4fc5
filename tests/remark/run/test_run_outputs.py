"""What ``remark train`` writes into output_dir: ``--overwrite`` also clears TensorBoard's ``runs/`` and a
``merged_base/`` (only what the run's ledger claims), and ``best/`` / ``final/`` never exist without their card."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
from transformers import TrainerCallback

from catalog.io.errors import InputError
from catalog.io.outputs import atomic_dir
from remark.cli.main import main
from remark.run.callbacks import ValidationCallback
from remark.run.run_files import prepare_output_dir, previous_run
from remark.run.training import run_training
from remark.step.run_ledger import LEDGER, claim
from tests.remark.run.test_training_run import config


def _events(folder, name="events.out.tfevents.1.host.1.0"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(b"\x00tb")


def test_overwrite_clears_tensorboard_logs_and_merged_base_but_nothing_else(tmp_path):
    run = tmp_path / "run"
    claim(run, ["eval_log.jsonl", "runs", "merged_base"])  # what the run claims before it writes them
    (run / "eval_log.jsonl").write_text("{}\n")
    _events(run / "runs" / "Dec01_12-00-00_host")
    _events(run / "runs" / "Dec01_13-00-00_host" / "1733050000.1")  # add_hparams' nested folder
    _events(run / "runs", "events.out.tfevents.2.host.2.0")
    (run / "runs" / "mine.txt").write_text("keep")  # not TensorBoard's
    (run / "runs" / "mixed").mkdir()
    _events(run / "runs" / "mixed")
    (run / "runs" / "mixed" / "notes.md").write_text("keep")  # a folder holding more than event files
    with atomic_dir(run / "merged_base", "merged-model") as tmp:
        (tmp / "model.safetensors").write_bytes(b"w")
    assert [p.name for p in previous_run(run)] == ["eval_log.jsonl", "runs", "merged_base"]

    removed = prepare_output_dir(run, resume=False, overwrite=True)
    assert [p.name for p in removed] == ["eval_log.jsonl", "runs", "merged_base"]
    assert sorted(p.name for p in run.iterdir()) == [LEDGER, "runs"]
    assert sorted(p.name for p in (run / "runs").iterdir()) == ["mine.txt", "mixed"]
    assert sorted(p.name for p in (run / "runs" / "mixed").iterdir()) == [
        "events.out.tfevents.1.host.1.0",
        "notes.md",
    ]

    # runs/ of event files only goes whole; a merged_base/ the run's ledger does not claim is refused, kept
    other = tmp_path / "other"
    claim(other, ["runs", "final"])
    _events(other / "runs" / "Dec01_12-00-00_host")
    (other / "final").mkdir()
    (other / "merged_base").mkdir()
    (other / "merged_base" / "model.safetensors").write_bytes(b"theirs")
    with pytest.raises(InputError, match="merged_base/"):
        prepare_output_dir(other, resume=False, overwrite=True)
    shutil.move(other / "merged_base", tmp_path / "theirs")
    assert [p.name for p in prepare_output_dir(other, resume=False, overwrite=True)] == ["final", "runs"]
    assert sorted(p.name for p in other.iterdir()) == [LEDGER]
    assert (tmp_path / "theirs" / "model.safetensors").read_bytes() == b"theirs"


def test_logs_of_a_run_that_died_before_its_first_step_are_no_previous_run(tmp_path):
    claim(tmp_path, ["runs", "remark_config.json", "merged_base"])
    _events(tmp_path / "runs" / "Dec01_12-00-00_host")
    (tmp_path / "remark_config.json").write_text("{}")
    with atomic_dir(tmp_path / "merged_base", "merged-model") as tmp:
        (tmp / "model.safetensors").write_bytes(b"w")
    assert prepare_output_dir(tmp_path, resume=False, overwrite=False) == []  # not refused
    assert (tmp_path / "runs").is_dir()  # and not cleared without --overwrite


class Scripted(ValidationCallback):
    """The real callback with scripted values: best at step 1, then step 3 (of max_steps 4)."""

    script = iter([[0.0, 0.2], [0.4, 0.6], [0.1, 0.3], [0.6, 0.8], [0.2, 0.2]])

    def measure(self, model, tokenizer):
        values = next(self.script)
        per_request = pl.DataFrame({"request_id": self.requests["request_id"], self.metric: values})
        return {self.metric: sum(values) / len(values)}, per_request


class WatchBest(TrainerCallback):
    """After each step's validation (callbacks run in order): what best/ holds whenever it exists."""

    def __init__(self, out):
        self.out, self.seen = out, []

    def on_step_end(self, args, state, control, **kwargs):
        best = self.out / "best"
        if best.is_dir():
            card = json.loads((best / "card.json").read_text()) if (best / "card.json").is_file() else None
            self.seen.append(
                (
                    state.global_step,
                    (best / "README.md").is_file(),
                    card and (card["step"], card["total_steps"]),
                )
            )


@pytest.mark.slow
def test_best_and_final_carry_their_cards_from_the_moment_they_exist(
    hand_dataset, hand_model_dir, tmp_path, monkeypatch
):
    metric = "eval/recall@3/union"
    cfg = config(
        tmp_path, data_dir=str(hand_dataset.path), model_name_or_path=str(hand_model_dir), max_steps=4
    )
    out = tmp_path / "run"
    validation = Scripted(hand_dataset, split="train", k=3, every=1, metric=metric, max_new_tokens=24)
    watch = WatchBest(out)

    import remark.run.training as train_mod

    swapped = []
    real = train_mod.atomic_dir

    def watched(path, *a, **k):  # final/: the card is in the folder before it is swapped in
        cm = real(path, *a, **k)

        class Wrap:
            def __enter__(self):
                self.tmp = cm.__enter__()
                return self.tmp

            def __exit__(self, *exc):
                swapped.append(sorted(p.name for p in self.tmp.iterdir()))
                return cm.__exit__(*exc)

        return Wrap()

    monkeypatch.setattr(train_mod, "atomic_dir", watched)
    summary = run_training(cfg, callbacks=[validation, watch], command="remark train --config t.yaml")
    # best/ appears at step 1 with its card (step 1 of the planned 4), is replaced at step 3 with its own
    assert [s for s in watch.seen if s[0] in (1, 2, 3, 4)] == [
        (1, True, (1, 4)),
        (2, True, (1, 4)),
        (3, True, (3, 4)),
        (4, True, (3, 4)),
    ]
    assert summary["best"]["step"] == 3
    assert len(swapped) == 1 and {"README.md", "card.json", "model.safetensors"} <= set(swapped[0])
    final = json.loads((out / "final" / "card.json").read_text())
    assert (final["kind"], final["step"], final["total_steps"]) == ("final", 4, 4)
    assert final["command"] == "remark train --config t.yaml"
    text = (out / "best" / "README.md").read_text()
    assert "# best: step 3 of 4" in text and f"| `{metric}` | 0.7000 |" in text


@pytest.mark.slow
def test_a_run_that_stops_early_corrects_best_cards_total(hand_dataset, hand_model_dir, tmp_path):
    metric = "eval/recall@3/union"
    cfg = config(
        tmp_path, data_dir=str(hand_dataset.path), model_name_or_path=str(hand_model_dir), max_steps=4
    )

    class StopAt2(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 2:
                control.should_training_stop = True

    class Peak1(Scripted):
        script = iter([[0.0, 0.2], [0.4, 0.6], [0.1, 0.3]])

    validation = Peak1(hand_dataset, split="train", k=3, every=1, metric=metric, max_new_tokens=24)
    summary = run_training(cfg, callbacks=[validation, StopAt2()])
    out = tmp_path / "run"
    assert summary["global_step"] == 2
    assert "# best: step 1 of 2" in (out / "best" / "README.md").read_text()
    assert json.loads((out / "best" / "card.json").read_text())["total_steps"] == 2


def test_diagnose_pass_rates_out_refuses_the_lists_file_it_reads(tmp_path, capsys):
    data = tmp_path / "synth"
    assert main(["prep", "synthetic", "--n-requests", "30", "--n-items", "20", "--out", str(data)]) == 0
    lists = tmp_path / "lists.jsonl"
    lists.write_text('{"request_id": "x", "lists": [["a"]]}\n')
    before = lists.read_bytes()
    capsys.readouterr()
    argv = ["diagnose", str(data), "--lists", str(lists), "--pass-rates-out", str(lists)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "field '--pass-rates-out'" in err and "the output is the input" in err and "Traceback" not in err
    assert lists.read_bytes() == before
