"""``kill -9`` during ``remark prep`` and ``remark eval score --out`` leaves the previous complete output
(or, killed between the two renames of the swap, nothing, which the next write restores); the next run
cleans the dead run's temporary folder and writes normally. Checkpoint kills: tests/remark/step/test_resume.py.
A demo killed while a stage process runs (``kill -9``, ``SIGTERM`` or ``SIGINT`` of the parent) leaves no
stage process running."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from catalog.io.locks import LOCK_FILE
from catalog.io.outputs import OUTPUT_MARKER, clean_stale
from remark.cli.main import main
from tests.eval.conftest import write_tiny_dataset
from tests.killable import run_and_kill


def snapshot(folder: Path) -> dict[str, bytes]:
    """The folder's files, but the writer lock a killed command leaves (free: the kernel released it)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != LOCK_FILE}


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def prep_argv(out: Path, seed: int) -> list[str]:
    return [
        "prep",
        "synthetic",
        "--out",
        str(out),
        "--n-requests",
        "30",
        "--n-items",
        "20",
        "--seed",
        str(seed),
    ]


def test_prep_killed_mid_write_leaves_the_previous_dataset(tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(prep_argv(out, 0)) == 0
    before = snapshot(out)
    # killed after 2 of the 3 parquet files of the new dataset (seed 1) were written
    run_and_kill(tmp_path / "ready", "parquet:2", prep_argv(out, 1))
    assert snapshot(out) == before
    assert '"command": "remark prep synthetic' in (out / LOCK_FILE).read_text()  # the dead writer's record
    (stale,) = leftovers(tmp_path)
    assert stale.startswith(".ds.") and stale.endswith(".tmp")
    assert {p.name for p in (tmp_path / stale).iterdir()} == {"requests.parquet", "responder_rows.parquet"}
    # the next run takes the dead writer's lock over, removes its folder and writes the new dataset
    assert main(prep_argv(out, 1)) == 0
    assert leftovers(tmp_path) == [] and not (out / LOCK_FILE).exists()
    after = snapshot(out)
    assert set(after) == set(before) and after["requests.parquet"] != before["requests.parquet"]


def test_prep_killed_mid_swap_leaves_nothing_and_the_next_write_restores_it(tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(prep_argv(out, 0)) == 0
    before = snapshot(out)
    run_and_kill(tmp_path / "ready", "swap:ds", prep_argv(out, 1))
    assert not out.exists()  # nothing at ds: the old dataset is moved aside, the new one not yet in
    names = leftovers(tmp_path)
    assert sorted(n[-4:] for n in names) == [".old", ".tmp"]
    removed, restored = sorted(clean_stale(out))
    assert removed.startswith("removed") and restored.startswith("restored")
    assert snapshot(out) == before
    assert leftovers(tmp_path) == []


def predictions(path: Path, lists: dict[str, list[str]]) -> Path:
    path.write_text(
        "".join(json.dumps({"request_id": r, "recommendations": x}) + "\n" for r, x in lists.items())
    )
    return path


LISTS = {
    "r1": ["Contact", "Arrival (2016)"],
    "r2": ["Inception", "The Matrix"],
    "r3": ["Moon"],
    "r4": ["Arrival", "Interstellar"],
}


def score_argv(data: Path, preds: Path, out: Path, *extra: str) -> list[str]:
    ci = ["--resamples", "200", "--ci-method", "percentile"]
    return ["eval", "score", "--data", str(data), "--predictions", str(preds), "--out", str(out), *ci, *extra]


def test_eval_score_killed_mid_write_keeps_the_previous_scores_whole(tmp_path, capsys):
    data = write_tiny_dataset(tmp_path / "data")
    out = tmp_path / "scored"
    first = predictions(tmp_path / "a.jsonl", LISTS)
    assert main(score_argv(data, first, out, "--k", "1", "2", "--json")) == 0
    before = snapshot(out)
    assert set(before) == {
        OUTPUT_MARKER, "metrics.json", "per_request.parquet", "per_row.parquet", "report.md", "metrics.png"
    }  # fmt: skip
    # a second scoring of other lists, killed after metrics.json and per_request.parquet of the new run
    # were written (report.md and the plot were not): the folder still holds the first run only
    second = predictions(tmp_path / "b.jsonl", {r: list(reversed(x)) for r, x in LISTS.items()})
    run_and_kill(tmp_path / "ready", "parquet:1", score_argv(data, second, out, "--k", "1", "2"))
    assert snapshot(out) == before
    assert json.loads((out / "metrics.json").read_text())["settings"]["predictions"] == str(first)
    # compare reads the surviving folder: the first run against itself differs by exactly 0
    capsys.readouterr()
    assert main(["eval", "compare", str(out), str(out), "--k", "1", "--resamples", "200", "--json"]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert diff["union"]["recall@1"]["mean"] == 0.0
    # the next scoring cleans up and replaces the folder whole
    assert main(score_argv(data, second, out, "--k", "1", "2")) == 0
    assert [p for p in leftovers(tmp_path) if p.endswith((".tmp", ".old"))] == []
    assert json.loads((out / "metrics.json").read_text())["settings"]["predictions"] == str(second)


def test_eval_score_killed_mid_swap_is_restored_whole(tmp_path, capsys):
    data = write_tiny_dataset(tmp_path / "data")
    out = tmp_path / "scored"
    assert main(score_argv(data, predictions(tmp_path / "a.jsonl", LISTS), out, "--k", "1")) == 0
    before = snapshot(out)
    run_and_kill(
        tmp_path / "ready", "swap:scored", score_argv(data, tmp_path / "a.jsonl", out, "--k", "1", "2")
    )
    assert not out.exists()
    clean_stale(out)  # what the next write does first
    assert snapshot(out) == before
    assert leftovers(tmp_path) == []


# -- a killed demo leaves no stage process behind ---------------------------------------------------------

#: a demo-like parent: ``remark.demo.jobs.run_jobs`` running the real warm-up stage (the smallest real
#: stage) of the fast synthetic demo in the folder argv[1]; it prints its pid, then waits on the stage
DEMO_PARENT = (
    "import dataclasses, os, sys\n"
    "from pathlib import Path\n"
    "from remark.demo.jobs import Job, run_jobs\n"
    "from remark.demo.settings import default_settings\n"
    "s = default_settings('synthetic', fast=True)\n"
    "print(os.getpid(), flush=True)\n"
    "run_jobs([Job('warmup', 'warmup', {'settings': dataclasses.asdict(s)}, threads=1)], Path(sys.argv[1]), slots=1)\n"
)


def stage_processes(parent: int) -> list[int]:
    """The live (not zombie) processes a demo parent started: their environment names it as the parent."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"REMARK_DEMO_PARENT={parent}".encode() in env and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize(
    "how", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["kill-9", "term", "int"]
)
def test_a_killed_demo_leaves_no_stage_process(tmp_path, how):
    import subprocess
    import sys
    import time

    root = tmp_path / "demo"
    root.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    parent = subprocess.Popen(
        [sys.executable, "-c", DEMO_PARENT, str(root)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        pid = int(parent.stdout.readline())
        deadline = time.monotonic() + 120
        # the stage is at work: past its start-up, writing into the folder
        while not (root / "logs" / "warmup" / "threads.json").is_file():
            assert parent.poll() is None and time.monotonic() < deadline, "the stage did not start"
            time.sleep(0.1)
        stages = stage_processes(pid)
        assert stages, "no stage process found"
        os.kill(pid, how)
        parent.wait(timeout=30)
        time.sleep(5)
        assert [p for p in stages if p in stage_processes(pid)] == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdout.close()
        for p in stage_processes(parent.pid):  # never leave one running, whatever failed above
            os.kill(p, signal.SIGKILL)
