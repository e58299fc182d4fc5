"""``--out`` through the CLI: what ``remark prep``, ``remark eval score`` and ``remark eval run`` refuse
(exit 2, a message naming the path and what to do, no traceback, every byte left in place), what
``--force`` may replace (a foreign folder, never an input), and what they replace freely (their own
earlier output). ``remark eval compare`` refuses a folder without an output marker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from catalog.io.outputs import OUTPUT_MARKER, output_kind
from remark.cli.main import main
from tests.data_prep.conftest import write_catalog_csv, write_jsonl
from tests.data_prep.test_pool import ROWS
from tests.eval.conftest import write_tiny_dataset


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """Inputs for both commands, a foreign folder, and one earlier output of each command (built once)."""
    root = tmp_path_factory.mktemp("outputs")
    (root / "in").mkdir()
    write_jsonl(root / "in" / "threads.jsonl", ROWS)
    write_catalog_csv(root / "in" / "cat.csv")
    write_tiny_dataset(root / "data")
    (root / "preds.jsonl").write_text(
        "".join(
            json.dumps({"request_id": r, "recommendations": ["Moon"]}) + "\n"
            for r in ("r1", "r2", "r3", "r4")
        )
    )
    (root / "mine").mkdir()
    (root / "mine" / "notes.txt").write_text("my notes")
    w = paths(root)
    assert main(prep(w, w["old_prep"])) == 0
    assert main(score(w, w["old_score"])) == 0
    return root


def paths(root: Path) -> dict[str, Path]:
    names = {"threads": "in/threads.jsonl", "catalog": "in/cat.csv", "data": "data", "preds": "preds.jsonl"}
    names |= {"mine": "mine", "in": "in", "old_prep": "ds", "old_score": "scored"}
    return {k: root / v for k, v in names.items()}


@pytest.fixture
def world(template, tmp_path):
    """A fresh copy of the template in ``tmp_path`` (the markers travel with the folders)."""
    shutil.copytree(template, tmp_path, dirs_exist_ok=True)
    return paths(tmp_path)


def prep(w, out, *extra):
    return [
        "prep",
        "threads",
        "--input",
        str(w["threads"]),
        "--catalog",
        str(w["catalog"]),
        "--out",
        str(out),
        *extra,
    ]


def score(w, out, *extra):
    fast = ["--k", "1", "--resamples", "100", "--ci-method", "percentile"]
    return [
        "eval",
        "score",
        "--data",
        str(w["data"]),
        "--predictions",
        str(w["preds"]),
        "--out",
        str(out),
        *fast,
        *extra,
    ]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# (command, --out, message fragment, does --force make it pass)
REFUSED = [
    (prep, "mine", "refusing to replace a folder that remark did not write", True),
    (prep, "old_score", "refusing to replace the output of 'eval-score'", True),
    (prep, "threads", "the output is the input", False),
    (prep, "catalog", "the output is the input", False),
    (prep, "in", "the output contains the input", False),
    (score, "mine", "refusing to replace a folder that remark did not write", True),
    (score, "old_prep", "refusing to replace the output of 'prep'", True),
    (score, "data", "the output is the input", False),
    (score, "data/scores", "the output lies inside the input", False),
    (score, "preds", "the output is the input", False),
    (score, ".", "the output contains the input", False),
]


def _resolve(w, tmp_path, name):
    return w[name] if name in w else tmp_path / name


@pytest.mark.parametrize(
    ("command", "out", "fragment", "force_ok"),
    REFUSED,
    ids=[f"{c.__name__}-{o}" for c, o, _, _ in REFUSED],
)
def test_refused_outputs_exit_2_and_touch_nothing(world, tmp_path, capsys, command, out, fragment, force_ok):
    dest = _resolve(world, tmp_path, out)
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(command(world, dest)) == 2
    err = capsys.readouterr().err
    assert fragment in err and str(dest) in err and "field '--out'" in err
    assert "Traceback" not in err
    assert snapshot(tmp_path) == before
    assert main(command(world, dest, "--force")) == (0 if force_ok else 2)
    if force_ok:
        assert output_kind(dest) == ("prep" if command is prep else "eval-score")
        assert not (dest / "notes.txt").exists()
    else:
        assert snapshot(tmp_path) == before


def test_a_commands_own_earlier_output_is_replaced_whole(world, capsys):
    assert main(prep(world, world["old_prep"], "--split-fractions", "test=1.0")) == 0
    assert main(score(world, world["old_score"], "--k", "1", "2")) == 0
    assert sorted(p.name for p in world["old_score"].iterdir()) == [
        OUTPUT_MARKER, "metrics.json", "metrics.png", "per_request.parquet", "per_row.parquet", "report.md"
    ]  # fmt: skip
    assert "recall@2" in json.loads((world["old_score"] / "metrics.json").read_text())["union"]


def test_prep_out_equal_to_its_input_keeps_the_input(world, capsys):
    """The issue's case: the input used to be renamed to a hidden .old and the run exited 0."""
    before = world["threads"].read_bytes()
    assert main(prep(world, world["threads"])) == 2
    assert world["threads"].read_bytes() == before
    assert sorted(p.name for p in world["threads"].parent.iterdir()) == ["cat.csv", "threads.jsonl"]


def test_eval_run_refuses_before_loading_the_model(world, tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()  # not a model at all: the refusal comes first
    for out, fragment in [(model, "the output is the input"), (world["mine"], "did not write")]:
        argv = ["eval", "run", "--model", str(model), "--data", str(world["data"]), "--out", str(out)]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert fragment in err and "Traceback" not in err


def test_compare_refuses_a_folder_without_an_output_marker(world, tmp_path, capsys):
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    for name in ("metrics.json", "per_request.parquet"):
        (legacy / name).write_bytes((world["old_score"] / name).read_bytes())
    argv = ["eval", "compare", str(legacy), str(world["old_score"]), "--k", "1", "--resamples", "100"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no output marker" in err and "may come from different runs" in err
    ok = [
        "eval",
        "compare",
        str(world["old_score"]),
        str(world["old_score"]),
        "--k",
        "1",
        "--resamples",
        "100",
    ]
    assert main([*ok, "--json"]) == 0


def test_single_file_outputs_refuse_their_inputs(world, tmp_path, capsys):
    """diagnose --pass-rates-out never writes into the dataset it reads; convert-protoqa never over its input."""
    before = snapshot(tmp_path)
    inside = world["data"] / "pass_rates.parquet"
    argv = ["diagnose", str(world["data"]), "--policy", "popularity", "--pass-rates-out", str(inside)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "field '--pass-rates-out'" in err and "lies inside the input" in err and "Traceback" not in err
    assert snapshot(tmp_path) == before
    src = tmp_path / "pq.jsonl"
    src.write_text(json.dumps({"q1": ["a", "b"]}) + "\n")
    before = snapshot(tmp_path)
    assert main(["eval", "convert-protoqa", str(src), "--out", str(src)]) == 2
    err = capsys.readouterr().err
    assert "the output is the input" in err and "Traceback" not in err
    assert snapshot(tmp_path) == before
    assert main(["eval", "convert-protoqa", str(src), "--out", str(tmp_path / "preds2.jsonl")]) == 0
    assert json.loads((tmp_path / "preds2.jsonl").read_text()) == {
        "request_id": "q1",
        "recommendations": ["a", "b"],
    }
