"""Single-file outputs (``atomic_file``): the format follows the extension, inputs and the inside of folders
written whole are never written, a file is replaced only when remark wrote it as that kind and nobody
changed it since (``--force`` otherwise); and a full disk or an unwritable folder is an ``OutputWriteError``
naming the destination, with the temporary removed and the previous output unchanged, for ``atomic_write``,
``atomic_file`` and ``atomic_dir`` alike (injected errors always; a real 2 MB tmpfs where mounting is
permitted)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import threading
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from catalog.io.errors import InputError
from catalog.io.outputs import (
    FILE_REGISTRY,
    PLOT_FORMATS,
    TABLE_FORMATS,
    OutputWriteError,
    atomic_dir,
    atomic_file,
    atomic_write,
    check_output_file,
    file_format,
    file_kind,
    output_kind,
)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _write(path: Path, text: str, kind: str = "plot", **kw) -> None:
    with atomic_file(path, kind, **kw) as tmp:
        tmp.write_text(text)


def _through(writing, write) -> None:
    """``write(tmp)`` inside the context manager ``writing`` (an atomic writer)."""
    with writing as tmp:
        write(tmp)


def test_the_format_follows_the_extension_or_is_refused(tmp_path) -> None:
    assert [file_format(tmp_path / f"a{e}", PLOT_FORMATS) for e in (".png", ".PDF", ".svg")] == [
        "png",
        "pdf",
        "svg",
    ]
    assert file_format("t.csv", TABLE_FORMATS) == "csv"
    for name in ("x.csv", "x", "x.png.tmp"):
        with pytest.raises(InputError, match="not a format this writes") as err:
            check_output_file(tmp_path / name, "plot", formats=PLOT_FORMATS, field="--plot")
        assert "field '--plot'" in str(err.value) and ".png, .pdf, .svg" in str(err.value)


def test_a_file_remark_wrote_is_replaced_and_a_foreign_one_only_with_force(tmp_path) -> None:
    out = tmp_path / "plot.png"
    _write(out, "one")
    assert file_kind(out) == "plot"
    entry = json.loads((tmp_path / FILE_REGISTRY).read_text())["files"]["plot.png"]
    assert entry["kind"] == "plot" and entry["size"] == 3 and len(entry["sha256"]) == 64
    _write(out, "two")  # its own earlier output
    assert out.read_text() == "two" and file_kind(out) == "plot"

    with pytest.raises(InputError, match="refusing to replace the output of 'plot'"):
        _write(out, "three", kind="table")  # another kind's file
    mine = tmp_path / "mine.png"
    mine.write_text("my own")
    with pytest.raises(InputError, match="a file that remark did not write") as err:
        _write(mine, "x")
    assert str(mine) in str(err.value) and "--force" in str(err.value)
    assert mine.read_text() == "my own"
    _write(mine, "forced", force=True)
    assert mine.read_text() == "forced" and file_kind(mine) == "plot"


def test_a_file_changed_since_remark_wrote_it_is_foreign_again(tmp_path) -> None:
    out = tmp_path / "rates.csv"
    _write(out, "a,b\n", kind="rates")
    out.write_text("a,b\nmy edit\n")  # the user edited it
    assert file_kind(out) is None
    with pytest.raises(InputError, match="a file changed since remark wrote it"):
        _write(out, "new", kind="rates")
    assert out.read_text() == "a,b\nmy edit\n"
    # same size, other bytes: the hash tells
    _write(tmp_path / "b.csv", "1234", kind="rates", force=True)
    (tmp_path / "b.csv").write_text("abcd")
    assert file_kind(tmp_path / "b.csv") is None


def test_registry_entries_of_vanished_files_are_pruned_and_a_lost_registry_makes_files_foreign(
    tmp_path,
) -> None:
    _write(tmp_path / "a.png", "a")
    _write(tmp_path / "b.png", "b")
    (tmp_path / "a.png").unlink()
    _write(tmp_path / "c.png", "c")
    assert sorted(json.loads((tmp_path / FILE_REGISTRY).read_text())["files"]) == ["b.png", "c.png"]
    (tmp_path / FILE_REGISTRY).write_text("{broken")
    assert file_kind(tmp_path / "b.png") is None
    with pytest.raises(InputError, match="did not write"):
        _write(tmp_path / "b.png", "again")


@pytest.mark.parametrize(
    "case", ["is the input", "inside an input folder", "inside a folder written whole", "a folder"]
)
def test_inputs_and_other_outputs_are_never_written_even_with_force(tmp_path, case) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "eval_log.jsonl").write_text("{}\n")
    with atomic_dir(tmp_path / "ds", "prep") as tmp:
        (tmp / "meta.json").write_text("{}")
    dest, inputs, fragment = {
        "is the input": (run / "eval_log.jsonl", [run / "eval_log.jsonl"], "the output is the input"),
        "inside an input folder": (run / "plot.png", [run], "the output lies inside the input"),
        "inside a folder written whole": (tmp_path / "ds" / "plot.png", [], "the output of 'prep'"),
        "a folder": (run, [], "exists and is a folder"),
    }[case]
    before = _files(tmp_path)
    for force in (False, True) if case != "a folder" else (False,):
        with pytest.raises(InputError, match=fragment):
            _write(dest, "x", inputs=inputs, force=force)
        assert _files(tmp_path) == before


def test_a_file_that_appears_during_the_work_is_not_replaced(tmp_path) -> None:
    out = tmp_path / "plot.png"

    def race() -> None:
        with atomic_file(out, "plot") as tmp:
            tmp.write_text("mine?")
            out.write_text("theirs")  # another process wrote it meanwhile

    with pytest.raises(InputError, match="did not write"):
        race()
    assert out.read_text() == "theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.png"]


def test_concurrent_writers_of_one_folder_keep_every_registry_entry(tmp_path) -> None:
    def work(i: int) -> None:
        for j in range(5):
            _write(tmp_path / f"p{i}.png", f"{i}-{j}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(file_kind(tmp_path / f"p{i}.png") == "plot" for i in range(6))
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_REGISTRY] + [f"p{i}.png" for i in range(6)]


# ---- a full disk or an unwritable folder -------------------------------------------------------------------


def _fail_with(code: int, *, rust: bool = False):
    def write(tmp: Path) -> None:
        tmp.write_bytes(b"half a file")
        if rust:  # polars, safetensors: no errno, only the message
            raise pl.exceptions.ComputeError(
                f"parquet: underlying IO error: {os.strerror(code)} (os error {code})"
            )
        raise OSError(code, os.strerror(code))

    return write


WRITERS = {
    "atomic_write": lambda dest: atomic_write(dest),
    "atomic_file": lambda dest: atomic_file(dest, "plot"),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize(
    ("code", "rust"),
    [
        (errno.ENOSPC, False),
        (errno.ENOSPC, True),
        (errno.EDQUOT, False),
        (errno.EROFS, False),
        (errno.EACCES, True),
    ],
)
def test_a_failed_write_is_exit_2_naming_the_file_and_keeps_the_previous_one(
    tmp_path, writer, code, rust
) -> None:
    dest = tmp_path / "out" / "plot.png"
    with WRITERS[writer](dest) as tmp:
        tmp.write_text("previous")
    before = _files(tmp_path)
    with pytest.raises(OutputWriteError) as err:
        _through(WRITERS[writer](dest), _fail_with(code, rust=rust))
    assert err.value.errno == code and err.value.path == str(dest)
    assert errno.errorcode[code] in str(err.value) and f"the previous {dest} is unchanged" in str(err.value)
    assert _files(tmp_path) == before  # no temporary left, the previous file byte for byte


def test_a_failed_folder_write_names_the_folder_even_from_a_file_inside_it(tmp_path) -> None:
    dest = tmp_path / "scores"
    with atomic_dir(dest, "eval-score") as tmp:
        (tmp / "metrics.json").write_text("{}")
    before = _files(tmp_path)

    def nested(tmp: Path) -> None:
        (tmp / "a.txt").write_text("a")
        _through(atomic_write(tmp / "report.md"), _fail_with(errno.ENOSPC))  # a nested write fails first

    with pytest.raises(OutputWriteError) as err:
        _through(atomic_dir(dest, "eval-score"), nested)
    assert err.value.path == str(dest) and err.value.field == "--out"
    assert "no space left on the disk (ENOSPC)" in str(err.value)
    assert _files(tmp_path) == before and output_kind(dest) == "eval-score"
    with pytest.raises(OutputWriteError, match=f"nothing was left at {tmp_path / 'new'}"):
        _through(atomic_dir(tmp_path / "new", "eval-score"), lambda tmp: _fail_with(errno.EROFS)(tmp / "x"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores"]


def test_other_errors_are_not_write_failures(tmp_path) -> None:
    def fail(exc: BaseException):
        def write(tmp: Path) -> None:
            raise exc

        return write

    with pytest.raises(OSError) as err:
        _through(atomic_write(tmp_path / "x.json"), fail(OSError(errno.EIO, "I/O error")))
    assert not isinstance(err.value, InputError)
    with pytest.raises(ValueError, match="a bug"):
        _through(atomic_dir(tmp_path / "d", "k"), fail(ValueError("a bug")))
    assert list(tmp_path.iterdir()) == []


# ---- a real full disk: a 2 MB tmpfs ------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        pytest.skip(f"cannot mount a tmpfs here ({err})")
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False, timeout=20)


def _fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` up to ``leave`` bytes free."""
    with (disk / "filler").open("wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    os.truncate(disk / "filler", max(0, (disk / "filler").stat().st_size - leave))


def test_a_real_full_disk_keeps_every_previous_output(small_disk) -> None:
    table = pl.DataFrame({"x": np.arange(200_000, dtype=np.float64)})
    with atomic_dir(small_disk / "ds", "prep") as tmp:
        (tmp / "meta.json").write_text('{"old": true}')
    _write(small_disk / "rates.csv", "old\n", kind="rates")
    with atomic_write(small_disk / "log.json") as tmp:
        tmp.write_text("old")
    _fill(small_disk, 64 * 1024)
    before = _files(small_disk)
    with pytest.raises(OutputWriteError, match="no space left on the disk") as err:
        _through(
            atomic_dir(small_disk / "ds", "prep"),
            lambda tmp: table.write_parquet(tmp / "requests.parquet", compression="uncompressed"),
        )
    assert err.value.path == str(small_disk / "ds")
    with pytest.raises(OutputWriteError, match="ENOSPC"):
        _through(atomic_file(small_disk / "rates.csv", "rates", formats=TABLE_FORMATS), table.write_csv)
    with pytest.raises(OutputWriteError, match="ENOSPC"):
        _through(atomic_write(small_disk / "log.json"), lambda tmp: tmp.write_bytes(b"x" * (1 << 20)))
    assert _files(small_disk) == before  # no temporary left; the previous outputs byte for byte


def test_a_read_only_disk_is_exit_2_naming_the_output(small_disk) -> None:
    _write(small_disk / "plot.png", "old")
    done = subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], capture_output=True, timeout=20)
    if done.returncode != 0:
        pytest.skip(f"cannot remount read-only: {done.stderr.decode().strip()}")
    with pytest.raises(OutputWriteError, match="read-only") as err:
        _write(small_disk / "plot.png", "new")
    assert err.value.errno == errno.EROFS and err.value.path == str(small_disk / "plot.png")
    with pytest.raises(OutputWriteError, match="EROFS"):
        _through(atomic_dir(small_disk / "scores", "eval-score"), lambda tmp: None)
    assert (small_disk / "plot.png").read_text() == "old"


def test_an_error_without_errno_on_a_full_disk_is_a_full_disk(tmp_path, monkeypatch) -> None:
    """polars ends a parquet file it cannot flush with ``Invalid thrift: transport error`` (no errno): the
    filesystem, found full when the write failed, says why."""
    from catalog.io import outputs

    dest = tmp_path / "ds"
    with atomic_dir(dest, "prep") as tmp:
        (tmp / "meta.json").write_text("{}")
    before = _files(tmp_path)

    def thrift(tmp: Path) -> None:
        (tmp / "requests.parquet").write_bytes(b"PAR1")
        raise pl.exceptions.ComputeError(
            "parquet: File out of specification: Invalid thrift: transport error"
        )

    monkeypatch.setattr(outputs, "_disk_full", lambda folder: True)
    with pytest.raises(OutputWriteError, match="no space left on the disk"):
        _through(atomic_dir(dest, "prep"), thrift)
    assert _files(tmp_path) == before
    monkeypatch.setattr(outputs, "_disk_full", lambda folder: False)  # with space left it is what it says
    with pytest.raises(pl.exceptions.ComputeError, match="thrift"):
        _through(atomic_dir(dest, "prep"), thrift)
    assert _files(tmp_path) == before
