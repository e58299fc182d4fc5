"""Stage processes: start ``remark.demo.worker`` jobs, at most ``slots`` at once, and watch their progress.

Each :class:`Job` gets a folder ``logs/<name>/`` in the demo's output folder holding ``job.json``,
``worker.log`` (the process's stdout and stderr), ``progress.jsonl``, ``threads.json`` and, once it has
finished, ``result.json``. Jobs start in the order given; how many run at once changes the wall time,
not the results (each job's numbers depend on its spec and thread count only: ``remark.demo.worker_env``).
A failed job stops the others and raises with the tail of its log; one that failed on bad input
(``input_error.json``, ``remark.demo.worker``) raises that ``InputError`` again: one line, exit 2.

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


def _start(job: Job, root: Path, extra_env: Mapping[str, str]) -> subprocess.Popen:
    folder = job.folder(root)
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
    """A job already finished in ``root`` with the same kind, threads and spec (a resumed demo), as
    :func:`run_jobs` reports it (``wall_s``: its last progress record's); None when it must run."""
    folder = job.folder(root)
    files = [folder / name for name in ("job.json", "result.json", "threads.json", "cpu.json")]
    if not all(f.is_file() for f in files):
        return None
    want = json.loads(json.dumps({"kind": job.kind, "threads": job.threads, "spec": job.spec}))
    if read_json(files[0], what="demo job") != want:
        return None
    records = read_progress(folder)
    return {
        "result": read_json(files[1]),
        "threads": read_json(files[2]),
        "wall_s": float(records[-1].get("wall_s", 0.0)) if records else 0.0,
        "cpu_s": read_json(files[3], schema={"cpu_s": float})["cpu_s"],
        "reused": True,
    }


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
                raise InputError(rec["message"], **{k: rec.get(k) for k in ("path", "row", "field", "hint")})
            if proc.returncode != 0 or not (folder / "result.json").is_file():
                tail = (folder / "worker.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"demo stage {name!r} failed (exit {proc.returncode}):\n{tail}")
            done[name] = {
                "result": read_json(folder / "result.json"),
                "threads": read_json(folder / "threads.json"),
                "wall_s": time.monotonic() - t0,
                "cpu_s": read_json(folder / "cpu.json", schema={"cpu_s": float})["cpu_s"],
            }
