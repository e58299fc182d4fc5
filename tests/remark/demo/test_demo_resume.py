"""``remark demo --resume-from``: a killed demo's finished stage jobs are reused, the rest run, and the
summary's numbers equal an uninterrupted run's; a partial run of other settings is refused."""

from __future__ import annotations

import json
import shutil

import pytest

from catalog.io.errors import InputError
from remark.cli.main import main
from remark.demo.jobs import Job, finished, seal
from remark.demo.pipeline import numbers


def test_finished_needs_the_same_spec_and_every_record(tmp_path):
    job = Job("remark-lr2e-04-seed0", "rl", {"config": {"seed": 0}}, threads=1)
    folder = job.folder(tmp_path)
    folder.mkdir(parents=True)
    assert finished(job, tmp_path) is None
    (folder / "job.json").write_text(
        json.dumps({"kind": "rl", "threads": 1, "spec": {"config": {"seed": 0}}})
    )
    (folder / "result.json").write_text(json.dumps({"best": None}))
    (folder / "threads.json").write_text(json.dumps({"torch_intra_op": 1}))
    assert finished(job, tmp_path) is None  # no cpu.json: the worker did not finish
    (folder / "cpu.json").write_text(json.dumps({"cpu_s": 2.5}))
    (folder / "progress.jsonl").write_text(json.dumps({"step": 3, "wall_s": 7.0}) + "\n")
    assert finished(job, tmp_path) is None  # not sealed: the parent did not see it succeed
    seal(job, tmp_path)
    got = finished(job, tmp_path)
    assert got == {
        "result": {"best": None},
        "threads": {"torch_intra_op": 1},
        "wall_s": 7.0,
        "cpu_s": 2.5,
        "reused": True,
    }
    other = Job(job.name, "rl", {"config": {"seed": 1}}, threads=1)
    assert finished(other, tmp_path) is None  # another spec: run it again
    assert finished(Job(job.name, "rl", job.spec, threads=2), tmp_path) is None


@pytest.mark.slow
def test_a_resumed_demo_reuses_finished_jobs_and_gives_the_same_numbers(tmp_path, capsys):
    whole = tmp_path / "whole"
    assert main(["demo", "--fast", "--out", str(whole), "--seed", "2"]) == 0
    first = json.loads((whole / "summary.json").read_text())
    # an unfinished run: the same folder without the evaluations and what the run writes last
    partial = tmp_path / "partial"
    shutil.copytree(whole, partial)
    for name in ("summary.json", "report.md", "tuning.json"):
        (partial / name).unlink()
    for folder in (partial / "logs").glob("eval-*"):
        shutil.rmtree(folder)
    shutil.rmtree(partial / "eval")
    shutil.rmtree(partial / "eval_crowd")
    again = tmp_path / "again"
    capsys.readouterr()
    assert main(["demo", "--fast", "--out", str(again), "--seed", "2", "--resume-from", str(partial)]) == 0
    second = json.loads((again / "summary.json").read_text())
    timing = second["timing"]["jobs"]
    reused = [n for n in timing if not n.startswith("eval-")]
    assert reused and all((partial / "logs" / n / "result.json").is_file() for n in reused)
    assert numbers(second) == numbers(first)
    assert (partial / "logs").is_dir()  # a folder given by path is left as it is
    # other settings: refused in one line, before any work
    from remark.demo import default_settings
    from remark.demo.pipeline import run_demo

    with pytest.raises(InputError, match="other settings"):
        run_demo(default_settings(fast=True, seed=3), tmp_path / "x", resume_from=partial)
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_a_failed_demo_keeps_its_work_and_resumes_from_it(tmp_path, capsys, monkeypatch):
    """A demo that fails after its stages ran (here: writing the report) keeps its folder beside ``--out``
    under a name the next write does not clean away, says so with the flag to pass, writes no ``--out``;
    resuming from it runs no training again, gives the numbers of an uninterrupted run, and removes it."""
    import remark.demo.pipeline as pipeline

    whole = tmp_path / "whole"
    assert main(["demo", "--fast", "--out", str(whole), "--seed", "2"]) == 0
    first = json.loads((whole / "summary.json").read_text())

    def broken(summary):
        raise RuntimeError("report failed")

    out = tmp_path / "out"
    real = pipeline.report_markdown
    monkeypatch.setattr(pipeline, "report_markdown", broken)
    capsys.readouterr()
    assert main(["demo", "--fast", "--out", str(out), "--seed", "2"]) == 1
    printed = capsys.readouterr()
    (kept,) = tmp_path.glob(".out.unfinished-*")
    assert f"--resume-from {kept}" in " ".join((printed.out + printed.err).split())
    assert not out.exists() and (kept / "logs").is_dir()
    assert "report failed" in printed.err  # the cause is still shown
    # a plain rerun's clean-up of stale temporary folders leaves it alone
    from catalog.io.outputs import clean_stale

    clean_stale(out)
    assert kept.is_dir()
    walls = {  # each finished job's recorded wall time: a job run again would record another
        d.name: json.loads((d / "progress.jsonl").read_text().splitlines()[-1])["wall_s"]
        for d in (kept / "logs").iterdir()
        if not d.name.startswith("eval-")
    }
    monkeypatch.setattr(pipeline, "report_markdown", real)
    assert main(["demo", "--fast", "--out", str(out), "--seed", "2", "--resume-from", str(kept)]) == 0
    second = json.loads((out / "summary.json").read_text())
    trained = {n: t["wall_s"] for n, t in second["timing"]["jobs"].items() if not n.startswith("eval-")}
    assert trained == walls and len(walls) >= 5  # warm-up and RL runs reused, not run again
    assert numbers(second) == numbers(first)
    assert not kept.exists() and not list(tmp_path.glob(".out.*"))
