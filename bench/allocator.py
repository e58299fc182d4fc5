"""The demo's stage processes with and without one of ``remark.demo.worker_env``'s settings: glibc's allocator
thresholds (``--setting allocator``, ``ALLOCATOR_ENV``) or the kernels' code path pinned (``--setting isa``,
``ISA_ENV``: torch's and oneDNN's kernels to AVX2, MKL to its vendor-neutral ``COMPATIBLE`` branch).

Run by hand (not a test):

    python bench/allocator.py [--setting allocator|isa] [--reps 2] [--sft-epochs 2] [--rl-steps 25] \
        [--work-dir /tmp/remark_allocator] [--json OUT.json] [--force]

What is compared. The two stages that take most of ``remark demo``'s time, run as the demo runs them
(``python -m remark.demo.worker``, started with ``worker_env``, the demo's ProtoQA settings) but shorter:

- ``warmup``: data, tokenizer, tiny model and the noisy-SFT warm-up (2 threads), ``--sft-epochs`` passes
  (32 steps each) instead of 14;
- ``rl``: one ReMaRk run (1 thread) of ``--rl-steps`` steps from that warm-up's model.

Each is run in two environments that differ only in the setting's variables: ``default`` (none of them;
for the allocator, glibc maps every buffer above its dynamic threshold fresh and unmaps it when freed; for
the instruction set, every library dispatches to the widest the CPU has) and ``kept`` (the setting's
variables, as the demo's workers run). Repetitions are interleaved (ABBA), each run in a
new folder; a step's time is the wall time between progress lines, the first ``--skip`` steps dropped.
Per run: median step seconds, user and system CPU seconds and peak RSS of the process (``os.wait4``).
The ratio default / kept is taken per repetition. ``identical``: the warm-up's and the RL run's weights
(sha256 of ``model.safetensors``) agree across every run of both environments, i.e. the allocator
changes the time and not a number; for ``isa`` the weights differ by design (pinning
changes the kernels, on every CPU for MKL's branch), so ``identical`` is reported, not required.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from flags import add_output_flags, bench_parser, check_json_output, run_script

from catalog.io.outputs import JSON_FORMATS, atomic_file, atomic_write
from remark.demo.runs import grid_jobs
from remark.demo.settings import default_settings
from remark.demo.worker_env import ALLOCATOR_ENV, ISA_ENV, cpu_info, worker_env

#: the ``catalog.io.outputs.atomic_file`` kind of ``--json``.
JSON_KIND = "bench-allocator"
MODES = ("default", "kept")
#: ``--setting`` -> the worker environment's variables it compares.
SETTINGS = {"allocator": ALLOCATOR_ENV, "isa": ISA_ENV}


def mode_env(mode: str, threads: int, setting: str = "allocator") -> dict[str, str]:
    """``worker_env(threads)`` with (``kept``) or without (``default``) the variables of ``setting``."""
    names = SETTINGS[setting]
    base = {k: v for k, v in os.environ.items() if k not in names}
    env = worker_env(threads, base=base)
    if mode == "default":
        for name in names:
            env.pop(name, None)
    return env


def run_job(
    root: Path,
    name: str,
    kind: str,
    spec: dict[str, Any],
    threads: int,
    mode: str,
    setting: str = "allocator",
) -> dict[str, Any]:
    """One ``remark.demo.worker`` job in ``root``: its result, step times and rusage."""
    folder = root / "logs" / name
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_write(folder / "job.json") as tmp:
        tmp.write_text(json.dumps({"kind": kind, "threads": threads, "spec": spec}))
    with (folder / "worker.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "remark.demo.worker", str(folder.relative_to(root))],
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=mode_env(mode, threads, setting),
        )
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{name} ({mode}) failed: see {folder / 'worker.log'}")
    progress = [json.loads(line) for line in (folder / "progress.jsonl").read_text().splitlines()]
    return {
        "result": json.loads((folder / "result.json").read_text()),
        "walls": [b["wall_s"] - a["wall_s"] for a, b in itertools.pairwise(progress)],
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_rep(work: Path, mode: str, rep: int, a: argparse.Namespace) -> dict[str, Any]:
    s = default_settings("protoqa", steps=a.rl_steps)
    s = dataclasses.replace(s, sft_epochs=a.sft_epochs, rl_seeds=(0,), lr_grid=(2e-4,))
    root = work / f"{mode}-{rep}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    spec = {"settings": dataclasses.asdict(s)}
    warm = run_job(root, "warmup", "warmup", spec, s.warmup_threads, mode, a.setting)
    data_dir, sft_dir = Path(warm["result"]["data_dir"]), Path(warm["result"]["sft_model"])
    job = next(j for j in grid_jobs(s, data_dir, sft_dir) if j.name.startswith("remark"))
    rl = run_job(root, job.name, job.kind, job.spec, job.threads, mode, a.setting)
    out_dir = root / job.spec["config"]["output_dir"]
    return {
        "warmup": warm | {"sha256": sha256(root / sft_dir / "model.safetensors")},
        "rl": rl | {"sha256": sha256(out_dir / "final" / "model.safetensors")},
    }


def summarize(runs: dict[str, list[dict[str, Any]]], skip: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for stage in ("warmup", "rl"):
        per_mode = {}
        for mode in MODES:
            rows = [r[stage] for r in runs[mode]]
            per_mode[mode] = {
                "step_s": [statistics.median(r["walls"][skip:]) for r in rows],
                "user_s": [round(r["user_s"], 1) for r in rows],
                "sys_s": [round(r["sys_s"], 1) for r in rows],
                "peak_rss_mb": [round(r["peak_rss_mb"]) for r in rows],
            }
        ratios = [d / k for d, k in zip(per_mode["default"]["step_s"], per_mode["kept"]["step_s"])]
        hashes = {r[stage]["sha256"] for mode in MODES for r in runs[mode]}
        out[stage] = per_mode | {"ratio_default_over_kept": ratios, "identical": len(hashes) == 1}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = bench_parser(__file__, __doc__)
    ap.add_argument("--setting", choices=sorted(SETTINGS), default="allocator", help="what is compared")
    ap.add_argument("--reps", type=int, default=2, help="repetitions per environment (ABBA order)")
    ap.add_argument("--sft-epochs", type=float, default=2.0, help="warm-up passes (32 steps each)")
    ap.add_argument("--rl-steps", type=int, default=25, help="ReMaRk steps from the warm-up")
    ap.add_argument("--skip", type=int, default=5, help="first steps of each run dropped from the median")
    ap.add_argument("--work-dir", default="/tmp/remark_allocator", help="run folders (replaced)")
    add_output_flags(ap)
    a = ap.parse_args(argv)
    check_json_output(a, JSON_KIND)  # before any work, not after minutes
    work = Path(a.work_dir)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for rep in range(a.reps):
        for mode in MODES if rep % 2 == 0 else MODES[::-1]:
            print(f"rep {rep}: {mode}", flush=True)
            runs[mode].append(one_rep(work, mode, rep, a))
    doc = {
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "settings": vars(a),
        "compared_env": SETTINGS[a.setting],
        "results": summarize(runs, a.skip),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "wall_s": time.perf_counter() - t0,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "cpu": cpu_info(),
    }
    for stage, r in doc["results"].items():
        med = {m: statistics.median(r[m]["step_s"]) for m in MODES}
        print(
            f"{stage}: step {med['default']:.3f} s default, {med['kept']:.3f} s kept; ratio per rep "
            + ", ".join(f"{x:.2f}" for x in r["ratio_default_over_kept"])
            + f"; sys s {r['default']['sys_s']} vs {r['kept']['sys_s']}; peak RSS MB "
            f"{r['default']['peak_rss_mb']} vs {r['kept']['peak_rss_mb']}; identical weights: {r['identical']}"
        )
    if a.json:
        with atomic_file(a.json, JSON_KIND, formats=JSON_FORMATS, force=a.force, field="--json") as tmp:
            tmp.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


if __name__ == "__main__":
    run_script(main)
