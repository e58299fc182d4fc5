"""One writer per output folder (``catalog.io.locks``): a second command writing a folder another one
holds exits 2 in one line naming the folder and the holder; a lock whose holder was killed is free again;
the lock goes with an ``atomic_dir`` output through its swap and leaves no file behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from catalog.io.locks import LOCK_FILE, OutputBusyError, hold_output, output_lock, release_output
from catalog.io.outputs import atomic_dir, check_output_dir
from tests.test_bad_input_table import Case, check, run_cli
from tests.test_bad_input_table import world as world

REPO = Path(__file__).resolve().parents[1]
HOLD = (
    "import sys, time\n"
    "from catalog.io.locks import hold_output, set_command\n"
    "set_command('remark train --config other.yaml')\n"
    "hold_output(sys.argv[1])\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


@pytest.fixture
def holder():
    """Start a process holding the writer lock of a folder; it is killed (-9) at the end."""
    procs = []

    def start(folder: Path) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True, env=env
        )
        procs.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_held_folder_is_refused_naming_the_holder(tmp_path, holder):
    out = tmp_path / "run"
    proc = holder(out)
    with pytest.raises(OutputBusyError) as err:
        hold_output(out, field="output_dir")
    text = str(err.value)
    assert text.startswith(f"{out}, field 'output_dir': is being written by pid {proc.pid} on host ")
    assert "running 'remark train --config other.yaml'" in text and "two writers would mix" in text
    record = json.loads((out / LOCK_FILE).read_text())
    assert record["pid"] == proc.pid and record["command"] == "remark train --config other.yaml"


def test_the_lock_of_a_killed_holder_is_taken_over(tmp_path, holder):
    out = tmp_path / "run"
    proc = holder(out)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (out / LOCK_FILE).exists()  # its file stays; the kernel released the lock with the process
    hold_output(out)
    assert json.loads((out / LOCK_FILE).read_text())["pid"] == os.getpid()
    release_output(out)
    assert not (out / LOCK_FILE).exists() and out.is_dir()  # the folder was there before: kept


def test_release_removes_what_the_lock_made_and_a_lock_is_reentrant(tmp_path):
    out = tmp_path / "new" / "out"
    with output_lock(out):
        with output_lock(out):  # this process holds it already: kept, not deadlocked
            pass
        assert (out / LOCK_FILE).exists()
    assert not (tmp_path / "new" / "out").exists()  # made by the lock, left empty: removed


def test_the_lock_goes_with_an_atomic_dir_output_through_the_swap(tmp_path, holder):
    out = tmp_path / "scores"
    with atomic_dir(out, "example") as tmp:
        (tmp / "a.txt").write_text("old")
    with output_lock(out):
        check_output_dir(out, "example")  # the lock file is not content
        with atomic_dir(out, "example") as tmp:
            (tmp / "a.txt").write_text("new")
        assert (out / LOCK_FILE).exists() and (out / "a.txt").read_text() == "new"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        probe = "import sys\nfrom catalog.io.locks import hold_output\nhold_output(sys.argv[1])\n"
        busy = subprocess.run(
            [sys.executable, "-c", probe, str(out)], capture_output=True, text=True, env=env
        )
        assert busy.returncode != 0 and "OutputBusyError" in busy.stderr  # still held after the swap
    assert sorted(p.name for p in out.iterdir()) == [".remark-output.json", "a.txt"]


def test_a_second_remark_train_into_a_busy_output_dir_exits_2(world, tmp_path, holder):
    """The config is valid (the bad-input table's base); only the folder is busy: exit 2, one line, and the
    holder's folder is left as it was."""
    out = tmp_path / "run_out"
    proc = holder(out)
    argv = ["train", "--config", str(world / "base.yaml"), "--set", f"output_dir={out}"]
    code, stdout, err = run_cli(argv)
    expect = (
        f"{out}, field 'output_dir': is being written by pid {proc.pid}",
        "remark train --config other.yaml",
    )
    check(Case("busy", "", expect), code, stdout, err)
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing of the refused run


@pytest.mark.parametrize(
    "argv",
    [
        "prep synthetic --out {o} --n-requests 10 --n-items 20",
        "eval score --data {w}/ds --predictions {w}/preds.jsonl --out {o}",
        "sft --data {w}/ds --model {w}/model --out {o}",
    ],
    ids=["prep", "eval-score", "sft"],
)
def test_a_busy_out_is_refused_by_every_long_command(argv, world, tmp_path, holder):
    out = tmp_path / "out"
    proc = holder(out)
    code, stdout, err = run_cli(argv.format(o=out, w=world).split())
    check(Case("busy", "", (f"{out}, field '--out': is being written by pid {proc.pid}",)), code, stdout, err)
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]


def test_a_finished_command_leaves_no_lock(world, tmp_path):
    out = tmp_path / "ds"
    code, _, err = run_cli(["prep", "synthetic", "--out", str(out), "--n-requests", "10", "--n-items", "20"])
    assert code == 0, err
    assert not (out / LOCK_FILE).exists()
    code, _, err = run_cli(["prep", "synthetic", "--out", str(out), "--n-requests", "10", "--n-items", "20"])
    assert code == 0, err  # the same folder again: free
