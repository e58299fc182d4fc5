"""Inputs a command combines must belong together: outputs scored on different datasets are not compared,
a card's test section is this model's evaluation on its own dataset, the ProtoQA evaluator needs
predictions for the targets' questions."""

from __future__ import annotations

import json
import shutil

from remark.cli.main import main
from tests.eval.conftest import write_tiny_dataset
from tests.eval.test_cli import CI, PREDS, write_preds


def _score(data, preds, out):
    assert (
        main(
            [
                "eval",
                "score",
                "--data",
                str(data),
                "--predictions",
                str(preds),
                "--k",
                "1",
                *CI,
                "--out",
                str(out),
            ]
        )
        == 0
    )


def test_compare_refuses_outputs_scored_on_different_datasets_with_the_same_request_ids(tmp_path, capsys):
    one = write_tiny_dataset(tmp_path / "one")
    # the same request ids, another catalog: another dataset
    two = write_tiny_dataset(tmp_path / "two", catalog_columns={"popularity": [float(i) for i in range(8)]})
    preds = write_preds(tmp_path / "p.jsonl", PREDS)
    _score(one, preds, tmp_path / "a")
    _score(two, preds, tmp_path / "b")
    capsys.readouterr()
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--k", "1", *CI]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "scored with different dataset" in err[0] and "sha256 differ" in err[0]
    moved = tmp_path / "moved"
    shutil.copytree(one, moved)  # a copy of the same dataset elsewhere still compares
    _score(moved, preds, tmp_path / "c")
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "c"), "--k", "1", *CI]) == 0


def test_compare_refuses_different_splits(tmp_path, capsys):
    data = write_tiny_dataset(tmp_path / "d")
    preds = write_preds(tmp_path / "p.jsonl", PREDS)
    _score(data, preds, tmp_path / "a")
    assert (
        main(
            [
                "eval",
                "score",
                "--data",
                str(data),
                "--predictions",
                str(preds),
                "--k",
                "1",
                *CI,
                "--split",
                "all",
                "--on-missing",
                "empty",
                "--out",
                str(tmp_path / "b"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--k", "1", *CI]) == 2
    assert "different" in capsys.readouterr().err


def _card_folder(tmp_path, data):
    folder = tmp_path / "best"
    folder.mkdir()
    card = {
        "kind": "best",
        "step": 1,
        "total_steps": 1,
        "dataset": {"path": str(data)},
        "method": {},
        "base_model": "x",
        "grounding": {},
        "lora": None,
        "license": None,
        "command": None,
        "validation": {},
    }
    (folder / "card.json").write_text(json.dumps(card))
    return folder


def _fake_eval(out, *, model, data, sha):
    out.mkdir()
    (out / "metrics.json").write_text(
        json.dumps(
            {
                "n_requests": 4,
                "per_responder": {"recall@5": {"mean": 0.5, "ci_low": 0.1, "ci_high": 0.9}},
                "settings": {
                    "model": str(model),
                    "data": str(data),
                    "split": "test",
                    "dataset": {"path": str(data), "sha256": sha},
                },
            }
        )
    )
    return out


def test_card_refuses_an_evaluation_of_another_model_or_dataset(tmp_path, capsys):
    from data_prep.dataset import dataset_identity, load_dataset

    data = write_tiny_dataset(tmp_path / "data")
    other = write_tiny_dataset(
        tmp_path / "other", catalog_columns={"popularity": [float(i) for i in range(8)]}
    )
    folder = _card_folder(tmp_path, data)
    sha = dataset_identity(load_dataset(data))["sha256"]
    assert (
        main(
            [
                "card",
                str(folder),
                "--test",
                str(_fake_eval(tmp_path / "e1", model=tmp_path / "elsewhere", data=data, sha=sha)),
            ]
        )
        == 2
    )
    assert "another model" in capsys.readouterr().err
    other_sha = dataset_identity(load_dataset(other))["sha256"]
    assert (
        main(
            [
                "card",
                str(folder),
                "--test",
                str(_fake_eval(tmp_path / "e2", model=folder, data=other, sha=other_sha)),
            ]
        )
        == 2
    )
    assert "another dataset" in capsys.readouterr().err
    assert not (folder / "README.md").exists()  # nothing written


def _protoqa(path, ids):
    rows = [
        {
            "metadata": {"id": q},
            "question": {"original": "Name a fruit.", "normalized": "name a fruit."},
            "answers": {"raw": {"apple": 3}, "clusters": {f"{q}.0": {"count": 3, "answers": ["apple"]}}},
        }
        for q in ids
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_protoqa_evaluator_refuses_predictions_for_none_of_the_questions(tmp_path, capsys):
    targets = _protoqa(tmp_path / "t.jsonl", ["q1", "q2"])
    none = tmp_path / "none.jsonl"
    none.write_text(json.dumps({"q9": ["apple"]}) + "\n")
    assert main(["eval", "protoqa-evaluator", "--targets", str(targets), "--predictions", str(none)]) == 2
    assert (
        "no question id of the predictions (1) is among the targets' (2 questions)" in capsys.readouterr().err
    )
    some = tmp_path / "some.jsonl"
    some.write_text(json.dumps({"q1": ["apple"], "q9": ["pear"]}) + "\n")
    assert main(["eval", "protoqa-evaluator", "--targets", str(targets), "--predictions", str(some)]) == 0
    captured = capsys.readouterr()
    assert (
        "predictions for 1 of the 2 target questions" in captured.err
        and "1 predicted ids are not targets" in captured.err
    )
