"""Run ``remark ARGS...`` in this process and stop dead at one point of its writes, for the kill tests.

    python tests/killable.py READY_FILE POINT remark-args...

POINT is one of

- ``parquet:N``: just after the N-th polars ``DataFrame.write_parquet`` call returns;
- ``swap:NAME``: just before the new folder NAME is renamed into place (the old one already moved aside);
- ``ckpt-optimizer:STEP``: in checkpoint-STEP's save, after the model is written, before the optimizer;
- ``ckpt-marker:STEP``: after everything of checkpoint-STEP is written, before its completion marker.

At POINT it writes READY_FILE and sleeps until the parent kills it (``kill -9``): no ``finally``, no
``atexit``, no cleanup runs, exactly as for a killed run. :func:`run_and_kill` is the parent side.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _stop(ready: str) -> None:
    Path(ready).write_text(str(os.getpid()))
    time.sleep(600)


def _install(ready: str, point: str) -> None:
    what, _, arg = point.partition(":")
    if what == "parquet":
        import polars as pl

        original = pl.DataFrame.write_parquet
        calls = [0]

        def write_parquet(self, *args, **kwargs):
            out = original(self, *args, **kwargs)
            calls[0] += 1
            if calls[0] == int(arg):
                _stop(ready)
            return out

        pl.DataFrame.write_parquet = write_parquet
    elif what == "swap":
        original_replace = os.replace

        def replace(src, dst, *args, **kwargs):
            if Path(dst).name == arg and Path(src).name.endswith(".tmp") and Path(src).is_dir():
                _stop(ready)
            return original_replace(src, dst, *args, **kwargs)

        os.replace = replace
    elif what in ("ckpt-optimizer", "ckpt-marker"):
        import remark.step.checkpoint as ckpt

        name = "save_optimizer_state" if what == "ckpt-optimizer" else "write_complete_marker"
        original_fn = getattr(ckpt, name)

        def stop_at_step(*args, **kwargs):
            folder = Path(args[1] if name == "save_optimizer_state" else args[0])
            if folder.name == f"checkpoint-{arg}":
                _stop(ready)
            return original_fn(*args, **kwargs)

        setattr(ckpt, name, stop_at_step)
    else:
        raise SystemExit(f"unknown point {point!r}")


def run_and_kill(ready: Path, point: str, argv: list[str], *, timeout: float = 120.0) -> None:
    """Start ``remark argv`` under this script, wait until it reaches ``point``, ``kill -9`` it."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__)), str(ready), point, *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if proc.poll() is not None:
            raise AssertionError(
                f"the run ended before {point} (rc {proc.returncode}):\n{proc.stdout.read()}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the run did not reach {point} in {timeout} s")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    _install(sys.argv[1], sys.argv[2])
    from remark.cli.main import main

    sys.exit(main(sys.argv[3:]))
