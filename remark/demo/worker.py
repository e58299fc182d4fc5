"""One demo stage in its own process: ``python -m remark.demo.worker JOB_FOLDER``.

The parent (``remark.demo.jobs``) writes ``JOB_FOLDER/job.json`` (``{"kind", "threads", "spec"}``) and
starts this module with ``remark.demo.worker_env.worker_env`` and the demo's output folder as the working
directory (so every path in a spec, a config or a log is relative to the demo folder, which can be moved).

A worker dies with its parent, however the parent ends (:func:`die_with_parent`, first thing): on Linux
the kernel sends it ``SIGKILL`` when the parent exits (``prctl(PR_SET_PDEATHSIG)``), and a watchdog
thread that polls ``os.getppid()`` kills it too (other systems, or a parent that died before the worker
could ask). So a killed demo (``kill -9`` included) leaves no stage writing into its temporary folder
after its output lock is released. The parent's pid comes in ``REMARK_DEMO_PARENT``.
The worker fixes torch's thread pools, writes ``threads.json`` (what it ran with), runs the stage, writes
``cpu.json`` (its CPU seconds) and ``result.json`` last, so a job folder without it is a job that did not
finish. Bad input in a stage (``InputError``: a dataset's content, a config value) is written to
``input_error.json`` and the worker exits 2; the parent raises it again as the same one-line error.

Kinds:

- ``warmup``: the data, the tokenizer and tiny model, and the SFT warm-up (``remark.demo.stages``);
  progress lines ``{"step", "max"}``;
- ``rl``: one RL run (``remark.run.training.run_training`` on a dict of ``RemarkGRPOConfig`` fields); progress
  lines ``{"step", "max", "wall_s", "reward", "train/zero_signal_frac"}``;
- ``eval``: test evaluation of one or more models (``remark.demo.evaluation.evaluate_models``); one
  progress line per model done.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from catalog.io.outputs import atomic_write
from remark.demo.worker_env import INPUT_ERROR, apply_threads, thread_record

#: the environment variable naming the pid of the process that started the worker (``remark.demo.jobs``)
PARENT_ENV = "REMARK_DEMO_PARENT"
#: how often the watchdog looks for its parent (seconds)
WATCH_S = 0.5


def _set_parent_death_signal(sig: int) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent exits; False where that is not possible."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(1, int(sig), 0, 0, 0) == 0  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False


def die_with_parent(parent: int | None = None, *, every_s: float = WATCH_S) -> None:
    """Make this process die with ``parent`` (default: ``$REMARK_DEMO_PARENT``, else the current parent):
    the kernel's parent-death signal (Linux) and a daemon thread polling ``os.getppid()``; a parent already
    gone kills it at once. ``SIGKILL``: the worker's output is abandoned, as the parent's is."""
    if parent is None:
        named = os.environ.get(PARENT_ENV, "")
        parent = int(named) if named.isdigit() else os.getppid()
    _set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os.kill(os.getpid(), signal.SIGKILL)

    def watch() -> None:
        while True:
            time.sleep(every_s)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


class _Progress:
    """Appends one JSON line per event to ``progress.jsonl`` (read by the parent's progress bars)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "progress.jsonl"
        self.path.write_text("")
        self.t0 = time.monotonic()

    def __call__(self, **rec: Any) -> None:
        with self.path.open("a") as fh:
            fh.write(json.dumps({**rec, "wall_s": time.monotonic() - self.t0}) + "\n")


def _warmup(spec: dict[str, Any], progress: _Progress) -> dict[str, Any]:
    from remark.demo.settings import settings_from_dict
    from remark.demo.stages import (
        CROWD_DIR,
        build_model,
        prepare_protoqa,
        prepare_synthetic,
        protoqa_source,
        warm_up,
    )

    s = settings_from_dict(spec["settings"])
    if s.data == "synthetic":
        ds, data_dir = prepare_synthetic(Path("data"), s)
    else:
        ds, data_dir = prepare_protoqa(protoqa_source(s), Path("data"), s, crowd_dir=Path(CROWD_DIR))
    base = build_model(ds, Path("base_model"), s)
    sft = warm_up(ds, base, Path("sft_model"), s, lambda step, total: progress(step=step, max=total))
    crowd = CROWD_DIR if (Path(CROWD_DIR) / "requests.parquet").is_file() else None
    return {
        "data_dir": str(data_dir),
        "crowd_dir": crowd,
        "base_model": str(base),
        "sft_model": "sft_model",
        "sft": sft,
    }


def _rl(spec: dict[str, Any], progress: _Progress) -> dict[str, Any]:
    from transformers import TrainerCallback

    from remark.config import RemarkGRPOConfig
    from remark.run.training import run_training

    cfg = RemarkGRPOConfig(**spec["config"])

    class Progress(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                rec = {k: logs[k] for k in ("reward", "train/zero_signal_frac") if k in logs}
                progress(step=state.global_step, max=state.max_steps, **rec)

    return run_training(cfg, callbacks=[Progress()])


def _eval(spec: dict[str, Any], progress: _Progress) -> dict[str, Any]:
    from remark.demo.evaluation import evaluate_models
    from remark.demo.settings import settings_from_dict

    s = settings_from_dict(spec["settings"])
    models = {name: Path(p) for name, p in spec["models"].items()}
    done = []

    def on_done(name: str) -> None:
        done.append(name)
        progress(step=len(done), max=len(models), model=name)

    return evaluate_models(s, Path(spec["data_dir"]), models, Path(spec["out"]), on_done)


KINDS = {"warmup": _warmup, "rl": _rl, "eval": _eval}


def run_job(folder: str | Path) -> int:
    """Run the job described by ``folder/job.json`` in this process (see the module docstring)."""
    folder = Path(folder)
    from catalog.io.files import read_json

    job = read_json(folder / "job.json", schema={"kind": str, "threads": int, "spec": dict}, what="demo job")
    apply_threads(int(job["threads"]))
    _quiet_libraries()
    with atomic_write(folder / "threads.json") as tmp:
        tmp.write_text(json.dumps(thread_record(), indent=2) + "\n")
    result = KINDS[job["kind"]](job["spec"], _Progress(folder))
    with atomic_write(folder / "cpu.json") as tmp:  # CPU seconds of this process (all its threads)
        tmp.write_text(json.dumps({"cpu_s": time.process_time()}) + "\n")
    with atomic_write(folder / "result.json") as tmp:
        tmp.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0


def _quiet_libraries() -> None:
    """No hub progress bars or notices in the worker's log (the parent draws its own bars)."""
    import warnings

    import datasets
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    # transformers' own deprecation notice about a field TRL sets; nothing the user can act on
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)


#: the worker's exit status for bad input, as the CLI's
EXIT_INPUT = 2


def main(folder: str) -> int:
    """:func:`run_job`; bad input (``InputError``) is written to ``folder/input_error.json`` (its message,
    path, row, field and hint) and exits 2, so the parent reports the same one line (``remark.demo.jobs``)."""
    from catalog.io.errors import InputError

    try:
        return run_job(folder)
    except InputError as err:
        record = {
            "message": err.message,
            "path": err.path,
            "row": err.row,
            "field": err.field,
            "hint": err.hint,
        }
        with atomic_write(Path(folder) / INPUT_ERROR) as tmp:
            tmp.write_text(json.dumps(record) + "\n")
        print(f"input error: {err}", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    die_with_parent()
    sys.exit(main(sys.argv[1]))
