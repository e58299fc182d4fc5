"""The measured data losses, one test each: a plot over a model's weights or over the log it reads, a run
over a user's README.md or into a dataset or model folder, a fetch over a user's files or leaving half a
download, a conversion or pass-rates file over an unrelated file, and a full disk ending in a traceback.
Each is now exit 2 with one line naming the path and what to do, and the files it would have overwritten
are byte-for-byte unchanged."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import subprocess
from pathlib import Path

import polars as pl
import pytest

from catalog.io.errors import InputError
from catalog.io.outputs import (
    FILE_REGISTRY,
    OutputWriteError,
    atomic_dir,
    atomic_file,
    file_kind,
    output_kind,
)
from data_prep.fetch import DATASETS, FETCH_KIND, Remote, fetch
from remark.cli.main import main
from remark.run.output_dir import check_run_dir
from remark.run.run_files import RUN_KIND, run_card_is_ours, write_run_card
from tests.data_prep.conftest import write_catalog_csv, write_jsonl
from tests.data_prep.test_pool import ROWS
from tests.eval.conftest import write_tiny_dataset
from tests.eval.test_steps import write_run

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "tiny_cpu.yaml"
CURVE = {
    0: [0.0, 0.1, 0.1, 0.2],
    100: [0.1, 0.2, 0.3, 0.2],
    200: [0.3, 0.4, 0.5, 0.4],
    300: [0.4, 0.4, 0.5, 0.5],
}


def sha(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


def one_line_error(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.fixture
def run(tmp_path):
    """A run folder: its eval log and a best/ model folder (written whole, as training writes it)."""
    r = write_run(tmp_path / "r0", CURVE)
    with atomic_dir(r / "best", "train-best") as tmp:
        (tmp / "model.safetensors").write_bytes(b"weights" * 100)
        (tmp / "config.json").write_text("{}")
    write_run(tmp_path / "b0", {k: [x * 0.8 for x in v] for k, v in CURVE.items()})
    return r


def test_curve_fit_plot_over_the_models_weights_is_refused(run, capsys):
    weights = run / "best" / "model.safetensors"
    before = sha(weights)
    err = one_line_error(capsys, ["curve", "fit", str(run), "--plot", str(weights)])
    assert f"{weights}, field '--plot'" in err and "not a format this writes" in err
    # with a plot's extension it is still inside the run read and inside best/, a folder written whole
    err = one_line_error(capsys, ["curve", "fit", str(run), "--plot", str(run / "best" / "x.png"), "--force"])
    assert "lies inside the input" in err
    assert sha(weights) == before and sorted(p.name for p in (run / "best").iterdir()) == [
        ".remark-output.json", "config.json", "model.safetensors"
    ]  # fmt: skip


@pytest.mark.parametrize("command", ["fit", "compare"])
def test_curve_plot_over_the_log_it_reads_is_refused(run, tmp_path, capsys, command):
    log = run / "eval_log.jsonl"
    before = sha(log)
    logs = [str(log)] if command == "fit" else [str(run), str(tmp_path / "b0")]
    for plot in (log, run / "eval_log.png"):  # the log itself; beside it, in the run
        err = one_line_error(capsys, ["curve", command, *logs, "--plot", str(plot), "--force"])
        assert str(plot) in err and "field '--plot'" in err
    assert sha(log) == before


def test_train_never_overwrites_a_users_readme_in_output_dir(tmp_path, capsys):
    out = tmp_path / "runs" / "mine"
    out.mkdir(parents=True)
    (out / "README.md").write_text("# my notes about this run\n")
    before = sha(out / "README.md")
    err = one_line_error(capsys, ["train", "--config", str(TINY), "--set", f"output_dir={out}"])
    assert (
        f"{out / 'README.md'}, field 'output_dir': refusing to replace a file that remark did not write"
        in err
    )
    assert "move or rename your README.md" in err
    assert one_line_error(
        capsys, ["train", "--config", str(TINY), "--set", f"output_dir={out}", "--overwrite"]
    )
    assert sha(out / "README.md") == before and sorted(p.name for p in out.iterdir()) == ["README.md"]


def test_train_refuses_a_dataset_or_model_folder_as_output_dir(tmp_path, capsys):
    ds = write_tiny_dataset(tmp_path / "ds")
    files = sorted(p for p in ds.rglob("*") if p.is_file())
    before = sha(*files)
    err = one_line_error(capsys, ["train", "--config", str(TINY), "--set", f"output_dir={ds}", "--overwrite"])
    assert f"{ds}, field 'output_dir': output_dir is the output of 'prep' (a prepared dataset)" in err
    # a model folder without a marker, and a folder inside another command's output
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"w")
    err = one_line_error(capsys, ["train", "--config", str(TINY), "--set", f"output_dir={model}"])
    assert "output_dir is a model folder" in err
    err = one_line_error(capsys, ["train", "--config", str(TINY), "--set", f"output_dir={ds / 'runs' / 'x'}"])
    assert f"lies inside {ds}, the output of 'prep'" in err
    assert sha(*files) == before and sorted(p for p in ds.rglob("*") if p.is_file()) == files


def test_output_dir_may_not_be_or_lie_inside_an_input(tmp_path):
    data = write_tiny_dataset(tmp_path / "ds")
    with pytest.raises(InputError, match="output_dir lies inside the run's input"):
        check_run_dir(data / "run", [data])
    base = tmp_path / "base"
    base.mkdir()
    with pytest.raises(InputError, match="output_dir is the run's input"):
        check_run_dir(base, [None, "Qwen/Qwen2.5-0.5B", base])
    check_run_dir(tmp_path / "run", [data / "x", "org/name"])  # a folder beside them is fine
    run = tmp_path / "run2"  # build_tiny: the inputs lie inside output_dir
    check_run_dir(run, [run / "assets" / "data"])


def test_the_runs_own_readme_is_replaced_and_any_other_readme_is_refused(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    assert write_run_card(out, "---\ntags:\n- trl\n---\n# card\n")
    assert file_kind(out / "README.md") == RUN_KIND
    assert write_run_card(out, "second\n") and (out / "README.md").read_text() == "second\n"
    (out / "README.md").write_text("my edit\n")  # changed since the run wrote it: the user's now
    assert not run_card_is_ours(out) and not write_run_card(out, "third\n")
    assert (out / "README.md").read_text() == "my edit\n"
    # TRL's draft card beside a run's log, not recorded as the run's: remark cannot tell who wrote it
    old = tmp_path / "old"
    old.mkdir()
    trl_card = "---\nlibrary_name: transformers\ntags:\n- generated_from_trainer\n- trl\n---\n"
    (old / "README.md").write_text(trl_card)
    (old / "eval_log.jsonl").write_text("{}\n")
    assert not run_card_is_ours(old) and not write_run_card(old, "new\n")
    with pytest.raises(InputError, match="refusing to replace a file that remark did not write") as err:
        check_run_dir(old)
    assert err.value.path == str(old / "README.md") and (old / "README.md").read_text() == trl_card


class _Response(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


@pytest.fixture
def fake(monkeypatch):
    files = {
        "https://x/a.jsonl": b'{"a": 1}\n',
        "https://x/b.jsonl": b'{"b": 2}\n',
        "https://x/LICENSE": b"CC-BY",
    }
    remotes = [
        Remote("dev/a.jsonl", "https://x/a.jsonl", None),
        Remote("dev/b.jsonl", "https://x/b.jsonl", None),
    ]
    monkeypatch.setitem(DATASETS, "fake", [*remotes, Remote("LICENSE", "https://x/LICENSE", None)])

    def opener(url, timeout):
        if files[url] is None:
            raise OSError("connection reset")
        return _Response(files[url])

    return files, opener


def test_fetch_refuses_a_users_same_named_files_before_any_download(tmp_path, capsys, fake):
    out = tmp_path / "protoqa"
    (out / "dev").mkdir(parents=True)
    (out / "dev" / "dev.crowdsourced.jsonl").write_text("my own file\n")
    before = sha(out / "dev" / "dev.crowdsourced.jsonl")
    err = one_line_error(capsys, ["data", "fetch", "protoqa", "--out", str(out)])  # no network needed
    assert (
        f"{out}, field '--out': refusing to replace a folder that remark did not write" in err
        and "--force" in err
    )
    _, opener = fake
    calls = []
    with pytest.raises(InputError, match="did not write"):
        fetch("fake", out, opener=lambda url, timeout: calls.append(url))
    assert calls == [] and sha(out / "dev" / "dev.crowdsourced.jsonl") == before
    fetch("fake", out, opener=opener, force=True)
    assert output_kind(out) == FETCH_KIND and not (out / "dev" / "dev.crowdsourced.jsonl").exists()


def test_a_failed_fetch_leaves_the_previous_state(tmp_path, fake):
    files, opener = fake
    out = tmp_path / "data"
    written = fetch("fake", out, opener=opener)
    assert [p.relative_to(out).as_posix() for p in written] == ["dev/a.jsonl", "dev/b.jsonl", "LICENSE"]
    snapshot = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    files["https://x/a.jsonl"], files["https://x/b.jsonl"] = b"new a", None  # the second download fails
    with pytest.raises(InputError, match=f"download failed: connection reset; {out} was left as it was"):
        fetch("fake", out, opener=opener)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == snapshot
    with pytest.raises(InputError, match="download failed"):
        fetch("fake", tmp_path / "new", opener=opener)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # nothing half-written, no temporary


def test_convert_protoqa_does_not_replace_an_unrelated_file(tmp_path, capsys):
    src = tmp_path / "pred.jsonl"
    src.write_text('{"q1": ["sleep"]}\n')
    (tmp_path / "in").mkdir()
    threads = tmp_path / "in" / "threads.jsonl"
    threads.write_text('{"mine": 1}\n')
    before = sha(threads)
    err = one_line_error(capsys, ["eval", "convert-protoqa", str(src), "--out", str(threads)])
    assert f"{threads}, field '--out': refusing to replace a file that remark did not write" in err
    assert sha(threads) == before
    assert main(["eval", "convert-protoqa", str(src), "--out", str(threads), "--force"]) == 0
    assert json.loads(threads.read_text()) == {"request_id": "q1", "recommendations": ["sleep"]}


def test_diagnose_pass_rates_out_does_not_replace_an_unrelated_file(tmp_path, capsys):
    ds = write_tiny_dataset(tmp_path / "ds")
    mine = tmp_path / "notes.jsonl"
    mine.write_text('{"my": "notes"}\n')
    argv = [
        "diagnose",
        str(ds),
        "--policy",
        "popularity",
        "--group-size",
        "2",
        "--k",
        "2",
        "--pass-rates-out",
    ]
    err = one_line_error(capsys, [*argv, str(mine)])
    assert f"{mine}, field '--pass-rates-out': refusing to replace a file that remark did not write" in err
    assert mine.read_text() == '{"my": "notes"}\n'
    assert main([*argv, str(tmp_path / "rates.csv")]) == 0  # a table as CSV, read back by plan-group-size
    from remark.planning.logs import read_pass_rates

    assert (
        len(read_pass_rates(tmp_path / "rates.csv").request_id)
        == pl.read_parquet(ds / "requests.parquet").height
    )


# ---- a full disk through the CLI ---------------------------------------------------------------------------


def _prep(tmp_path, out):
    write_jsonl(tmp_path / "threads.jsonl", ROWS)
    write_catalog_csv(tmp_path / "cat.csv")
    return ["prep", "threads", "--input", str(tmp_path / "threads.jsonl"), "--catalog", str(tmp_path / "cat.csv"), "--out", str(out)]  # fmt: skip


def _score(tmp_path, out):
    ds = write_tiny_dataset(tmp_path / "data")
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        "".join(
            json.dumps({"request_id": r, "recommendations": ["Moon"]}) + "\n"
            for r in ("r1", "r2", "r3", "r4")
        )
    )
    return ["eval", "score", "--data", str(ds), "--predictions", str(preds), "--k", "1", "--resamples", "100", "--out", str(out)]  # fmt: skip


@pytest.mark.parametrize("command", [_prep, _score], ids=["prep", "eval-score"])
def test_a_full_disk_is_exit_2_naming_the_folder_and_keeps_the_previous_output(
    tmp_path, capsys, monkeypatch, command
):
    out = tmp_path / "out"
    argv = command(tmp_path, out)
    assert main(argv) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    listing = sorted(p.name for p in tmp_path.iterdir())

    def full(self, file, *a, **kw):  # polars' own error on ENOSPC: no errno, only its message
        Path(file).write_bytes(b"PAR1 half")
        raise pl.exceptions.ComputeError(
            "parquet: underlying IO error: No space left on device (os error 28)"
        )

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full)
    err = one_line_error(capsys, argv)
    assert (
        f"{out}, field '--out': cannot write the output in {tmp_path}: no space left on the disk (ENOSPC)"
        in err
    )
    assert f"the previous {out} is unchanged" in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no temporary left beside it


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        pytest.skip(f"cannot mount a tmpfs here ({err})")
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False, timeout=20)


@pytest.mark.parametrize("command", [_prep, _score], ids=["prep", "eval-score"])
def test_a_real_full_disk_is_exit_2_and_leaves_nothing_half_written(tmp_path, small_disk, capsys, command):
    out = small_disk / "out"
    argv = command(tmp_path, out)
    assert main(argv) == 0
    before = {p: p.read_bytes() for p in small_disk.rglob("*") if p.is_file()}
    filler = small_disk / "filler"
    with filler.open("wb") as fh, contextlib.suppress(OSError):  # until the disk is full
        while True:
            fh.write(b"\0" * 65536)
            fh.flush()
    os.truncate(filler, filler.stat().st_size - 8192)
    err = one_line_error(capsys, argv)
    assert f"{out}, field '--out': cannot write the output in {small_disk}: no space left on the disk" in err
    filler.unlink()
    assert {p: p.read_bytes() for p in small_disk.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in small_disk.iterdir()) == ["out"]


def test_atomic_file_names_a_full_disk_too(tmp_path):
    out = tmp_path / "rates.csv"
    with atomic_file(out, "pass-rates") as tmp:
        tmp.write_text("old")

    def fail() -> None:
        with atomic_file(out, "pass-rates") as tmp:
            tmp.write_text("new")
            raise OSError(errno.EDQUOT, "Disk quota exceeded")

    with pytest.raises(OutputWriteError, match="disk quota exceeded"):
        fail()
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == [
        FILE_REGISTRY,
        "rates.csv",
    ]
