"""Every file a command writes on its own, through the CLI (``catalog.io.outputs.atomic_file``): one row
per (command, output flag). Each is refused with exit 2, one line naming the path and what to do, every byte
left in place, when the target is a file remark did not write (``--force`` replaces it), one of the inputs
(``--force`` or not), inside an input folder, inside a folder another command writes whole, or has an
extension the command does not write; and a command replaces its own earlier output. A last test walks the
whole parser, so a new output flag cannot appear without a row here (or in ``tests/test_outputs_cli.py``
for folder outputs)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from catalog.io.outputs import atomic_dir, file_kind
from remark.cli.main import build_parser, main
from tests.eval.conftest import write_tiny_dataset
from tests.eval.test_steps import write_run

CURVE = {
    0: [0.0, 0.1, 0.1, 0.2],
    100: [0.1, 0.2, 0.3, 0.2],
    200: [0.3, 0.4, 0.5, 0.4],
    300: [0.4, 0.4, 0.5, 0.5],
}
FAST = ["--resamples", "100"]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = tmp_path_factory.mktemp("files")
    write_run(root / "a", CURVE)
    write_run(root / "b", {k: [x * 0.8 for x in v] for k, v in CURVE.items()})
    write_tiny_dataset(root / "data")
    (root / "protoqa.jsonl").write_text('{"q1": ["sleep", "eat"]}\n{"q2": ["run"]}\n')
    with atomic_dir(root / "scores", "eval-score") as tmp:  # another command's whole-folder output
        (tmp / "metrics.json").write_text("{}")
    return root


@pytest.fixture
def w(template, tmp_path):
    shutil.copytree(template, tmp_path, dirs_exist_ok=True)
    return tmp_path


# (command, flag, argv(root, out), the inputs it reads (paths under root), an extension it writes, one it does not)
Row = tuple[str, str, Callable[[Path, Path], list[str]], list[str], str, str]
ROWS: list[Row] = [
    ("curve fit", "--plot", lambda r, o: ["curve", "fit", str(r / "a"), "--plot", str(o)], ["a", "a/eval_log.jsonl"], ".png", ".csv"),
    ("curve fit", "--plot", lambda r, o: ["curve", "fit", str(r / "a/eval_log.jsonl"), "--plot", str(o)], ["a/eval_log.jsonl", "a"], ".svg", ".jsonl"),
    ("curve compare", "--plot", lambda r, o: ["curve", "compare", str(r / "a"), str(r / "b"), "--plot", str(o)], ["a", "b/eval_log.jsonl"], ".pdf", ".safetensors"),
    ("eval steps", "--plot", lambda r, o: ["eval", "steps", "--run", str(r / "a"), "--baseline", str(r / "b"), *FAST, "--plot", str(o)], ["a", "b"], ".png", ".json"),
    ("eval curves", "--out", lambda r, o: ["eval", "curves", str(r / "a"), str(r / "b"), *FAST, "--out", str(o)], ["a", "b"], ".svg", ".parquet"),
    ("eval convert-protoqa", "--out", lambda r, o: ["eval", "convert-protoqa", str(r / "protoqa.jsonl"), "--out", str(o)], ["protoqa.jsonl"], ".jsonl", ".json"),
    ("diagnose", "--pass-rates-out", lambda r, o: ["diagnose", str(r / "data"), "--policy", "popularity", "--group-size", "2", "--k", "2", "--pass-rates-out", str(o)], ["data", "data/requests.parquet"], ".csv", ".png"),
]  # fmt: skip
IDS = [f"{c.replace(' ', '-')}-{flag}-{i}" for i, (c, flag, *_) in enumerate(ROWS)]


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def refused(capsys, argv: list[str], root: Path, dest: Path, fragment: str, flag: str) -> None:
    """``argv`` exits 2 with one line naming ``dest``, ``flag`` and ``fragment``; nothing under root changed."""
    before = digest(root)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert str(dest) in lines[0] and f"field {flag!r}" in lines[0] and fragment in lines[0], lines[0]
    assert "(" in lines[0] and lines[0].endswith(")")  # what to do, in the closing parenthesis
    assert digest(root) == before


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_a_foreign_file_is_refused_and_replaced_only_with_force(w, capsys, row) -> None:
    _command, flag, argv, _, ext, _ = row
    dest = w / f"mine{ext}"
    dest.write_bytes(b"my own file")
    refused(capsys, argv(w, dest), w, dest, "refusing to replace a file that remark did not write", flag)
    assert main([*argv(w, dest), "--force"]) == 0
    assert dest.read_bytes() != b"my own file" and file_kind(dest) is not None


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_an_input_is_never_written_force_or_not(w, capsys, row) -> None:
    _command, flag, argv, inputs, _, _ = row
    for name in inputs:
        dest = w / name
        refused(capsys, argv(w, dest), w, dest, "", flag)
        refused(capsys, [*argv(w, dest), "--force"], w, dest, "", flag)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_inside_an_input_folder_or_another_commands_folder_is_refused(w, capsys, row) -> None:
    _command, flag, argv, inputs, ext, _ = row
    for folder in (w / name for name in inputs if (w / name).is_dir()):
        dest = folder / f"new{ext}"
        refused(capsys, [*argv(w, dest), "--force"], w, dest, "the output lies inside the input", flag)
    dest = w / "scores" / f"new{ext}"
    refused(capsys, [*argv(w, dest), "--force"], w, dest, "the output of 'eval-score'", flag)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_an_extension_the_command_does_not_write_is_refused(w, capsys, row) -> None:
    _command, flag, argv, _, _, wrong = row
    dest = w / f"new{wrong}"
    refused(capsys, [*argv(w, dest), "--force"], w, dest, "not a format this writes", flag)
    assert not dest.exists()


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_a_commands_own_earlier_output_is_replaced(w, capsys, row) -> None:
    _command, _flag, argv, _, ext, _ = row
    dest = w / "sub" / f"out{ext}"
    assert main(argv(w, dest)) == 0
    kind = file_kind(dest)
    assert kind is not None
    assert main(argv(w, dest)) == 0
    assert file_kind(dest) == kind
    assert sorted(p.name for p in dest.parent.iterdir()) == [".remark-outputs.json", dest.name]
    if ext in (".png", ".svg", ".pdf"):
        head = dest.read_bytes()[:5]
        assert head == {".png": b"\x89PNG\r", ".svg": b"<?xml", ".pdf": b"%PDF-"}[ext]
    elif ext == ".csv":
        assert dest.read_text().splitlines()[0] == "request_id,pass_rate,n_samples"
    else:
        assert [json.loads(x)["request_id"] for x in dest.read_text().splitlines()] == ["q1", "q2"]


#: folder outputs, each covered by its own tests (tests/test_outputs_cli.py and the command's tests).
FOLDER_OUTPUTS = {
    ("prep", "--out"),
    ("data fetch", "--out"),
    ("sft", "--out"),
    ("eval score", "--out"),
    ("eval run", "--out"),
    ("merge-adapter", "--out"),
    ("demo", "--out"),
    ("model fetch", "--out"),  # tests/remark/models/test_model_cli.py
    ("model import-gguf", "--out"),
}


def _output_flags(parser, prefix: str = "") -> set[tuple[str, str]]:
    import argparse

    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _output_flags(sub, f"{prefix} {name}".strip())
        for opt in action.option_strings:
            if opt in ("--out", "--plot") or opt.endswith("-out"):
                found.add((prefix, opt))
    return found


def test_every_output_flag_of_the_cli_has_a_row() -> None:
    assert _output_flags(build_parser()) == {(c, f) for c, f, *_ in ROWS} | FOLDER_OUTPUTS
