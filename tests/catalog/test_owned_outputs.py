"""Owned outputs: atomic_dir refuses what it did not write, never replaces an input, cleans dead writers'
leftovers (restoring an output moved aside mid-swap) and reports the ones it cannot attribute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from catalog.io.errors import InputError
from catalog.io.outputs import (
    OUTPUT_MARKER,
    StaleOutputWarning,
    _host,
    atomic_dir,
    atomic_write,
    check_output_dir,
    clean_stale,
    output_kind,
)


def _layout(root: Path, case: str) -> tuple[Path, list[Path]]:
    """(destination, inputs) for one refusal case, built under ``root``."""
    data = root / "data"
    data.mkdir()
    (data / "requests.parquet").write_text("input")
    pred = root / "pred.jsonl"
    pred.write_text("{}\n")
    inputs = [data, pred]
    if case == "foreign folder":
        dest = root / "mine"
        dest.mkdir()
        (dest / "notes.txt").write_text("keep me")
    elif case == "other kind":
        dest = root / "scores"
        with atomic_dir(dest, "prep") as tmp:
            (tmp / "meta.json").write_text("{}")
    elif case == "unreadable marker":
        dest = root / "scores"
        dest.mkdir()
        (dest / OUTPUT_MARKER).write_text("{not json")
        (dest / "x.txt").write_text("x")
    elif case == "a file":
        dest = root / "out.txt"
        dest.write_text("a file")
    elif case == "equals input file":
        dest = pred
    elif case == "equals input folder":
        dest = data
    elif case == "contains an input":
        dest = root
    elif case == "inside an input":
        dest = data / "scores"
    elif case == "same input through a symlink":
        dest = root / "link"
        dest.symlink_to(data, target_is_directory=True)
    else:
        raise AssertionError(case)
    return dest, inputs


# case -> (message fragment, does --force allow it)
REFUSALS = {
    "foreign folder": ("a folder that remark did not write", True),
    "other kind": ("the output of 'prep'", True),
    "unreadable marker": ("a folder that remark did not write", True),
    "a file": ("exists and is not a folder", False),
    "equals input file": ("the output is the input", False),
    "equals input folder": ("the output is the input", False),
    "contains an input": ("the output contains the input", False),
    "inside an input": ("the output lies inside the input", False),
    "same input through a symlink": ("the output is the input", False),
}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _write_scores(dest: Path, inputs: list[Path], *, force: bool = False) -> None:
    with atomic_dir(dest, "eval-score", inputs=inputs, force=force) as tmp:
        (tmp / "metrics.json").write_text("{}")


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusals_leave_everything_in_place(tmp_path, case) -> None:
    dest, inputs = _layout(tmp_path, case)
    before = _snapshot(tmp_path)
    fragment, force_allows = REFUSALS[case]
    with pytest.raises(InputError, match=fragment) as err:
        _write_scores(dest, inputs)
    assert err.value.field == "--out"
    assert err.value.hint
    assert _snapshot(tmp_path) == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith((".tmp", ".old"))]
    if force_allows:
        _write_scores(dest, inputs, force=True)
        assert sorted(p.name for p in dest.iterdir()) == [OUTPUT_MARKER, "metrics.json"]
        assert output_kind(dest) == "eval-score"
    else:
        with pytest.raises(InputError, match=fragment):
            check_output_dir(dest, "eval-score", inputs=inputs, force=True)
        assert _snapshot(tmp_path) == before


def test_atomic_write_refuses_to_overwrite_an_input(tmp_path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("keep")

    def write() -> None:
        with atomic_write(src, inputs=[src]) as tmp:
            tmp.write_text("new")

    with pytest.raises(InputError, match="the output is the input"):
        write()
    assert src.read_text() == "keep"


def test_same_kind_empty_and_new_folders_are_replaced(tmp_path) -> None:
    out = tmp_path / "scores"
    check_output_dir(out, "eval-score")  # new path
    out.mkdir()
    check_output_dir(out, "eval-score")  # empty folder
    with atomic_dir(out, "eval-score") as tmp:
        (tmp / "a.txt").write_text("1")
    marker = json.loads((out / OUTPUT_MARKER).read_text())
    assert marker["kind"] == "eval-score" and marker["format"] == 1 and marker["remark_version"]
    with atomic_dir(out, "eval-score") as tmp:
        (tmp / "b.txt").write_text("2")
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARKER, "b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores"]


def test_a_folder_that_appears_during_the_work_is_not_replaced(tmp_path) -> None:
    out = tmp_path / "scores"

    def write_while_someone_creates_the_folder() -> None:
        with atomic_dir(out, "eval-score") as tmp:
            (tmp / "a.txt").write_text("1")
            out.mkdir()
            (out / "theirs.txt").write_text("theirs")

    with pytest.raises(InputError, match="did not write"):
        write_while_someone_creates_the_folder()
    assert [p.name for p in out.iterdir()] == ["theirs.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores"]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_dead_writers_leftovers_are_cleaned_and_an_output_moved_aside_is_restored(tmp_path) -> None:
    pid = _dead_pid()
    out = tmp_path / "ds"
    # a writer died between "old output aside" and "new output in": ds is missing, .old holds it
    old = tmp_path / f".ds.{_host()}.{pid}.abc123.old"
    old.mkdir()
    (old / "requests.parquet").write_text("previous")
    half = tmp_path / f".ds.{_host()}.{pid}.def456.tmp"
    half.mkdir()
    (half / "requests.parquet").write_text("half")
    done = clean_stale(out)
    assert (out / "requests.parquet").read_text() == "previous"
    assert len(done) == 2 and any(line.startswith("restored") for line in done)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
    # with ds present, a dead writer's .old is its leftover: removed
    old.mkdir()
    (tmp_path / f".ds.{_host()}.{pid}.x1.tmp").write_text("half a file")
    assert len(clean_stale(out)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_live_and_unattributed_leftovers_are_kept(tmp_path) -> None:
    out = tmp_path / "ds"
    live = tmp_path / f".ds.{_host()}.{os.getpid()}.abc.tmp"  # this very process: a writer at work
    live.mkdir()
    elsewhere = tmp_path / ".ds.otherhost.12345.abc.tmp"
    elsewhere.mkdir()
    unowned = tmp_path / ".ds.k2j4h_x.tmp"  # a temporary-like name with no owner: not remark's
    unowned.mkdir()
    unrelated = tmp_path / ".dsx.otherhost.1.abc.tmp"
    unrelated.mkdir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert clean_stale(out) == []
    reported = [str(w.message).split(":")[0] for w in caught if w.category is StaleOutputWarning]
    assert reported == [str(elsewhere)]
    assert {p.name for p in tmp_path.iterdir()} == {live.name, elsewhere.name, unowned.name, unrelated.name}


def test_writes_clean_their_own_dead_leftovers(tmp_path) -> None:
    pid = _dead_pid()
    (tmp_path / f".m.json.{_host()}.{pid}.q.tmp").write_text("half")
    with atomic_write(tmp_path / "m.json") as tmp:
        tmp.write_text("{}")
    (tmp_path / f".d.{_host()}.{pid}.q.tmp").mkdir()
    with atomic_dir(tmp_path / "d", "x") as tmp:
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "m.json"]
