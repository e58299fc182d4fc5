"""Benchmark: pooling 1M grounded mention rows over 100k requests, polars plan vs a pure-Python dict groupby.

Run by hand (not a test)::

    python bench/pooling.py [--rows 1000000] [--requests 100000] [--seed 0] [--repeat 3]

Both sides get the same grounded mentions (request, prompt, responder, title, year, split, item_id;
3% ungrounded, one seen item per request) and must produce the same pooled rows (checked: responders,
union, counts, seen, ungrounded, in the same order). The polars side is ``data_prep.pool.pool_grounded``
(the lazy plan ``pool_threads`` runs after grounding, collected in-memory as it does; the streaming
engine is timed too); the baseline is the obvious loop with dicts and
sets that a research script would write, given its input as Python lists (conversion not timed).

Peak memory: Linux ``VmHWM`` of this process, reset through ``/proc/self/clear_refs`` before each side,
minus the resident size before it (polars allocates outside Python, so tracemalloc would miss it).
Also timed, for context: ``pool_threads`` end to end, grounding the distinct titles with a Matcher.

The many-responders case (``--responders 100000``): one request answered by N responders (1-3 items each
from a Zipf catalog of 5,000), pooled by ``pool_threads``, expanded into Rank-GRPO's rows by
``expand_responders`` and written as parquet, as ``remark prep`` does. The rows used to carry every request field (prompt, seen,
union, counts and every responder's list), so their size grew as N x (N + union): that code is kept here
as :func:`expand_responders_wide` and run in the same process at the smaller sizes ``--wide-responders``
(it does not fit at 10,000), where the new rows joined back to their request (``responder_view``) must
equal its output; the peak of each side and their ratio are printed, and the new code alone at N.
"""

from __future__ import annotations

import gc
import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl
from flags import bench_parser, run_script

from data_prep.pool import pool_grounded
from data_prep.schema import MESSAGES


def synthetic(n_rows: int, n_requests: int, n_items: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Grounded mentions (file order = request blocks, responders interleaved) and seen items."""
    rng = np.random.default_rng(seed)
    req = np.sort(np.concatenate([np.arange(n_requests), rng.integers(0, n_requests, n_rows - n_requests)]))
    n_x = np.minimum(1 + rng.negative_binomial(1.5, 1.5 / (1.5 + 4.0), size=n_requests), 60)
    responder = (rng.random(n_rows) * n_x[req]).astype(np.int64)
    item = np.minimum(rng.zipf(1.3, size=n_rows), n_items) - 1
    ungrounded = rng.random(n_rows) < 0.03
    years = 1950 + item % 70
    seen_item = np.minimum(rng.zipf(1.3, size=n_requests), n_items) - 1
    mentions = pl.DataFrame(
        {
            "_req": req,
            "_resp": responder,
            "_item": item,
            "_ung": ungrounded,
            "year": years.astype(np.int32),
        }
    ).select(
        pl.format("r{}", pl.col("_req")).alias("request_id"),
        pl.concat_list(
            pl.struct(
                pl.lit("user").alias("role"),
                pl.format("request {} about films", pl.col("_req")).alias("content"),
            )
        ).alias("prompt"),
        pl.format("u{}", pl.col("_resp")).alias("responder_id"),
        pl.when(pl.col("_ung"))
        .then(pl.format("Unknown {}", pl.col("_item")))
        .otherwise(pl.format("Film {}", pl.col("_item")))
        .alias("title"),
        "year",
        pl.lit(None, pl.String).alias("split"),
        pl.when(pl.col("_ung")).then(None).otherwise(pl.format("m{}", pl.col("_item"))).alias("item_id"),
    )
    mentions = mentions.with_columns(pl.col("prompt").cast(MESSAGES)).with_row_index("_pos")
    seen = pl.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(n_requests)],
            "item_id": [f"m{i}" for i in seen_item],
            "_pos": np.arange(n_requests, dtype=np.uint32),
        }
    )
    return mentions, seen


def pool_python(rows: list[tuple], seen_rows: list[tuple]) -> list[dict]:
    """The dict/set groupby a script would write; same semantics and orders as ``pool_grounded``."""
    seen: dict[str, dict[str, None]] = defaultdict(dict)
    for req, item in seen_rows:
        seen[req][item] = None
    state: dict[str, list] = {}
    for pos, (req, prompt, resp, title, year, split, item) in enumerate(rows):
        st = state.get(req)
        if st is None:
            st = state[req] = [prompt, split, {}, {}, {}, {}]
        if st[1] is None and split is not None:
            st[1] = split
        if item is None:
            st[5].setdefault(title if year is None else f"{title} ({year})", None)
            continue
        if item in seen[req]:
            continue
        st[2].setdefault(resp, {})[item] = None
        st[3].setdefault(item, set()).add(resp)
        st[4].setdefault(item, pos)
    out = []
    for req, (prompt, split, responders, who, first, ung) in state.items():
        union = sorted(who, key=lambda i: (-len(who[i]), first[i]))
        out.append(
            {
                "request_id": req,
                "prompt": prompt,
                "seen": list(seen[req]),
                "responders": [list(items) for items in responders.values()],
                "union": union,
                "counts": [len(who[i]) for i in union],
                "ungrounded": list(ung),
                "split": split,
            }
        )
    return out


def _status(key: str) -> int:
    """VmRSS / VmHWM of this process in bytes (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def measured(fn):
    """(result, seconds, peak extra bytes) of fn(); peak = VmHWM after - VmRSS before."""
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status("VmRSS")
    t0 = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t0
    return result, seconds, _status("VmHWM") - before


def one_request(n_responders: int, n_items: int, seed: int) -> pl.DataFrame:
    """A threads frame of one request answered by ``n_responders`` responders, 1-3 Zipf items each (distinct)."""
    rng = np.random.default_rng(seed)
    per = rng.integers(1, 4, n_responders)
    resp = np.repeat(np.arange(n_responders), per)
    item = np.minimum(rng.zipf(1.3, size=resp.size), n_items) - 1
    frame = pl.DataFrame({"_resp": resp, "_item": item}).unique(
        maintain_order=True
    )  # a title once per responder
    return frame.select(
        pl.lit("r0").alias("request_id"),
        pl.lit([{"role": "user", "content": "films like Arrival?"}]).cast(MESSAGES).alias("prompt"),
        pl.format("u{}", "_resp").alias("responder_id"),
        pl.format("Film {}", "_item").alias("title"),
        (1950 + pl.col("_item") % 70).cast(pl.Int32).alias("year"),
        pl.lit(None, pl.String).alias("split"),
        pl.lit([], pl.List(pl.String)).alias("seen"),
    )


def expand_responders_wide(requests: pl.DataFrame) -> pl.DataFrame:
    """The per-responder rows as they were written before: every request field on every row."""
    from data_prep.schema import REQUESTS_SCHEMA

    rows = (
        requests.lazy()
        .with_columns(
            pl.col("responder_ids").alias("responder_id"),
            pl.int_ranges(pl.col("responders").list.len(), dtype=pl.UInt32).alias("responder_index"),
            pl.col("responders").alias("items"),
        )
        .explode("responder_id", "responder_index", "items")
        .drop_nulls("responder_index")
    )
    cols = [
        "request_id",
        "responder_id",
        "responder_index",
        "items",
        *(c for c in REQUESTS_SCHEMA if c != "request_id"),
    ]
    return rows.select(cols).collect()


def _written(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` after writing them as ``remark prep`` does (``responder_rows.parquet``, to a temporary file)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        rows.write_parquet(Path(tmp) / "responder_rows.parquet")
    return rows


def many_responders(n: int, wide_sizes: list[int], n_items: int, seed: int) -> None:
    """The many-responders case (module docstring): peaks of the old and new rows, and the new alone at n."""
    from catalog.match import GroundingSettings, Matcher
    from catalog.table import Catalog
    from data_prep.pool import SplitSpec, expand_responders, pool_threads, responder_view

    ids = np.arange(n_items)
    catalog = Catalog.from_frame(
        pl.DataFrame(
            {"item_id": [f"m{i}" for i in ids], "title": [f"Film {i}" for i in ids], "year": 1950 + ids % 70}
        )
    )
    matcher = Matcher(catalog, GroundingSettings(match_mode="normalized"))
    for size in [*wide_sizes, n]:
        threads = one_request(size, n_items, seed)
        pooled, s_pool, m_pool = measured(lambda t=threads: pool_threads(t, matcher, split=SplitSpec()))
        rows, s_new, m_new = measured(lambda p=pooled: _written(expand_responders(p)))
        line = (
            f"{size:>7,} responders ({threads.height:,} mentions, union {len(pooled['union'][0]):,}): "
            f"pool_threads {s_pool:.2f} s +{m_pool / 2**20:.0f} MiB; rows {rows.height:,}, "
            f"new {s_new:.3f} s +{m_new / 2**20:.0f} MiB"
        )
        if size in wide_sizes:
            wide, s_old, m_old = measured(lambda p=pooled: _written(expand_responders_wide(p)))
            assert responder_view(pooled, rows).equals(wide), "the new rows joined to their request differ"
            line += f", old {s_old:.3f} s +{m_old / 2**20:.0f} MiB (same view; peak ratio old/new {m_old / max(m_new, 1):.0f}x)"
            del wide
        print(line, flush=True)


def main() -> None:
    ap = bench_parser(__file__, __doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--items", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--responders", type=int, default=0, help="run the many-responders case with N (e.g. 100000)"
    )
    ap.add_argument("--wide-responders", type=int, nargs="*", default=[1000, 3000])
    args = ap.parse_args()
    if args.responders:
        many_responders(args.responders, args.wide_responders, 5000, args.seed)
        return

    mentions, seen = synthetic(args.rows, args.requests, args.items, args.seed)
    cols = ["request_id", "prompt", "responder_id", "title", "year", "split", "item_id"]
    rows = list(mentions.select(cols).iter_rows())
    seen_rows = list(seen.select("request_id", "item_id").iter_rows())
    print(
        f"{mentions.height:,} mention rows, {mentions['request_id'].n_unique():,} requests, "
        f"polars {pl.__version__} with {pl.thread_pool_size()} threads, {os.cpu_count()} CPUs"
    )

    plan_mentions = mentions.drop("_pos").lazy()
    plan_seen = seen.drop("_pos").lazy()

    def run_polars() -> pl.DataFrame:  # the engine pool_threads uses
        return pool_grounded(plan_mentions, plan_seen).collect(engine="in-memory")

    def run_streaming() -> pl.DataFrame:
        return pool_grounded(plan_mentions, plan_seen).collect(engine="streaming")

    def run_python() -> list[dict]:
        return pool_python(rows, seen_rows)

    t_pl, t_st, t_py, mem_pl, mem_st, mem_py = [], [], [], 0, 0, 0
    for _ in range(args.repeat):
        pooled, s, m = measured(run_polars)
        t_pl.append(s)
        mem_pl = max(mem_pl, m)
        streamed, s, m = measured(run_streaming)
        t_st.append(s)
        mem_st = max(mem_st, m)
        ref, s, m = measured(run_python)
        t_py.append(s)
        mem_py = max(mem_py, m)
    assert streamed.equals(pooled)

    got = pooled.select(
        "request_id", "prompt", "seen", "responders", "union", "counts", "ungrounded", "split"
    ).to_dicts()
    for r in got:
        r["responders"] = r["responders"] or []
        r["union"] = r["union"] or []
        r["counts"] = r["counts"] or []
    assert got == ref, "polars and the Python baseline disagree"
    best_pl, best_py = min(t_pl), min(t_py)
    print(f"polars pool_grounded : best {best_pl:.3f} s of {args.repeat}, peak +{mem_pl / 2**20:.0f} MiB")
    print(f"  (streaming engine  : best {min(t_st):.3f} s, peak +{mem_st / 2**20:.0f} MiB)")
    print(f"python dict groupby  : best {best_py:.3f} s of {args.repeat}, peak +{mem_py / 2**20:.0f} MiB")
    print(f"speed-up             : {best_py / best_pl:.1f}x (identical pooled rows: {len(got):,} requests)")
    print(f"  median speed-up    : {np.median(t_py) / np.median(t_pl):.1f}x (medians of {args.repeat} runs)")

    # Context: the whole pool_threads, grounding each distinct (title, year) with a Matcher.
    from catalog.match import GroundingSettings, Matcher
    from catalog.table import Catalog
    from data_prep.pool import SplitSpec, pool_threads

    ids = np.arange(args.items)
    catalog = Catalog.from_frame(
        pl.DataFrame(
            {"item_id": [f"m{i}" for i in ids], "title": [f"Film {i}" for i in ids], "year": 1950 + ids % 70}
        )
    )
    threads = mentions.drop("_pos", "item_id").with_columns(pl.lit([], pl.List(pl.String)).alias("seen"))
    t0 = time.perf_counter()
    matcher = Matcher(catalog, GroundingSettings(match_mode="normalized"))
    t_build = time.perf_counter() - t0
    _, s, m = measured(lambda: pool_threads(threads, matcher, split=SplitSpec()))
    print(
        f"pool_threads end to end (normalized grounding of distinct titles, matcher built in {t_build:.2f} s):"
        f" {s:.3f} s, peak +{m / 2**20:.0f} MiB"
    )


if __name__ == "__main__":
    run_script(main)
