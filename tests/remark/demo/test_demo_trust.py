"""``remark demo --resume-from`` touches only its own ``--out``'s work, and a damaged folder is one line.

- A running demo's folder (its writer lock held) is refused, whatever its name: resuming ``--out dm`` from
  the temporary folder of a running demo of ``--out dm.v2`` leaves it where it is, and that demo running.
- A folder whose mark says it is another ``--out``'s work is refused; a folder without the demo's mark
  (a user's ``.dm.mine`` beside ``--out``, a copy) is only read and left as it is after a resume.
- This ``--out``'s own unfinished folder beside it (its mark, nobody holding it) is taken and removed
  once its work is carried over.
- A damaged folder (JSON of the wrong shape, a truncated file, a file unlike what its stage sealed) is
  refused before any work: exit 2, one line naming the file in the folder given, no temporary folder.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from catalog.io.errors import InputError
from catalog.io.locks import LOCK_FILE
from catalog.io.outputs import OUTPUT_MARKER
from remark.cli.main import main
from remark.demo.jobs import SEAL, Job, finished, seal, seal_problem
from remark.demo.pipeline import WORK_MARKER, _partial_run, _take_partial
from remark.demo.settings import default_settings

REPO = Path(__file__).resolve().parents[3]
DEMO = ["demo", "--data", "synthetic", "--fast", "--seed", "2"]


def settings():
    return default_settings("synthetic", fast=True, seed=2)


def fake_demo(folder: Path, *, out: Path | None = None) -> Path:
    """An unfinished demo's folder of :func:`settings` with one sealed job (and ``out``'s mark when given)."""
    folder.mkdir(parents=True)
    (folder / "demo_settings.json").write_text(json.dumps(dataclasses.asdict(settings())))
    job = Job("remark-lr2e-04-seed0", "rl", {"config": {"output_dir": "remark/lr2e-04/seed0"}})
    logs = job.folder(folder)
    logs.mkdir(parents=True)
    (logs / "job.json").write_text(json.dumps({"kind": "rl", "threads": 1, "spec": job.spec}))
    (logs / "result.json").write_text(json.dumps({"best": None}))
    (logs / "threads.json").write_text(json.dumps({"torch_intra_op": 1}))
    (logs / "cpu.json").write_text(json.dumps({"cpu_s": 1.5}))
    run = folder / "remark" / "lr2e-04" / "seed0"
    run.mkdir(parents=True)
    (run / "eval_log.jsonl").write_text('{"step": 0}\n')
    seal(job, folder)
    if out is not None:
        (folder / WORK_MARKER).write_text(json.dumps({"format": 1, "out": str(out), "pid": 1, "host": "h"}))
    return folder


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


# -- seals --------------------------------------------------------------------------------------------


def test_a_job_counts_as_finished_only_as_sealed(tmp_path):
    root = fake_demo(tmp_path / "d")
    job = Job("remark-lr2e-04-seed0", "rl", {"config": {"output_dir": "remark/lr2e-04/seed0"}})
    assert finished(job, root)["result"] == {"best": None}
    assert seal_problem(root, job.name) is None
    log = root / "remark" / "lr2e-04" / "seed0" / "eval_log.jsonl"
    log.write_text('{"step": 9}\n')  # same size, other bytes
    problem = seal_problem(root, job.name)
    assert problem.path == str(log) and "sha256 differs" in problem.message
    assert finished(job, root) is not None  # sizes only here: the hashes are checked where it resumes from
    log.write_text("{}\n")
    assert finished(job, root) is None and "size differs" in seal_problem(root, job.name).message
    (job.folder(root) / SEAL).unlink()
    assert finished(job, root) is None and seal_problem(root, job.name) is None  # not finished: runs again


# -- what a resume may do with the folder ---------------------------------------------------------------


HOLD = (
    "import sys, time\n"
    "from catalog.io.locks import hold_output\n"
    "hold_output(sys.argv[1])\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


def test_a_folder_another_process_holds_is_refused_and_left(tmp_path, capsys):
    out = tmp_path / "dm"
    live = fake_demo(tmp_path / ".dm.v2.host.123.abc.tmp", out=tmp_path / "dm.v2")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(live)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        before = tree(live)
        with pytest.raises(InputError, match=f"is being written by pid {holder.pid}"):
            _take_partial(live, out)
        assert tree(live) == before and holder.poll() is None
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    # its writer gone: still another --out's work, refused and left
    with pytest.raises(InputError, match=r"the unfinished work of another demo \(--out .*dm\.v2\)"):
        _take_partial(live, out)
    assert {p for p in tree(live) if p != LOCK_FILE} == set(before) - {LOCK_FILE}


def test_only_this_outs_own_folder_beside_it_is_taken(tmp_path):
    from catalog.io.locks import release_output

    out = tmp_path / "dm"
    mine = fake_demo(tmp_path / ".dm.mine")  # the user's, no mark: read only, left
    assert _take_partial(mine, out)[:2] == (mine, None)
    release_output(mine)
    assert mine.is_dir() and not (mine / LOCK_FILE).exists()
    stale_named = fake_demo(tmp_path / ".dm.host.99.xyz.tmp")  # would be cleaned as stale: refused
    with pytest.raises(InputError, match="named like a temporary folder of --out"):
        _take_partial(stale_named, out)
    ours = fake_demo(tmp_path / ".dm.unfinished-1", out=out)  # this --out's, beside it: taken
    source, moved, held = _take_partial(ours, out)
    assert source == moved and moved.name.startswith(".dm.resumed-") and not ours.exists()
    release_output(held)
    copy = shutil.copytree(moved, tmp_path / "elsewhere" / "copy")  # this --out's mark, not beside it
    assert _take_partial(copy, out)[:2] == (copy, None)
    release_output(copy)


# -- a damaged folder -------------------------------------------------------------------------------------


def _damage(folder: Path, how: str) -> Path:
    logs = folder / "logs" / "remark-lr2e-04-seed0"
    if how == "settings-list":
        (folder / "demo_settings.json").write_text("[1, 2]")
        return folder / "demo_settings.json"
    if how == "settings-truncated":
        text = (folder / "demo_settings.json").read_text()
        (folder / "demo_settings.json").write_text(text[: len(text) // 2])
        return folder / "demo_settings.json"
    if how == "result-truncated":
        (logs / "result.json").write_text('{"be')
        return logs / "result.json"
    if how == "result-list":
        (logs / "result.json").write_text("[]")
        return logs / "result.json"
    if how == "threads-list":
        (logs / "threads.json").write_text("[]")
        return logs / "threads.json"
    if how == "job-list":
        (logs / "job.json").write_text("[]")
        return logs / "job.json"
    if how == "run-file":
        path = folder / "remark" / "lr2e-04" / "seed0" / "eval_log.jsonl"
        path.write_text('{"step": 7}\n')
        return path
    if how == "run-file-missing":
        path = folder / "remark" / "lr2e-04" / "seed0" / "eval_log.jsonl"
        path.unlink()
        return path
    if how == "seal-list":
        (logs / SEAL).write_text("[]")
        return logs / SEAL
    if how == "logs-file":
        shutil.rmtree(folder / "logs")
        (folder / "logs").write_text("x")
        return folder / "logs"
    if how == "mark-list":
        (folder / WORK_MARKER).write_text("[]")
        return folder / WORK_MARKER
    raise AssertionError(how)


DAMAGE = [
    "settings-list",
    "settings-truncated",
    "result-truncated",
    "result-list",
    "threads-list",
    "job-list",
    "run-file",
    "run-file-missing",
    "seal-list",
    "mark-list",
    "logs-file",
]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_folder_is_one_line_naming_the_file_in_it(tmp_path, capsys, how):
    partial = fake_demo(tmp_path / "partial")
    bad = _damage(partial, how)
    with pytest.raises(InputError) as err:
        _partial_run(partial, settings())
    assert err.value.path == str(bad)
    before = sorted(p.name for p in tmp_path.iterdir())
    out = tmp_path / "out"
    assert main([*DEMO, "--out", str(out), "--resume-from", str(partial)]) == 2
    line = one_line(capsys)
    assert line.startswith(f"remark demo: error: {bad}"), line
    assert ".tmp" not in line and "unfinished" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no --out, no temporary folder


# -- end to end -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """A complete fast synthetic demo (made once for the module)."""
    out = tmp_path_factory.mktemp("whole") / "whole"
    assert main([*DEMO, "--out", str(out)]) == 0
    assert not (out / WORK_MARKER).exists()  # a complete output carries no work mark
    return out


def _unfinished(whole: Path, dest: Path) -> Path:
    shutil.copytree(whole, dest)
    for name in ("summary.json", "report.md", OUTPUT_MARKER):
        (dest / name).unlink()
    return dest


@pytest.mark.slow
def test_a_running_demos_folder_is_refused_and_that_demo_goes_on(whole, tmp_path, capsys):
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    other = subprocess.Popen(
        [sys.executable, "-m", "remark.cli.main", *DEMO, "--out", str(tmp_path / "dm.v2")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob(f".dm.v2.*.tmp/{WORK_MARKER}")):
            assert other.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        (live,) = [p.parent for p in tmp_path.glob(f".dm.v2.*.tmp/{WORK_MARKER}")]
        capsys.readouterr()
        assert main([*DEMO, "--out", str(tmp_path / "dm"), "--resume-from", str(live)]) == 2
        line = one_line(capsys)
        assert f"{live}, field '--resume-from': is being written by pid {other.pid}" in line, line
        assert live.is_dir() and other.poll() is None  # left where it is; that demo still running
        assert not (tmp_path / "dm").exists()
    finally:
        if other.poll() is None:
            other.send_signal(signal.SIGTERM)
        other.wait(timeout=60)


@pytest.mark.slow
def test_a_users_folder_beside_out_is_read_and_kept(whole, tmp_path, capsys):
    mine = _unfinished(whole, tmp_path / ".dm.mine")
    before = tree(mine)
    assert main([*DEMO, "--out", str(tmp_path / "dm"), "--resume-from", str(mine)]) == 0
    assert tree(mine) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".dm.mine", "dm"]
    jobs = sorted(p.name for p in (mine / "logs").iterdir())
    assert len(jobs) >= 5
    for job in jobs:  # every finished stage reused, none run again (a run again logs other times)
        progress = f"logs/{job}/progress.jsonl"
        assert (tmp_path / "dm" / progress).read_bytes() == before[progress], job


@pytest.mark.slow
def test_a_sealed_file_changed_in_a_real_demo_is_named(whole, tmp_path, capsys):
    partial = _unfinished(whole, tmp_path / "partial")
    (weights,) = (partial / "sft_model").glob("model.safetensors")
    with weights.open("r+b") as fh:
        fh.seek(-4, 2)
        fh.write(b"\x00\x01\x02\x03")
    capsys.readouterr()
    assert main([*DEMO, "--out", str(tmp_path / "dm"), "--resume-from", str(partial)]) == 2
    line = one_line(capsys)
    assert line.startswith(
        f"remark demo: error: {weights}, field '--resume-from': not what the finished stage"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["partial"]
