"""``run_demo``: the stage processes in order under one set of progress bars, then ``summary.json`` and
``report.md``.

The whole output folder is written through ``catalog.io.outputs.atomic_dir`` (kind ``demo``): the run happens in
a temporary folder next to ``--out`` and replaces it only when complete, so a killed demo leaves the
previous complete one (or nothing), and ``--out`` is never a folder some other command wrote (``force``
replaces one). Every path inside is relative to the folder (stage processes run in it), so it can be
moved. It holds ``demo_settings.json``, ``data/``, ``base_model/``, ``sft_model/``, one folder per run
(``<method>/seed<k>/``), ``eval/<model>/``, ``logs/<stage>/`` (each process's log, progress and
``threads.json``), ``curves.png``, ``curves_greedy.png``, ``summary.json`` and ``report.md``.

Everything in ``summary.json`` outside ``timing`` and ``machine`` is a function of the settings: the same
settings give the same numbers, bit for bit, however busy the machine is (:func:`numbers` is that part).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from catalog.io.errors import InputError
from catalog.io.files import read_json
from catalog.io.locks import LOCK_FILE, hold_output, release_output
from catalog.io.outputs import OUTPUT_MARKER, atomic_dir, atomic_write
from catalog.io.versions import package_versions
from remark.demo.evaluation import (
    TEST_SETS,
    across_seeds,
    eval_jobs,
    per_seed_pairs,
    test_models,
    validation_results,
)
from remark.demo.jobs import LOGS, Job, run_jobs, seal_problem
from remark.demo.plots import plot_validation
from remark.demo.report import headline_block, report_markdown, report_notes
from remark.demo.runs import choose_rates, grid_jobs, job_name, seed_jobs, train_diagnostics
from remark.demo.settings import METHODS, DemoSettings

KIND = "demo"
SETTINGS_FILE = "demo_settings.json"
#: The learning rate chosen per method on validation, written before any test split is read.
TUNING_FILE = "tuning.json"
#: Top-level summary keys that depend on the machine and its load, not on the settings.
MACHINE_KEYS = ("timing", "machine")


def numbers(summary: dict[str, Any]) -> dict[str, Any]:
    """The part of a summary that the settings determine (everything but :data:`MACHINE_KEYS`)."""
    return {k: v for k, v in summary.items() if k not in MACHINE_KEYS}


class _LoadSampler:
    """The 1-minute load average every ``every_s`` seconds while a demo runs (reported, never acted on)."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.samples: list[float] = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> _LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict[str, float]:
        v = self.samples
        return {"start": v[0], "end": v[-1], "mean": float(np.mean(v)), "max": max(v), "samples": len(v)}


def run_demo(
    s: DemoSettings,
    out: str | Path,
    *,
    console: Any = None,
    progress_disable: bool = False,
    force: bool = False,
    resume_from: str | Path | None = None,
) -> dict[str, Any]:
    """Run the whole demo into ``out`` (atomically, see the module docstring); returns the summary.

    ``resume_from``: the folder of an unfinished demo with the same settings (the ``.<out>.unfinished-*``
    folder a failed or interrupted run keeps beside its ``--out`` and names, the ``.<out>...tmp`` one a
    killed run left, or a copy of either): its contents are copied into the new run's folder and every stage
    job that finished there with the same spec, and whose files are as it sealed them, is reused, not run
    again (``remark.demo.jobs``). What this resume may do with that folder (:func:`_take_partial`): it is
    refused while another process holds its writer lock (a running demo's folder), and when its mark
    (:data:`WORK_MARKER`) says it is the work of another ``--out``; it is moved aside and removed once its
    contents are carried over only when its mark says it is this ``--out``'s and it lies beside ``--out``;
    any other folder is only read, and left as it is. A damaged folder (a file that is not what it should
    be, or not as a finished stage sealed it) is refused before any work, naming the file in it.
    """
    # torch (and the MKL and OpenMP runtimes in libtorch_cpu) loaded first in this process: loaded late, after
    # polars, rapidfuzz and matplotlib, its dlopen can find the static TLS block used up and MKL aborts
    # the process ("Intel oneMKL FATAL ERROR: Cannot load libtorch_cpu.so") after the whole run
    import torch  # noqa: F401
    from rich.console import Console

    from remark.demo.stages import protoqa_source

    out = Path(out)
    console = console or Console()
    inputs = []
    if s.data == "protoqa":
        inputs.append(protoqa_source(s))
    if s.data_dir is not None:  # stage processes run inside the output folder: an absolute input path
        s = dataclasses.replace(s, data_dir=str(Path(s.data_dir).resolve()))
    if s.base_model is not None:
        s = dataclasses.replace(s, base_model=str(check_base_model(s.base_model)))
        inputs.append(Path(s.base_model))
    if s.use_vllm:  # vLLM missing: the one-line error that says how to get it, before any work
        from eval.generate import resolve_engine

        resolve_engine("vllm")
    partial = _partial_run(resume_from, s) if resume_from is not None else None  # before the folder is locked
    check_out(out, force, inputs=inputs)
    moved, held = None, None
    t_start = time.monotonic()
    kept = unfinished_dir(out)
    carried = False  # the resumed folder's contents are all in this run's folder
    work: Path | None = None
    try:
        if partial is not None:
            partial, moved, held = _take_partial(partial, out)
        with (
            _LoadSampler() as load,
            atomic_dir(out, KIND, inputs=inputs, force=force, keep_on_failure=kept) as tmp,
        ):
            work = tmp
            _mark_work(tmp, out)
            if partial is not None:
                shutil.copytree(partial, tmp, dirs_exist_ok=True, ignore=_not_resumed(partial))
                carried = True
            summary = _finish(s, tmp, console, progress_disable, load, t_start)
            _unmark_work(tmp)
    except BaseException as exc:
        if work is not None:
            _unmark_work(work, kept=kept)  # the folder itself stays marked: this --out's work
        resume = kept
        if moved is not None and not (carried and kept.is_dir()):  # the resumed folder is the whole one
            shutil.rmtree(kept, ignore_errors=True)
            resume = moved
        elif moved is not None and kept.is_dir():
            shutil.rmtree(moved, ignore_errors=True)  # all of it is in the kept folder
        if resume.is_dir():
            console.print(
                f"[bold]the work done so far is kept in {resume}[/]: rerun the same command with "
                f"--resume-from {resume} to go on from it",
                soft_wrap=True,  # a path to copy, never broken across lines
            )
        if isinstance(exc, InputError) and work is not None:
            where = _moved_path(exc.path, work, resume)
            if where != exc.path:  # named where the file is now, not in the temporary folder that is gone
                raise InputError(
                    exc.message, path=where, row=exc.row, field=exc.field, hint=exc.hint
                ) from exc
        raise
    finally:
        if held is not None:
            release_output(held)
    if moved is not None:  # this --out's own unfinished folder, now part of this complete one
        shutil.rmtree(moved, ignore_errors=True)
    return summary


def unfinished_dir(out: Path) -> Path:
    """Where a failed or interrupted demo of ``out`` keeps its folder (a new name each time, beside ``out``;
    not a ``.tmp`` folder, which the next write of ``out`` would clean away as stale)."""
    return out.parent / f".{out.name}.unfinished-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def _finish(
    s: DemoSettings, tmp: Path, console: Any, progress_disable: bool, load: Any, t_start: float
) -> dict[str, Any]:
    """The stages, then ``summary.json`` and ``report.md``, in the run's folder ``tmp``."""
    with atomic_write(tmp / SETTINGS_FILE) as f:
        f.write_text(json.dumps(dataclasses.asdict(s), indent=2) + "\n")
    summary = _run_stages(s, tmp, console, progress_disable)
    summary["machine"]["load_1min"] = load.summary()
    summary["timing"]["total_s"] = time.monotonic() - t_start
    summary["timing"]["peak_rss_mb"] = peak_rss_mb()
    summary["notes"] = report_notes(summary)
    summary = {"headline": headline_block(summary), **summary}
    summary = _finite_or_none(summary)
    with atomic_write(tmp / "summary.json") as f:
        f.write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    with atomic_write(tmp / "report.md") as f:
        f.write_text(report_markdown(summary))
    return summary


#: The demo's mark in its working folder (the temporary folder, then the ``.<out>.unfinished-*`` one a failed
#: run keeps): ``{"format", "out", "host", "pid", "started"}``, ``out`` absolute. Written first, removed
#: before the folder becomes ``--out``; with the folder's writer lock (held while the demo runs) it tells a
#: resume whose work a folder is and whether its writer is alive (:func:`_take_partial`).
WORK_MARKER = ".remark-demo-work.json"
WORK_FORMAT = 1

#: What ``resume_from`` does not carry over from the folder's top level: ownership, mark and lock files, and
#: the outputs the run writes last (inside, only lock files: a stage's outputs are carried whole, markers
#: included, as its seal lists them).
NOT_RESUMED = (OUTPUT_MARKER, LOCK_FILE, WORK_MARKER, "summary.json", "report.md")


def _not_resumed(top: Path) -> Any:
    """``shutil.copytree``'s ``ignore`` for a resumed folder ``top`` (see :data:`NOT_RESUMED`)."""
    top_abs = os.path.abspath(top)

    def ignore(folder: str, names: list[str]) -> set[str]:
        skip = NOT_RESUMED if os.path.abspath(folder) == top_abs else (LOCK_FILE,)
        return {n for n in names if n in skip}

    return ignore


def _mark_work(tmp: Path, out: Path) -> None:
    """Mark ``tmp`` as this process's work for ``out`` and hold its writer lock while the demo runs."""
    import socket

    record = {
        "format": WORK_FORMAT,
        "out": os.path.abspath(out),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with atomic_write(tmp / WORK_MARKER) as f:
        f.write_text(json.dumps(record, indent=2) + "\n")
    hold_output(tmp)


def _unmark_work(tmp: Path, *, kept: Path | None = None) -> None:
    """Release the writer lock of the working folder ``tmp``; on success (no ``kept``) remove its mark too,
    since the folder is about to become ``--out``. A failed run's folder, renamed to ``kept``, keeps its
    mark and loses the lock file it no longer holds."""
    release_output(tmp)
    if kept is None:
        (tmp / WORK_MARKER).unlink(missing_ok=True)
    elif kept.is_dir():
        (kept / LOCK_FILE).unlink(missing_ok=True)


def _moved_path(path: str | None, work: Path, now: Path) -> str | None:
    """``path`` inside the working folder ``work`` (gone after a failure) as the same file in ``now``."""
    if path is None or not now.is_dir():
        return path
    full = Path(os.path.abspath(path))
    base = Path(os.path.abspath(work))
    return str(now / full.relative_to(base)) if full.is_relative_to(base) else path


def _work_marker(folder: Path) -> dict[str, Any] | None:
    """The mark of an unfinished demo's folder (:data:`WORK_MARKER`), None when it has none; a damaged one
    is an ``InputError`` naming it."""
    path = folder / WORK_MARKER
    if not (path.exists() or path.is_symlink()):
        return None
    return read_json(
        path,
        schema={"out": str},
        what="demo work mark",
        hint="remark cannot tell which demo's work this is: copy the folder elsewhere without this file to "
        "resume from the copy",
    )


def _stale_name(name: str, out: Path) -> bool:
    """Whether ``name`` is one the next write of ``out`` may clean away as an interrupted write's temporary
    (``catalog.io.outputs.clean_stale``)."""
    import re

    return re.match(rf"^\.{re.escape(out.name)}\.[A-Za-z0-9-]+\.\d+\.[^.]+\.(tmp|old)$", name) is not None


def _take_partial(folder: Path, out: Path) -> tuple[Path, Path | None, Path | None]:
    """What this resume of ``out`` may do with the unfinished folder ``folder``: ``(where to copy from, the
    folder moved aside to be removed after success or None, the folder whose writer lock this process now
    holds or None)``.

    Refused (exit 2): a folder another process holds (a running demo's: its writer lock); one whose mark
    says it is the work of another ``--out``; one without a mark that is named like a temporary folder of
    ``out`` (the demo's next write would clean it away). Moved aside (out of the way of that clean-up) and
    removed after success: only a folder beside ``out`` whose mark says it is ``out``'s. Anything else is
    read only, and left as it is."""
    from catalog.io.locks import OutputBusyError, lock_holder

    held = None
    try:
        was_held = lock_holder(folder) == "this process"  # --resume-from --out itself: never released here
        hold_output(folder, field="--resume-from")
        held = None if was_held else folder
    except OutputBusyError as busy:
        raise OutputBusyError(
            busy.message.split(";")[0] + ": the folder of a demo at work, which a resume would take from it",
            path=folder,
            field="--resume-from",
            hint="resume from it once that demo has ended (or stop it), or start afresh",
        ) from None
    except OSError:  # a folder this user may not write: only read it, if nobody writes it
        holder = lock_holder(folder)
        if holder is not None:
            raise OutputBusyError(
                f"is being written by {holder}", path=folder, field="--resume-from", hint="wait for it to end"
            ) from None
    try:
        mark = _work_marker(folder)
        beside = Path(os.path.abspath(folder)).parent.resolve() == Path(os.path.abspath(out)).parent.resolve()
        if mark is not None:
            owner = Path(mark["out"])
            if Path(os.path.abspath(owner)).resolve() != Path(os.path.abspath(out)).resolve():
                raise InputError(
                    f"the unfinished work of another demo (--out {owner}), not of --out {out}",
                    path=folder,
                    field="--resume-from",
                    hint=f"resume it with --out {owner}, or start afresh",
                )
            if beside:  # this --out's own: out of the way of atomic_dir's clean-up, removed after success
                import tempfile

                moved = Path(tempfile.mkdtemp(prefix=f".{out.name}.resumed-", dir=out.parent))
                moved.rmdir()
                os.replace(folder, moved)
                return moved, moved, held
            return folder, None, held
        if beside and _stale_name(folder.name, out):
            raise InputError(
                "named like a temporary folder of --out, which the demo's next write removes, and it carries "
                "no mark of this demo's work",
                path=folder,
                field="--resume-from",
                hint="copy it to another name and resume from the copy",
            )
        return folder, None, held
    except BaseException:
        if held is not None:
            release_output(held)
        raise


def _partial_run(folder: str | Path, s: DemoSettings) -> Path:
    """``folder`` checked as an unfinished demo of settings ``s`` (its ``demo_settings.json``), and as sound:
    its mark readable and every finished stage's files as the stage sealed them (``remark.demo.jobs``);
    each problem an ``InputError`` naming the file in ``folder``."""
    folder = Path(folder)
    path = folder / SETTINGS_FILE
    if not path.is_file():
        raise InputError(
            f"no {SETTINGS_FILE} here: not a demo's folder",
            path=folder,
            field="--resume-from",
            hint="pass the .<out>.unfinished-* or .<out>...tmp folder an unfinished `remark demo` left beside its --out",
        )
    saved = read_json(path, schema={}, what="demo settings")
    if saved != json.loads(json.dumps(dataclasses.asdict(s))):
        differ = sorted(
            k
            for k in set(saved) | set(dataclasses.asdict(s))
            if saved.get(k) != json.loads(json.dumps(dataclasses.asdict(s))).get(k)
        )
        raise InputError(
            f"the unfinished run was made with other settings ({', '.join(differ)})",
            path=path,
            field="--resume-from",
            hint="resume with the same flags and --settings file, or start afresh",
        )
    _work_marker(folder)
    logs = folder / LOGS
    if (logs.exists() or logs.is_symlink()) and not logs.is_dir():
        raise InputError(
            "not a folder (a demo keeps its stages' logs there)",
            path=logs,
            field="--resume-from",
            hint="remove it to run every stage again, or start afresh without --resume-from",
        )
    for job in sorted(p.name for p in logs.iterdir() if p.is_dir()) if logs.is_dir() else ():
        problem = seal_problem(folder, job)
        if problem is not None:
            raise InputError(
                problem.message, path=problem.path, field=problem.field or "--resume-from", hint=problem.hint
            )
    return folder


def _run_stages(s: DemoSettings, root: Path, console: Any, progress_disable: bool) -> dict[str, Any]:
    import polars as pl
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from data_prep.dataset import load_dataset

    columns = (
        TextColumn("{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
    )
    stages: dict[str, float] = {}
    jobs_done: dict[str, dict[str, Any]] = {}
    with Progress(*columns, console=console, disable=progress_disable) as bar:
        t = time.monotonic()
        task = bar.add_task("data + model + SFT", total=None, info="")
        warm = Job("warmup", "warmup", {"settings": dataclasses.asdict(s)}, threads=s.warmup_threads)
        jobs_done |= run_jobs(
            [warm],
            root,
            slots=1,
            on_progress=lambda job, rec: bar.update(task, completed=rec["step"], total=rec["max"]),
        )
        w = jobs_done["warmup"]["result"]
        bar.update(task, info=f"SFT loss {w['sft']['first_loss']:.2f} -> {w['sft']['final_loss']:.2f}")
        stages["data + model + SFT"] = time.monotonic() - t
        data_dir, sft_dir = Path(w["data_dir"]), Path(w["sft_model"])

        def rl_round(jobs: list[Job]) -> None:
            tasks = {j.name: bar.add_task(_label(j.name), total=s.steps, info="") for j in jobs}

            def rl_step(job: Job, rec: dict[str, Any]) -> None:
                info = f"reward {rec.get('reward', float('nan')):.2f}"
                if "train/zero_signal_frac" in rec:
                    info += f", flat groups {rec['train/zero_signal_frac']:.0%}"
                bar.update(tasks[job.name], completed=rec["step"], info=info)

            jobs_done.update(run_jobs(jobs, root, slots=s.jobs, on_progress=rl_step))
            for j in jobs:
                bar.update(tasks[j.name], completed=s.steps)
                if not (root / j.spec["config"]["output_dir"] / "best" / "config.json").is_file():
                    raise RuntimeError(f"{j.name} wrote no best checkpoint")

        t = time.monotonic()
        rl_round(grid_jobs(s, data_dir, sft_dir))
        tuning = _tuning(s, jobs_done)
        chosen = {m: tuning[m]["chosen"] for m in METHODS}
        with atomic_write(root / TUNING_FILE) as f:  # frozen before any test split is read
            f.write_text(json.dumps(tuning, indent=2) + "\n")
        stages["RL: learning-rate grid"] = time.monotonic() - t
        if len(s.rl_seeds) > 1:
            t = time.monotonic()
            rl_round(seed_jobs(s, data_dir, sft_dir, chosen))
            stages["RL: further seeds"] = time.monotonic() - t

        t = time.monotonic()
        test_dirs = {"test": data_dir} | ({"crowd": Path(w["crowd_dir"])} if w.get("crowd_dir") else {})
        evals = eval_jobs(s, test_dirs, chosen)
        task = bar.add_task("test evaluation", total=len(test_models(s, chosen)) * len(test_dirs), info="")
        progress_by_job: dict[str, int] = {}

        def eval_step(job: Job, rec: dict[str, Any]) -> None:
            progress_by_job[job.name] = rec["step"]
            bar.update(task, completed=sum(progress_by_job.values()))

        jobs_done |= run_jobs(evals, root, slots=s.jobs, on_progress=eval_step)
        tests: dict[str, Any] = {}
        for name, test_dir in test_dirs.items():
            folder = root / TEST_SETS[name]
            results = {
                model: r
                for j in evals
                if j.spec["out"] == TEST_SETS[name]
                for model, r in jobs_done[j.name]["result"].items()
            }
            pairs = per_seed_pairs(folder, s)
            flagged = _flagged_test_requests(root / test_dir)
            tests[name] = {
                "data_dir": str(test_dir),
                "models": {
                    model: {"greedy": _cells(r), "sampled": _cells(r["sampled"]) if "sampled" in r else None}
                    for model, r in results.items()
                },
                "paired": pairs,
                "across_seeds": across_seeds(folder, s, pairs, flagged),
            }
        validation = validation_results(s, root, chosen)
        plots = {}
        for i, lists in enumerate(validation):
            plots[lists] = "curves.png" if i == 0 else f"curves_{lists}.png"
            plot_validation(validation[lists], root / plots[lists], lists=lists, k=s.k, steps=s.steps)
        stages["evaluation + report"] = time.monotonic() - t

    ds = load_dataset(root / data_dir)
    description, stats_line = _data_description(s, ds)
    train = ds.requests.filter(pl.col("split") == "train")
    valid = ds.requests.filter(pl.col("split") == "valid")
    retrieval, strongest = _strongest_baseline(ds.catalog.df, train, valid, s.k)
    for name, test_dir in test_dirs.items():
        test_ds = ds if test_dir == data_dir else load_dataset(root / test_dir)
        requests = test_ds.requests.filter(pl.col("split") == "test")
        tests[name]["reference_levels"] = _levels(requests, test_ds.catalog.df, train, s.k, retrieval)
        tests[name]["split_overlap"] = _overlap(train, requests)
        tests[name]["n_requests"] = requests.height

    runs: dict[str, Any] = {}
    for m in METHODS:
        runs[m] = {"label": METHODS[m][0], "reward_scheme": METHODS[m][1], "sampling": METHODS[m][2]}
        for seed in s.rl_seeds:
            found = jobs_done[job_name(m, seed, chosen[m])]["result"]["best"]
            runs[m][f"seed{seed}"] = {
                "learning_rate": chosen[m],
                "best_step": found["step"] if found else None,
                "best_value": found["value"] if found else None,
                "train": train_diagnostics(root / "logs" / job_name(m, seed, chosen[m])),
            }
    sft = {k: v for k, v in w["sft"].items() if k != "wall_s"}
    primary = tests["test"]
    return {
        "settings": dataclasses.asdict(s),
        "metric": s.metric,
        "protocol": {
            "split": "by request" if s.data == "synthetic" else "by question",
            "test_requests_in_train": primary["split_overlap"]["near_duplicate_prompt"],
            "valid_overlap": _overlap(train, valid),
            "test_read_by": "the final evaluation only, after tuning.json was written",
            "tuning": tuning,
        },
        "data": {"dir": str(data_dir), "description": description, "stats_line": stats_line},
        "model": {
            "base": s.base_model or "tiny Qwen2 built from scratch (remark.run.tiny_model)",
            "parameters": _n_params(root / w["base_model"]),
            "vocab": _vocab(root / w["base_model"]),
            "generation": "vllm" if s.use_vllm else "transformers",
        },
        "sft": sft,
        "threads": _threads(s, jobs_done),
        "runs": runs,
        "test": primary["models"],
        "paired": primary["paired"],
        "across_seeds": primary["across_seeds"],
        "reference_levels": primary["reference_levels"],
        "strongest_baseline": strongest,
        "split_overlap": primary["split_overlap"],
        "test_sets": {name: v for name, v in tests.items() if name != "test"},
        "validation": validation,
        "versions": package_versions(),
        "files": {"report": "report.md", "plots": plots, "summary": "summary.json", "tuning": TUNING_FILE},
        "machine": machine_record(jobs_done),
        "weights": weight_hashes(root),
        "timing": {
            "stages": stages,
            "jobs": {name: {"wall_s": d["wall_s"], "cpu_s": d["cpu_s"]} for name, d in jobs_done.items()},
            "cpu_s": sum(d["cpu_s"] for d in jobs_done.values()),
            "sft_s": w["sft"].get("wall_s"),
        },
    }


def _cells(res: dict[str, Any]) -> dict[str, Any]:
    keep = ("n_requests", "per_responder", "union", "single_mention", "lists", "ci", "collapse", "protoqa")
    return {k: res[k] for k in keep if k in res}


def _tuning(s: DemoSettings, jobs_done: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per method: the grid, each rate's best validation value and step (the runs' ``best``), the choice."""
    seed = s.rl_seeds[0]
    out: dict[str, Any] = {}
    best: dict[str, dict[float, float | None]] = {}
    for m in METHODS:
        found = {lr: jobs_done[job_name(m, seed, lr)]["result"]["best"] for lr in s.lr_grid}
        best[m] = {lr: (f["value"] if f else None) for lr, f in found.items()}
        out[m] = {
            "grid": list(s.lr_grid),
            "seed": seed,
            "steps": s.steps,
            "metric": s.metric,
            "validation": [
                {
                    "learning_rate": lr,
                    "best_value": f["value"] if f else None,
                    "best_step": f["step"] if f else None,
                }
                for lr, f in found.items()
            ],
        }
    for m, lr in choose_rates(best).items():
        out[m]["chosen"] = lr
    return out


def _levels(requests, catalog, train, k: int, retrieval) -> dict[str, Any]:
    from eval.baselines import reference_levels

    return reference_levels(requests, catalog, k, train=train, retrieval=retrieval) if requests.height else {}


def _strongest_baseline(catalog, train, valid, k: int) -> tuple[Any, dict[str, Any]]:
    """The retrieval baseline's variant and neighbours chosen on the validation questions
    (``eval.retrieval.choose_retrieval``), and the strongest simple baseline: the reference level with the
    best validation per-responder recall@K (``eval.baselines.strongest_baseline``), named before any test
    question is read and shown on test beside every model."""
    from eval.baselines import reference_levels, strongest_baseline
    from eval.retrieval import choose_retrieval

    choice = choose_retrieval(train, valid, k)
    on_valid = reference_levels(valid, catalog, k, train=train, retrieval=choice)
    return choice, {
        "name": strongest_baseline(on_valid),
        "chosen_on": "valid",
        "validation": {name: v["per_responder"] for name, v in on_valid.items()},
        "retrieval": choice.as_dict(),
    }


def _overlap(train, requests) -> dict[str, Any]:
    import polars as pl

    from eval.leakage import split_overlap

    both = pl.concat(
        [train.with_columns(split=pl.lit("train")), requests.with_columns(split=pl.lit("test"))],
        how="diagonal_relaxed",
    )
    return split_overlap(both, test_split="test", train_split="train")


def peak_rss_mb() -> float:
    """The largest resident set of this process and of any stage process it waited for, in MiB
    (``getrusage``' ``ru_maxrss``, KiB on Linux): the demo's peak memory, one process at a time."""
    import resource

    return (
        max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        / 1024
    )


def weight_hashes(root: Path) -> dict[str, str]:
    """sha256 of every ``model.safetensors`` a stage saved (warm-up, each run's ``best`` and ``final``), by
    path inside the demo's folder: two hosts' runs compared stage by stage (equal hashes, equal weights)."""
    import hashlib

    out = {}
    for path in sorted(root.rglob("model.safetensors")):
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        out[path.relative_to(root).as_posix()] = digest.hexdigest()
    return out


def machine_record(jobs_done: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The host: CPU vendor, model and vector instruction sets, and the kernels torch and MKL ran in the
    stage processes."""
    import torch

    from remark.demo.worker_env import cpu_info

    rec: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        **cpu_info(),
    }
    if jobs_done:
        records = [d["threads"] for d in jobs_done.values() if d.get("threads")]
        rec["stage_cpu_capability"] = sorted({r.get("cpu_capability") for r in records} - {None})
        rec["stage_mkl_branch"] = sorted({r.get("mkl_branch") for r in records} - {None})
    return rec


def _label(name: str) -> str:
    """``remark-lr2e-04-seed0`` -> ``ReMaRk lr 2e-04 seed 0``."""
    rest, seed = name.rsplit("-seed", 1)
    method, lr = rest.rsplit("-lr", 1)
    return f"{METHODS[method][0]} lr {lr} seed {seed}"


def _threads(s: DemoSettings, jobs_done: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The thread settings and what every stage process reported; a stage that differs is an error."""
    records = {name: d["threads"] for name, d in jobs_done.items()}
    for name, rec in records.items():
        want = s.warmup_threads if name == "warmup" else s.threads
        if rec["torch_intra_op"] != want or rec["polars"] != want:
            raise RuntimeError(f"stage {name} ran with {rec}, not {want} thread(s)")
    first = next(rec for name, rec in records.items() if name != "warmup")
    return {
        "per_process": s.threads,
        "warmup": s.warmup_threads,
        "processes_at_once": s.jobs,
        "torch_inter_op": first["torch_inter_op"],
        "env": first["env"],
        "stages": sorted(records),
    }


def _n_params(model_dir: Path) -> int:
    from safetensors import safe_open

    total = 0
    for path in model_dir.glob("*.safetensors"):
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (safe_open is not a dict)
                total += int(np.prod(f.get_slice(name).get_shape()))
    return total


def _flagged_test_requests(data_dir: Path) -> list[str]:
    """The test requests whose responder count is an outlier in the test split
    (``data_prep.outliers.outlier_requests``), by id."""
    import polars as pl

    from data_prep.dataset import load_dataset
    from data_prep.outliers import outlier_requests

    requests = load_dataset(data_dir).requests.filter(pl.col("split") == "test")
    return outlier_requests(requests)["request_id"].to_list()


def _data_description(s: DemoSettings, ds) -> tuple[str, str]:
    from data_prep.stats import dataset_stats

    st = dataset_stats(ds.requests)
    splits = ", ".join(f"{k} {v['requests']}" for k, v in sorted(st["by_split"].items()))
    line = (
        f"{st['requests']} requests ({splits}), "
        f"{len(ds.catalog)} catalog items, {st['n_responders']['mean']:.2f} responders per request "
        f"(max {st['n_responders']['max']}), {st['union_size']['mean']:.1f} union items per request, "
        f"{st['single_mention_item_share']:.1%} of union items named by one responder"
    )
    if s.data == "synthetic":
        offbeat = ds.meta.get("generator", {}).get("offbeat_prob")
        line += (
            "; each request names a genre and one or two seed movies; a responder names movies of that genre "
            f"or, with probability {offbeat}, an offbeat favourite from anywhere"
        )
        return "the embedded synthetic multi-responder world", line
    return "ProtoQA dev (scraped questions split by question; none of the test questions trained on)", line


def _vocab(model_dir: Path) -> int:
    from transformers import AutoTokenizer

    return len(AutoTokenizer.from_pretrained(model_dir, trust_remote_code=False))


def _finite_or_none(obj: Any) -> Any:
    """JSON without NaN/inf: non-finite floats become None (a bound that does not exist)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite_or_none(v) for v in obj]
    if isinstance(obj, np.generic):
        return _finite_or_none(obj.item())
    return obj


def check_base_model(folder: str | Path) -> Path:
    """``folder`` (absolute) when it holds a pretrained model's ``config.json`` and safetensors weights."""
    path = Path(folder).resolve()
    if not (path / "config.json").is_file() or not any(path.glob("*.safetensors")):
        raise InputError(
            "no model here (config.json and *.safetensors)",
            path=path,
            field="base_model",
            hint="`make fetch-model` writes SmolLM2-135M-Instruct to .cache/models/smollm2-135m-instruct",
        )
    return path


def check_out(out: Path, force: bool = False, *, inputs: list[Path] | tuple[Path, ...] = ()) -> None:
    """Refuse an ``--out`` the demo may not replace, before any work (``catalog.io.outputs.check_output_dir``)."""
    from catalog.io.outputs import check_output_dir

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError("--out is a file", path=out, hint="pass a folder")
    check_output_dir(out, KIND, inputs=inputs, force=force, hold=True)
