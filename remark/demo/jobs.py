"""Stage processes: start ``remark.demo.worker`` jobs, at most ``slots`` at once, and watch their progress.

Each :class:`Job` gets a folder ``logs/<name>/`` in the demo's output folder holding ``job.json``,
``worker.log`` (the process's stdout and stderr), ``progress.jsonl``, ``threads.json`` and, once it has
finished, ``result.json``. Jobs start in the order given; how many run at once changes the wall time,
not the results (each job's numbers depend on its spec and thread count only: ``remark.demo.worker_env``).
A failed job stops the others and raises with the tail of its log; one that failed on bad input
(``input_error.json``, ``remark.demo.worker``) raises that ``InputError`` again: one line, exit 2, its
path made absolute in the demo's folder.

A job that succeeded is sealed: ``logs/<name>/done.json`` lists every file of its log folder and of its
outputs (:func:`job_outputs`: the warm-up's data and models, a run's folder, an evaluation's model
folders) with size and sha256. A resumed demo reuses a job only when it is sealed, its spec the same and
its files as sealed (:func:`finished`; :func:`seal_problem` checks the hashes of the folder resumed from,
so a damaged file is named there); any other job is run again from nothing: its log folder and outputs,
copied from the unfinished folder, are removed first (they are in the demo's own working folder).

No stage outlives the demo: each worker runs in a process group of its own, which :func:`run_jobs` ends
(``SIGTERM``, then ``SIGKILL`` after :data:`STOP_S`) whenever it stops early: a failed job, ``SIGINT``
(Ctrl-C reaches the parent only: the groups are not the terminal's) or ``SIGTERM`` (turned into
:class:`Terminated` while jobs run, so the clean-up runs); and each worker dies with its parent on its own
side (``remark.demo.worker.die_with_parent``), which is what holds after ``kill -9`` of the parent.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from catalog.io.files import decode_utf8, read_json
from catalog.io.outputs import atomic_write
from remark.demo.worker_env import INPUT_ERROR, worker_env

LOGS = "logs"
#: a finished job's seal: its files with size and sha256 (written by the parent, last)
SEAL = "done.json"
SEAL_FORMAT = 1
#: what the warm-up stage writes in the demo folder (``remark.demo.worker._warmup``)
WARMUP_OUTPUTS = ("data", "data_crowd", "base_model", "sft_model")
#: seconds a stopped stage's process group gets between ``SIGTERM`` and ``SIGKILL``
STOP_S = 5.0
#: the variable that tells a worker its parent's pid (``remark.demo.worker.PARENT_ENV``)
PARENT_ENV = "REMARK_DEMO_PARENT"


class Terminated(KeyboardInterrupt):
    """``SIGTERM`` arrived while stage processes ran: raised in the main thread so that they are stopped
    (an interruption, like Ctrl-C: the CLI says so and exits 130)."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While the block runs, ``SIGTERM`` raises :class:`Terminated` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second one must not cut the clean-up short
        raise Terminated("terminated (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_group(proc: subprocess.Popen, *, grace_s: float = STOP_S) -> None:
    """End ``proc`` and every process of its group (a stage and anything it started): ``SIGTERM``, then
    ``SIGKILL`` after ``grace_s``; waits for ``proc``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace_s)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # what the stage started, if it lingers
            return
        except subprocess.TimeoutExpired:
            continue
    proc.wait()


@dataclass(frozen=True)
class Job:
    """One stage process: ``kind`` (``warmup``, ``rl`` or ``eval``), a JSON-ready ``spec``, a ``name``."""

    name: str
    kind: str
    spec: dict[str, Any]
    threads: int = 1

    def folder(self, root: Path) -> Path:
        return root / LOGS / self.name


def read_progress(folder: Path) -> list[dict[str, Any]]:
    """The records of ``folder/progress.jsonl`` so far (a line still being written is skipped)."""
    path = folder / "progress.jsonl"
    records = []
    for raw in path.read_bytes().splitlines() if path.is_file() else ():
        try:
            records.append(json.loads(decode_utf8(raw, path)))
        except (InputError, json.JSONDecodeError):  # the worker is still writing this line
            continue
    return records


def job_outputs(job: Job) -> list[str]:
    """The paths (relative to the demo folder) a job writes besides its log folder."""
    if job.kind == "warmup":
        return list(WARMUP_OUTPUTS)
    if job.kind == "rl" and job.spec.get("config", {}).get("output_dir"):
        return [str(job.spec["config"]["output_dir"])]
    if job.kind == "eval" and "out" in job.spec:
        return [str(Path(job.spec["out"]) / name) for name in job.spec.get("models", {})]
    return []


def _job_files(job: Job, root: Path) -> list[str]:
    """Every file of the job's log folder (but its seal) and of its outputs, relative to ``root``."""
    found = []
    for rel in [str(Path(LOGS) / job.name), *job_outputs(job)]:
        base = root / rel
        paths = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        found += [str(p.relative_to(root)) for p in paths if p.name != SEAL or p.parent != job.folder(root)]
    return found


def _sha256(path: Path) -> str:
    import hashlib

    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def seal(job: Job, root: Path) -> None:
    """Write the job's seal (see the module docstring): after it succeeded, before it counts as done."""
    files = {
        rel: {"size": (root / rel).stat().st_size, "sha256": _sha256(root / rel)}
        for rel in _job_files(job, root)
    }
    with atomic_write(job.folder(root) / SEAL) as tmp:
        tmp.write_text(json.dumps({"format": SEAL_FORMAT, "files": files}, indent=1) + "\n")


def _read_seal(folder: Path) -> dict[str, dict[str, Any]]:
    """The files a seal lists; ``InputError`` naming it when it is not one."""
    from catalog.io.files import check_fields

    path = folder / SEAL
    record = read_json(path, schema={"format": int, "files": dict}, what="demo job seal")
    if record["format"] != SEAL_FORMAT:
        raise InputError(f"format {record['format']}, not {SEAL_FORMAT}", path=path, field="format")
    for rel, entry in record["files"].items():
        check_fields(entry, {"size": int, "sha256": str}, path=path, prefix=f"files.{rel}")
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise InputError("a path outside the demo folder", path=path, field=f"files.{rel}")
    return record["files"]


def seal_problem(root: Path, name: str, *, hashes: bool = True) -> InputError | None:
    """Why the sealed job ``logs/<name>`` of the demo folder ``root`` cannot be reused as it is (None when
    it can, or when it has no seal: then it is not finished and runs again): the seal unreadable, a file
    it lists missing, or (``hashes``) of another size or content. The error names the file in ``root``."""
    folder = root / LOGS / name
    if not (folder / SEAL).is_file():
        return None
    hint = f"remove {folder} to run that stage again, or start afresh without --resume-from"
    try:
        files = _read_seal(folder)
    except InputError as err:
        return InputError(err.message, path=err.path, field=err.field, hint=hint)
    for rel, entry in files.items():
        path = root / rel
        if not path.is_file():
            return InputError(f"missing (the finished stage {name!r} wrote it)", path=path, hint=hint)
        if path.stat().st_size != entry["size"] or (hashes and _sha256(path) != entry["sha256"]):
            return InputError(
                f"not what the finished stage {name!r} wrote ({'size' if path.stat().st_size != entry['size'] else 'sha256'} "
                f"differs from {Path(LOGS) / name / SEAL}): damaged or edited since",
                path=path,
                hint=hint,
            )
    return None


def _clear(job: Job, root: Path) -> None:
    """Remove what an unfinished try of ``job`` left in the demo's working folder ``root`` (copied from a
    resumed folder): its log folder and outputs, so the job runs from nothing."""
    import shutil

    for rel in [str(Path(LOGS) / job.name), *job_outputs(job)]:
        path = root / rel
        if not Path(os.path.abspath(path)).is_relative_to(os.path.abspath(root)):
            continue  # never outside the demo's own folder
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def _start(job: Job, root: Path, extra_env: Mapping[str, str]) -> subprocess.Popen:
    folder = job.folder(root)
    _clear(job, root)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_write(folder / "job.json") as tmp:
        tmp.write_text(json.dumps({"kind": job.kind, "threads": job.threads, "spec": job.spec}, indent=2))
    rel = folder.relative_to(root)
    with (folder / "worker.log").open("w") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "remark.demo.worker", str(rel)],
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=worker_env(job.threads) | dict(extra_env) | {PARENT_ENV: str(os.getpid())},
            process_group=0,  # a group of its own: stopped whole by the parent, not by the terminal's Ctrl-C
        )


def finished(job: Job, root: Path) -> dict[str, Any] | None:
    """A job already finished in ``root`` with the same kind, threads and spec (a resumed demo), sealed and
    its files as sealed (sizes; the hashes were checked in the folder resumed from), as :func:`run_jobs`
    reports it (``wall_s``: its last progress record's); None when it must run."""
    folder = job.folder(root)
    files = [folder / name for name in ("job.json", "result.json", "threads.json", "cpu.json", SEAL)]
    if not all(f.is_file() for f in files) or seal_problem(root, job.name, hashes=False) is not None:
        return None
    want = json.loads(json.dumps({"kind": job.kind, "threads": job.threads, "spec": job.spec}))
    try:
        if read_json(files[0], what="demo job") != want:
            return None
        records = read_progress(folder)
        return {
            "result": read_json(files[1]),
            "threads": read_json(files[2], schema={}),
            "wall_s": float(records[-1].get("wall_s", 0.0)) if records else 0.0,
            "cpu_s": read_json(files[3], schema={"cpu_s": float})["cpu_s"],
            "reused": True,
        }
    except InputError:  # not what the stage wrote after all: run it again
        return None


def run_jobs(
    jobs: Sequence[Job],
    root: Path,
    *,
    slots: int,
    on_progress: Callable[[Job, dict[str, Any]], None] = lambda job, rec: None,
    poll_s: float = 0.5,
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run ``jobs`` with at most ``slots`` at once; ``{name: {"result", "threads", "wall_s", "cpu_s"}}``.

    ``extra_env`` overrides the workers' environment (tests: another ``PYTHONHASHSEED``)."""
    done: dict[str, dict[str, Any]] = {}
    queue = []
    for job in jobs:  # jobs a resumed demo finished before are reused, not run again
        found = finished(job, root)
        if found is None:
            queue.append(job)
        else:
            done[job.name] = found
            records = read_progress(job.folder(root))
            if records:
                on_progress(job, records[-1])
    running: dict[str, tuple[Job, subprocess.Popen, float]] = {}
    with _sigterm_raises():
        try:
            _run_queue(queue, running, done, root, slots, on_progress, poll_s, extra_env)
        finally:
            for _, proc, _ in running.values():
                stop_group(proc)
    return done


def _run_queue(
    queue: list[Job],
    running: dict[str, tuple[Job, subprocess.Popen, float]],
    done: dict[str, dict[str, Any]],
    root: Path,
    slots: int,
    on_progress: Callable[[Job, dict[str, Any]], None],
    poll_s: float,
    extra_env: Mapping[str, str] | None,
) -> None:
    """:func:`run_jobs`' loop: start jobs while slots are free, watch them, collect what they finished."""
    while queue or running:
        while queue and len(running) < max(1, slots):
            job = queue.pop(0)
            running[job.name] = (job, _start(job, root, extra_env or {}), time.monotonic())
        time.sleep(poll_s)
        for name in list(running):
            job, proc, t0 = running[name]
            records = read_progress(job.folder(root))
            if records:
                on_progress(job, records[-1])
            if proc.poll() is None:
                continue
            del running[name]
            folder = job.folder(root)
            if proc.returncode != 0 and (folder / INPUT_ERROR).is_file():  # bad input: the worker's line
                rec = read_json(folder / INPUT_ERROR, schema={"message": str}, what="demo stage error")
                where = rec.get("path")  # the worker's paths are relative to the demo folder, its cwd
                where = (
                    None if where is None else str(root / where) if not Path(where).is_absolute() else where
                )
                raise InputError(
                    rec["message"], path=where, **{k: rec.get(k) for k in ("row", "field", "hint")}
                )
            if proc.returncode != 0 or not (folder / "result.json").is_file():
                tail = (folder / "worker.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"demo stage {name!r} failed (exit {proc.returncode}):\n{tail}")
            done[name] = {
                "result": read_json(folder / "result.json"),
                "threads": read_json(folder / "threads.json"),
                "wall_s": time.monotonic() - t0,
                "cpu_s": read_json(folder / "cpu.json", schema={"cpu_s": float})["cpu_s"],
            }
            seal(job, root)  # last: only now can a resumed demo reuse it
