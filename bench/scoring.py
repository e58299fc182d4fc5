"""``RankScorer.score`` vs the pre-change serial path on 256 completions per step (issue 13; run by hand).

    python bench/scoring.py [--steps 5] [--warm-steps 3] [--workloads random,blurb,plain] \
        [--pool-workers 2] [--data DIR] [--seed 0] [--json OUT.json]

What is compared, in one process and one run: ``remark.scoring_reference.ReferenceScorer`` (the serial
path as it was before issue 13, kept for this and for the equivalence tests) and ``RankScorer.score``
(the new path), on the same rows (``bench/scoring_workloads.py``: random-token rows like gpu_check's,
twenty-line "N. Title (Year) - blurb" lists with noise, plain "Title (Year)" lists; catalog: Reddit-v2's
7,404 movies, skipped with a message when the data is absent), the same settings (K = 20, union reward,
fuzzy grounding, G = 16) and the same step numbers. Every timed step asserts identical texts, lines,
slot ids, rewards, token ranks and end indices.

- ``cold``: each timed step gets a new scorer of each kind (its matcher index is built before the clock
  starts) and the process-wide caches (parser lines, ``normalize_title``) are emptied before each path.
- ``warm``: one scorer of each kind scores ``--warm-steps`` batches first; the timed steps are further
  batches (new rows: the caches hold earlier steps' pieces, lines and titles, as in training).

Work (``reference_ms``, ``new_ms``) is the CPU time of this process per ``score`` call
(``time.process_time``: both paths are single-threaded, and CPU time barely moves with the machine's
load, where wall time does); the wall times are reported beside them (``*_wall_ms``). Each timed call
starts after a full ``gc.collect()`` (off the clock), so that the collection debt left by building scorers
and batches, or by the other path, lands on neither; a call's own allocations still trigger the
collections they would (without it a full collection of ~100 ms fell on a random path in cold steps,
where scorers are rebuilt every step: per-step ratios 0.7-3.4 in one run). The two paths
alternate which goes first each step. Medians over the timed steps; ``ratio``: the median of the
per-step ratios reference / new (same step, same rows), with its min and max (the spread). Per-stage ms
(wall) come from the scorers' ``last_timings`` (decode + offsets, parse, ground, rewards = responders +
encoding + rewards, token ranks + end tokens).

``wait_ms`` is what a trainer step waits for scoring: the wall time from handing the rows to a
``remark.scoring_pool.ScoringPool`` of ``--pool-workers`` processes (warm: it has scored the warm-up
steps) to holding the ``ScoredRows`` (submit, the workers' row stages, the join and the batch part in
this process), with nothing overlapped: TRL with transformers generation and beta = 0 runs nothing
between generation and the reward call, so this is what such a step waits; with vLLM's importance
sampling correction or beta > 0 the old / reference log-prob passes run in between and hide part of it.
With ``--pool-workers 0`` it is the new serial path's wall time. ``pool_worker_ms`` / ``pool_worker_cpu_ms``:
the slowest shard's wall / CPU time in its worker per step (on a loaded machine the wall time is mostly
waiting for a core; the CPU time is the work a free core would do). The machine is shared: only ratios measured in the same run mean anything.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from scoring_workloads import GROUP, K, Workload, build_tokenizer

from catalog.table import Catalog, load_catalog
from remark.scoring import RankScorer, ScoredRows
from remark.scoring_reference import ReferenceScorer

STAGES = ("decode_offsets", "parse", "ground", "rewards", "token_ranks")


def clear_process_caches() -> None:
    """Empty the per-process caches both paths share or the new path keeps (what "cold" means)."""
    from catalog import lists, normalize

    normalize.normalize_title.cache_clear()
    lists.clear_caches()


def assert_identical(new: ScoredRows, ref: ScoredRows, where: str) -> None:
    checks = {
        "texts": new.texts == ref.texts,
        "lines": new.lines == ref.lines,
        "slot_ids": new.slot_ids == ref.slot_ids,
        "rewards": torch.equal(new.rewards_RNK, ref.rewards_RNK) and torch.equal(new.mask_RN, ref.mask_RN),
        "rank_RT": torch.equal(new.rank_RT, ref.rank_RT),
        "end_R": torch.equal(new.end_R, ref.end_R),
    }
    bad = [k for k, ok in checks.items() if not ok]
    if bad:
        raise AssertionError(f"{where}: the new path differs from the reference in {', '.join(bad)}")


def new_scorer(catalog: Catalog, tokenizer: Any) -> RankScorer:
    return RankScorer(catalog, tokenizer, k=K, scheme="union")


def timed(fn, *args, **kwargs) -> tuple[Any, float, float]:
    """(result, CPU ms of this process, wall ms). A full collection runs first, off the clock: the garbage
    of building scorers and batches (and of the other path) is not charged to whichever path runs next;
    the call's own allocations still trigger the collections they would."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    return out, 1e3 * (time.process_time() - c0), 1e3 * (time.perf_counter() - t0)


def run_workload(kind: str, catalog: Catalog, tokenizer: Any, a: argparse.Namespace) -> dict[str, Any]:
    load = Workload(kind, catalog, tokenizer, seed=a.seed)
    out: dict[str, Any] = {}
    for cache in ("cold", "warm"):
        rec: dict[str, list] = {
            "reference_ms": [],
            "new_ms": [],
            "ratio": [],
            "reference_wall_ms": [],
            "new_wall_ms": [],
            "wait_ms": [],
            "pool_worker_ms": [],
            "pool_worker_cpu_ms": [],
        }
        stages: dict[str, dict[str, list[float]]] = {"reference": {}, "new": {}}
        pool = None
        if cache == "warm":
            scorer = new_scorer(catalog, tokenizer)
            ref = ReferenceScorer(scorer)
            pool = make_pool(catalog, tokenizer, a.pool_workers)
            for s in range(a.warm_steps):
                b = load.batch(1000 + s)
                scorer.score(b.rows, b.columns, group_size=GROUP, step=s)
                ref.score(b.rows, b.columns, group_size=GROUP, step=s)
                if pool is not None:
                    pool.submit(b.rows, b.columns, group_size=GROUP, step=s).result()
        for s in range(a.steps):
            b = load.batch(s)
            if cache == "cold":
                scorer = new_scorer(catalog, tokenizer)
                ref = ReferenceScorer(scorer)
            results: dict[str, tuple[ScoredRows, float, float]] = {}
            for which in ("reference", "new") if s % 2 == 0 else ("new", "reference"):
                if cache == "cold":
                    clear_process_caches()
                obj = ref if which == "reference" else scorer
                results[which] = timed(obj.score, b.rows, b.columns, group_size=GROUP, step=s)
                for stage, sec in obj.last_timings.items():
                    stages[which].setdefault(stage, []).append(1e3 * sec)
            assert_identical(results["new"][0], results["reference"][0], f"{kind} {cache} step {s}")
            rec["reference_ms"].append(results["reference"][1])
            rec["new_ms"].append(results["new"][1])
            rec["ratio"].append(results["reference"][1] / results["new"][1])
            rec["reference_wall_ms"].append(results["reference"][2])
            rec["new_wall_ms"].append(results["new"][2])
            if cache == "warm":
                if pool is not None:
                    gc.collect()
                    t0 = time.perf_counter()
                    future = pool.submit(b.rows, b.columns, group_size=GROUP, step=s)
                    scored = future.result()
                    wait = 1e3 * (time.perf_counter() - t0)
                    rec["pool_worker_ms"].append(1e3 * max(future.worker_s))
                    rec["pool_worker_cpu_ms"].append(1e3 * max(future.worker_cpu_s))
                    assert_identical(scored, results["reference"][0], f"{kind} pool step {s}")
                else:
                    wait = results["new"][2]
                rec["wait_ms"].append(wait)
        if pool is not None:
            pool.close()
        out[cache] = summarize(rec, stages)
        print_line(kind, cache, out[cache])
    return {**out["warm"], "cold": out["cold"], "identical": True}


def make_pool(catalog: Catalog, tokenizer: Any, workers: int):
    if workers <= 0:
        return None
    from remark.scoring_pool import ScoringPool

    return ScoringPool(catalog, tokenizer, workers=workers, k=K, scheme="union")


def summarize(rec: dict[str, list], stages: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    med = statistics.median
    out: dict[str, Any] = {
        "reference_ms": med(rec["reference_ms"]),
        "new_ms": med(rec["new_ms"]),
        "reference_wall_ms": med(rec["reference_wall_ms"]),
        "new_wall_ms": med(rec["new_wall_ms"]),
        "ratio": med(rec["ratio"]),
        "ratio_min": min(rec["ratio"]),
        "ratio_max": max(rec["ratio"]),
        "steps": len(rec["ratio"]),
        "stages_ms": {w: {k: med(v) for k, v in st.items()} for w, st in stages.items()},
        "raw": rec,
    }
    if rec["wait_ms"]:
        out["wait_ms"] = med(rec["wait_ms"])
        out["wait_ms_max"] = max(rec["wait_ms"])
    if rec["pool_worker_ms"]:
        out["pool_worker_ms"] = med(rec["pool_worker_ms"])
        out["pool_worker_cpu_ms"] = med(rec["pool_worker_cpu_ms"])
    return out


def print_line(kind: str, cache: str, s: dict[str, Any]) -> None:
    st = s["stages_ms"]
    parts = " ".join(f"{k} {st['reference'].get(k, 0):.0f}/{st['new'].get(k, 0):.0f}" for k in STAGES)
    wait = f", wait {s['wait_ms']:.1f}" if "wait_ms" in s else ""
    print(
        f"{kind:<7} {cache}: reference {s['reference_ms']:.1f} ms, new {s['new_ms']:.1f} ms{wait}; ratio "
        f"{s['ratio']:.2f} ({s['ratio_min']:.2f}-{s['ratio_max']:.2f}); stages ref/new ms: {parts}",
        flush=True,
    )


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5, help="timed steps per workload and cache state")
    ap.add_argument("--warm-steps", type=int, default=8, help="batches scored before the warm timed steps")
    ap.add_argument("--workloads", default="random,blurb,plain")
    ap.add_argument("--pool-workers", type=int, default=2, help="processes for wait_ms (0: serial)")
    ap.add_argument("--data", default=None, help="folder holding reddit-v2-catalog/gt_catalog.csv")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args(argv)
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
    for kind in [w.strip() for w in a.workloads.split(",") if w.strip()]:
        results[kind] = run_workload(kind, catalog, tokenizer, a)
    doc = {
        "command": " ".join(["bench/scoring.py", *(argv if argv is not None else sys.argv[1:])]),
        "settings": vars(a),
        "load_before": load,
        "load_after": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "workloads": results,
    }
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
