"""``RankScorer.score`` of this checkout against an earlier commit's, on 256 completions per step (run by hand).

    python bench/scoring.py [--steps 5] [--warm-steps 8] [--workloads random,blurb,plain] \
        [--pool-workers 2] [--baseline c9c2260] [--data DIR] [--seed 0] [--json OUT.json]

What is compared, in one run, each path in a process of its own (``bench/scoring_worker.py``: the paths
would otherwise share ``normalize_title``'s cache and the parser's, and the second path of a step would
find the first one's work done):

- ``new``: ``RankScorer.score`` of this checkout;
- ``baseline``: ``RankScorer.score`` of the commit ``--baseline`` (default c9c2260, the last commit before
  the scoring speed-ups recorded in bench/RESULTS.md), extracted with ``git archive`` into a temporary
  folder and imported there: the code as it was, whole. Skipped, with a message, in a checkout without
  that commit (then only the new path's times are reported, with no ratio).

The rows (``bench/scoring_workloads.py``: random-token rows like gpu_check's, twenty-line
"N. Title (Year) - blurb" lists with noise, plain "Title (Year)" lists; catalog: Reddit-v2's 7,404
movies, skipped with a message when the data is absent) are made here and sent to every path, with the
same settings (K = 20, union reward, default grounding, G = 16) and step numbers. Every timed step
compares a sha256 per output field (texts, lines, slot ids, rewards, token ranks, end indices) of every
path with the new path's, and stops on a difference.

- ``cold``: for each timed step every path builds a new scorer (its matcher index is built before the
  clock starts) and empties its process caches.
- ``warm``: every path's scorer scores ``--warm-steps`` batches first; the timed steps are further
  batches (new rows: the caches hold earlier steps' pieces, lines and titles, as in training).

Work (``new_ms``, ``baseline_ms``) is the CPU time of the path's process per ``score`` call
(``time.process_time``: every path is single-threaded, and CPU time barely moves with the machine's
load, where wall time does); the wall times are reported beside them (``*_wall_ms``). Each timed call
starts after a full ``gc.collect()`` (off the clock). The paths take turns going first. Medians over the
timed steps; ``ratio`` (= ``baseline_ratio``): the median of the per-step ratios baseline / new (same
step, same rows), with its min and max. Per-stage ms (wall) of the new path come from the scorer's
``last_timings`` (decode + offsets, parse, ground, rewards = responders + encoding + rewards, token
ranks + end tokens).

``wait_ms`` is what a trainer step waits for scoring: the wall time from handing the rows to a
``remark.scoring.pool.ScoringPool`` of ``--pool-workers`` processes (warm: it has scored the warm-up
steps) to holding the ``ScoredRows`` (submit, the workers' row stages, the join and the batch part in
this process), with nothing overlapped: TRL with transformers generation and beta = 0 runs nothing
between generation and the reward call, so this is what such a step waits; with vLLM's importance
sampling correction or beta > 0 the old / reference log-prob passes run in between and hide part of it.
With ``--pool-workers 0`` it is the new serial path's wall time. ``pool_worker_ms`` / ``pool_worker_cpu_ms``:
the slowest shard's wall / CPU time in its worker per step (on a loaded machine the wall time is mostly
waiting for a core; the CPU time is the work a free core would do). The machine is shared: only ratios
measured in the same run mean anything.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from flags import add_output_flags, bench_parser, check_json_output, run_script
from scoring_worker import FIELDS, digest
from scoring_workloads import GROUP, K, Workload, build_tokenizer

from catalog.io.outputs import JSON_FORMATS, atomic_file
from catalog.table import Catalog, load_catalog

#: the ``catalog.io.outputs.atomic_file`` kind of ``--json``.
JSON_KIND = "bench-scoring"

STAGES = ("decode_offsets", "parse", "ground", "rewards", "token_ranks")


PATHS = ("new", "baseline")
#: The default baseline: the last commit before the scoring speed-ups recorded in bench/RESULTS.md.
BASELINE_REV = "c9c2260"


class PathProcess:
    """One scoring path in its own process (``bench/scoring_worker.py``): no cache of one path can
    serve another."""

    def __init__(self, path: str, tree: str | None, catalog_path: Path, tokenizer_dir: str) -> None:
        import multiprocessing as mp

        from scoring_worker import serve

        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=serve, args=(child, path, tree, str(catalog_path), tokenizer_dir, K, GROUP), daemon=True
        )
        self.proc.start()
        child.close()

    def ask(self, msg: Any) -> Any:
        self.conn.send(msg)
        if not self.conn.poll(600):
            raise RuntimeError("a scoring path's process did not answer within 600 s")
        return self.conn.recv()

    def close(self) -> None:
        self.conn.send(None)
        self.proc.join(30)


def compare(digests: dict[str, dict[str, str]], where: str) -> None:
    """Every path's digest equals the new path's, field by field."""
    for path, d in digests.items():
        bad = [f for f in FIELDS if d[f] != digests["new"][f]]
        if bad:
            raise AssertionError(f"{where}: the {path} path differs from the new path in {', '.join(bad)}")


def baseline_tree(rev: str, into: Path) -> str | None:
    """``git archive REV`` of this checkout, extracted under ``into`` (None, with a message, without git
    history)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", f"{rev}^{{commit}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        tar = subprocess.run(["git", "-C", str(root), "archive", sha], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"baseline path skipped: {rev} is not in this checkout's history ({exc})", flush=True)
        return None
    import io
    import tarfile

    tree = into / f"baseline_{sha[:12]}"
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(tree, filter="data")
    return str(tree)


def run_workload(
    kind: str, catalog: Catalog, tokenizer: Any, a: argparse.Namespace, procs: dict
) -> dict[str, Any]:
    load = Workload(kind, catalog, tokenizer, seed=a.seed)
    out: dict[str, Any] = {}
    for cache in ("cold", "warm"):
        rec: dict[str, list] = {f"{p}_{m}": [] for p in procs for m in ("ms", "wall_ms")}
        rec |= {f"{p}_ratio": [] for p in procs if p != "new"}
        rec |= {"wait_ms": [], "pool_worker_ms": [], "pool_worker_cpu_ms": []}
        stages: dict[str, dict[str, list[float]]] = {p: {} for p in procs}
        pool = None
        if cache == "warm":
            warmup = [rows_and_columns(load.batch(1000 + s)) for s in range(a.warm_steps)]
            for proc in procs.values():
                proc.ask(("warm", warmup))
            pool = make_pool(catalog, tokenizer, a.pool_workers)
            for s, (rows, columns) in enumerate(warmup):
                if pool is not None:
                    pool.submit(rows, columns, group_size=GROUP, step=s).result()
        for s in range(a.steps):
            b = load.batch(s)
            order = list(procs) if s % 2 == 0 else list(procs)[::-1]
            got = {p: procs[p].ask(("time", rows_and_columns(b), s, cache == "cold")) for p in order}
            compare({p: g[3] for p, g in got.items()}, f"{kind} {cache} step {s}")
            for p, (cpu, wall, st, _) in got.items():
                rec[f"{p}_ms"].append(cpu)
                rec[f"{p}_wall_ms"].append(wall)
                if p != "new":
                    rec[f"{p}_ratio"].append(cpu / got["new"][0])
                for stage, ms in st.items():
                    stages[p].setdefault(stage, []).append(ms)
            if cache == "warm":
                if pool is not None:
                    gc.collect()
                    t0 = time.perf_counter()
                    future = pool.submit(b.rows, b.columns, group_size=GROUP, step=s)
                    scored = future.result()
                    wait = 1e3 * (time.perf_counter() - t0)
                    rec["pool_worker_ms"].append(1e3 * max(future.worker_s))
                    rec["pool_worker_cpu_ms"].append(1e3 * max(future.worker_cpu_s))
                    compare({"new": got["new"][3], "pool": digest(scored)}, f"{kind} pool step {s}")
                else:
                    wait = got["new"][1]
                rec["wait_ms"].append(wait)
        if pool is not None:
            pool.close()
        out[cache] = summarize(rec, stages)
        print_line(kind, cache, out[cache])
    return {**out["warm"], "cold": out["cold"], "identical": True}


def rows_and_columns(b: Any) -> tuple[list, dict]:
    """What a path process is sent for a batch: its rows and dataset columns."""
    return (b.rows, b.columns)


def make_pool(catalog: Catalog, tokenizer: Any, workers: int):
    if workers <= 0:
        return None
    from remark.scoring.pool import ScoringPool
    from remark.scoring.scorer import RankScorer

    return ScoringPool(RankScorer(catalog, tokenizer, k=K, scheme="union"), workers=workers)


def summarize(rec: dict[str, list], stages: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    med = statistics.median
    out: dict[str, Any] = {}
    for key, values in rec.items():
        if not values:
            continue
        out[key] = med(values)
        if key.endswith("_ratio"):
            out[f"{key}_min"], out[f"{key}_max"] = min(values), max(values)
    if "baseline_ratio" in out:
        out["ratio"], out["ratio_min"], out["ratio_max"] = (
            out["baseline_ratio"],
            out["baseline_ratio_min"],
            out["baseline_ratio_max"],
        )
    if rec["wait_ms"]:
        out["wait_ms_max"] = max(rec["wait_ms"])
    out["steps"] = len(rec["new_ms"])
    out["stages_ms"] = {w: {k: med(v) for k, v in st.items()} for w, st in stages.items()}
    out["raw"] = rec
    return out


def print_line(kind: str, cache: str, s: dict[str, Any]) -> None:
    st = s["stages_ms"]["new"]
    parts = " ".join(f"{k} {st.get(k, 0):.0f}" for k in STAGES)
    wait = f", wait {s['wait_ms']:.1f}" if "wait_ms" in s else ""
    base = (
        f"; baseline {s['baseline_ms']:.1f} ms, ratio {s['ratio']:.2f} ({s['ratio_min']:.2f}-{s['ratio_max']:.2f})"
        if "ratio" in s
        else "; no baseline"
    )
    print(f"{kind:<7} {cache}: new {s['new_ms']:.1f} ms{wait}{base}; new stages ms: {parts}", flush=True)


def find_catalog(data: str | None) -> Path | None:
    candidates = [Path(data)] if data else []
    if os.environ.get("REMARK_DATA_DIR"):
        candidates.append(Path(os.environ["REMARK_DATA_DIR"]))
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "data")
    for c in candidates:
        path = c / "reddit-v2-catalog" / "gt_catalog.csv"
        if path.is_file():
            return path
    return None


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__file__, __doc__)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per workload and cache state")
    ap.add_argument("--warm-steps", type=int, default=8, help="batches scored before the warm timed steps")
    ap.add_argument("--workloads", default="random,blurb,plain")
    ap.add_argument("--pool-workers", type=int, default=2, help="processes for wait_ms (0: serial)")
    ap.add_argument("--data", default=None, help="folder holding reddit-v2-catalog/gt_catalog.csv")
    ap.add_argument("--seed", type=int, default=0)
    add_output_flags(ap)
    ap.add_argument(
        "--baseline",
        default=BASELINE_REV,
        help="commit whose scorer is timed beside this checkout's, from `git archive` ('none': skip)",
    )
    a = ap.parse_args(argv)
    out = dict(formats=JSON_FORMATS, force=a.force, field="--json")
    check_json_output(a, JSON_KIND)  # before any timing
    torch.set_num_threads(1)
    path = find_catalog(a.data)
    if path is None:
        print(
            "bench/scoring.py: SKIPPED: Reddit-v2's gt_catalog.csv not found (pass --data DIR holding "
            "reddit-v2-catalog/, or set REMARK_DATA_DIR)"
        )
        return 0
    catalog = load_catalog(path)
    tokenizer = build_tokenizer(catalog, seed=a.seed)
    load = os.getloadavg()
    print(
        f"catalog {path} ({len(catalog)} items), tokenizer vocab {len(tokenizer)}, {a.steps} timed steps "
        f"({a.warm_steps} warm-up), pool {a.pool_workers} workers, load {load[0]:.1f}",
        flush=True,
    )
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="remark-bench-") as tmp:
        tokenizer.save_pretrained(Path(tmp) / "tokenizer")
        tree = None if a.baseline == "none" else baseline_tree(a.baseline, Path(tmp))
        trees = {"new": None} | ({} if tree is None else {"baseline": tree})
        procs = {p: PathProcess(p, t, path, str(Path(tmp) / "tokenizer")) for p, t in trees.items()}
        try:
            for kind in [w.strip() for w in a.workloads.split(",") if w.strip()]:
                results[kind] = run_workload(kind, catalog, tokenizer, a, procs)
        finally:
            for proc in procs.values():
                proc.close()
    doc = {
        "command": " ".join(["bench/scoring.py", *(argv if argv is not None else sys.argv[1:])]),
        "settings": vars(a),
        "load_before": load,
        "load_after": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "baseline_tree": None if tree is None else Path(tree).name,
        "workloads": results,
    }
    if a.json:
        with atomic_file(a.json, JSON_KIND, **out) as tmp:
            tmp.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    run_script(main)
