"""Pooling: threads (one row per responder mention) -> one row per request, and back to Rank-GRPO's view.

ReMaRk's data transformation (design.md, "Data schema"): per request, the responders' item lists, the
union of their items, c_i (how many responders named ``union[i]``), n_x, the grounded ``seen`` items and
the raw mentions that matched nothing. Everything after grounding is one lazy polars plan.

Decisions (where Rank-GRPO's data has no equivalent, or where we depart from it):

- **Seen items are never in the union, the counts or a responder's list.** Design.md never rewards a
  seen item (eligibility e_k = 0), so keeping one would only put an unreachable item in recall's
  denominator. Such mentions are counted in ``notes.mentions_of_seen_items``.
- **A responder whose mentions all failed to ground (or were all seen) is not a responder**: it adds
  nothing to any reward and would give Rank-GRPO's view an empty target. Its raw mentions stay in
  ``ungrounded``; the count is in ``notes.responders_without_items``. n_x counts the others.
- **A request with no grounded item is bad input** (raise, or skip and count): nothing can reward it.
- **Orders are deterministic**: requests by first appearance in the threads; responders by first
  appearance within the request; a responder's items by first mention; ``union`` by descending count,
  then first mention; ``ungrounded`` by first appearance. ``counts`` is aligned with ``union``.
- **Splits**: a split given on a request's rows is kept (two different splits for one request are bad
  input); otherwise the split comes from a stable hash of (seed, request_id), so a request and all its
  responders always land in one split. The hash is BLAKE2b, computed once per request in Python:
  polars' ``hash`` is not stable across versions, and a dataset's splits must not change with it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import polars as pl

from catalog.normalize import split_title_year
from data_prep.schema import REQUESTS_SCHEMA, RESPONDER_ROWS_SCHEMA, SPLITS, Report, Threads, flag_rows


@dataclass(frozen=True)
class SplitSpec:
    """How requests without a given split are assigned one: seeded fractions over a stable hash."""

    fractions: tuple[tuple[str, float], ...] = (("train", 0.8), ("valid", 0.1), ("test", 0.1))
    seed: int = 0

    def __post_init__(self) -> None:
        names = [n for n, _ in self.fractions]
        if not names or any(n not in SPLITS for n in names) or len(set(names)) != len(names):
            raise ValueError(f"split names must be distinct, among {list(SPLITS)}; got {names}")
        if any(f < 0 for _, f in self.fractions) or abs(sum(f for _, f in self.fractions) - 1.0) > 1e-9:
            raise ValueError(f"split fractions must be >= 0 and sum to 1; got {self.fractions}")


def hash_split(request_ids: list[str], spec: SplitSpec) -> list[str]:
    """The split of each id: u = BLAKE2b(seed, id) / 2**64 falls into one of the cumulative fractions."""
    bounds, total = [], 0.0
    for name, frac in spec.fractions:
        total += frac
        bounds.append((total, name))
    out = []
    for rid in request_ids:
        digest = hashlib.blake2b(f"{spec.seed}\x00{rid}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / 2**64
        out.append(next((name for bound, name in bounds if u < bound), bounds[-1][1]))
    return out


def assign_splits(requests: pl.DataFrame, spec: SplitSpec = SplitSpec()) -> pl.DataFrame:
    """Fill null ``split`` values of a pooled table by :func:`hash_split`; given splits are kept."""
    missing = requests.filter(pl.col("split").is_null())["request_id"].to_list()
    if not missing:
        return requests
    table = pl.DataFrame({"request_id": missing, "_h": hash_split(missing, spec)})
    return (
        requests.join(table, on="request_id", how="left", maintain_order="left")
        .with_columns(pl.coalesce("split", "_h").alias("split"))
        .drop("_h")
    )


def _ground_seen(frame: pl.DataFrame, matcher: Any) -> pl.LazyFrame:
    """(request_id, seen ids in first-mention order) for every request; ungrounded seen titles dropped."""
    raw = frame.lazy().select("request_id", "seen", "_pos").explode("seen").drop_nulls("seen")
    uniq = raw.select(pl.col("seen").unique()).collect()["seen"].to_list()
    if not uniq:
        return raw.select("request_id", pl.lit(None, pl.String).alias("item_id"), "_pos").head(0)
    split = [split_title_year(s) for s in uniq]
    keys = pl.DataFrame(
        {"seen": uniq, "title": [t for t, _ in split], "year": [y for _, y in split]},
        schema={"seen": pl.String, "title": pl.String, "year": pl.Int32},
    )
    ground = matcher.ground_frame(keys, title="title", year="year").select("seen", "item_id")
    return (
        raw.join(ground.lazy(), on="seen", how="inner")
        .drop_nulls("item_id")
        .select("request_id", "item_id", "_pos")
    )


def pool_grounded(mentions: pl.LazyFrame, seen: pl.LazyFrame) -> pl.LazyFrame:
    """The pooling plan on grounded mentions (no I/O, no grounding): one row per request.

    ``mentions``: request_id, prompt, responder_id, title, year, split, ``item_id`` (null when
    ungrounded) and ``_pos`` (the row's position in the threads, for every order), optionally file/row.
    ``seen``: request_id, item_id, _pos (grounded seen items). Returns REQUESTS_SCHEMA's columns (split
    as given, possibly null) + ``responder_ids``, ``_pos`` and file/row when present; a request with
    no grounded, unseen item has null ``union``.
    """
    extra = [c for c in ("file", "row") if c in mentions.collect_schema().names()]
    base = mentions.group_by("request_id").agg(
        pl.col("_pos").min(),
        pl.col("prompt").first(),
        pl.col("split").drop_nulls().first(),
        *[pl.col(c).first() for c in extra],
    )
    seen = seen.unique(["request_id", "item_id"], keep="first")
    seen_lists = seen.sort("_pos").group_by("request_id").agg(pl.col("item_id").alias("seen"))
    unseen = mentions.drop_nulls("item_id").join(
        seen.select("request_id", "item_id"), on=["request_id", "item_id"], how="anti"
    )
    per_responder = (
        unseen.sort("_pos")
        .group_by("request_id", "responder_id", maintain_order=True)
        .agg(
            pl.col("item_id").unique(maintain_order=True).alias("items"), pl.col("_pos").min().alias("_first")
        )
    )
    responders = (
        per_responder.sort("_first")
        .group_by("request_id")
        .agg(pl.col("responder_id").alias("responder_ids"), pl.col("items").alias("responders"))
    )
    union = (
        unseen.group_by("request_id", "item_id")
        .agg(
            pl.col("responder_id").n_unique().cast(pl.UInt32).alias("c"), pl.col("_pos").min().alias("_first")
        )
        .sort(["request_id", "c", "_first"], descending=[False, True, False])
        .group_by("request_id", maintain_order=True)
        .agg(pl.col("item_id").alias("union"), pl.col("c").alias("counts"))
    )
    shown = pl.when(pl.col("year").is_null()).then("title").otherwise(pl.format("{} ({})", "title", "year"))
    ungrounded = (
        mentions.filter(pl.col("item_id").is_null())
        .sort("_pos")
        .group_by("request_id")
        .agg(shown.unique(maintain_order=True).alias("ungrounded"))
    )
    return (
        base.join(seen_lists, on="request_id", how="left")
        .join(responders, on="request_id", how="left")
        .join(union, on="request_id", how="left")
        .join(ungrounded, on="request_id", how="left")
        .sort("_pos")
        .with_columns(
            pl.col("seen", "ungrounded").fill_null([]),
            pl.col("responders").list.len().fill_null(0).cast(pl.UInt32).alias("n_responders"),
        )
    )


def pool_threads(
    threads: Threads | pl.DataFrame,
    matcher: Any,
    *,
    split: SplitSpec = SplitSpec(),
    report: Report | None = None,
) -> pl.DataFrame:
    """Pool a validated threads frame into one row per request (``REQUESTS_SCHEMA`` + ``responder_ids``).

    ``matcher`` is a ``catalog.match.Matcher``: each distinct (title, year) is grounded once with
    ``ground_frame``. The extra column ``responder_ids`` (aligned with ``responders``) is what
    :func:`expand_responders` names rows with; ``requests.parquet`` leaves it out (design.md's columns).
    """
    report = report or Report()
    frame = threads.frame if isinstance(threads, Threads) else threads
    frame = frame.with_row_index("_pos")
    frame = flag_rows(
        frame,
        pl.col("split").drop_nulls().n_unique().over("request_id") > 1,
        report,
        reason="conflicting_split",
        field="split",
        message="request {value} has rows in different splits",
        show="request_id",
        hint="a request and all its responders must be in one split",
    )
    keys = frame.select("title", "year").unique(maintain_order=True)
    grounded = matcher.ground_frame(keys, title="title", year="year").select("title", "year", "item_id")
    mentions = frame.lazy().join(grounded.lazy(), on=["title", "year"], how="left", nulls_equal=True)
    pooled = pool_grounded(mentions, _ground_seen(frame, matcher)).collect()

    n_grounded = mentions.select(pl.col("item_id").is_not_null().sum()).collect().item()
    n_kept = pooled.select(pl.col("responders").list.eval(pl.element().list.len()).list.sum().sum()).item()
    n_pairs = frame.select(pl.struct("request_id", "responder_id").n_unique()).item()
    # Mentions removed because the item is seen = grounded mentions - kept (responder, item) pairs
    # - repeated (responder, item) mentions, which validate_threads has already reported.
    n_repeat = (
        (
            mentions.drop_nulls("item_id").select(
                pl.len() - pl.struct("request_id", "responder_id", "item_id").n_unique()
            )
        )
        .collect()
        .item()
    )
    report.notes["mentions_of_seen_items"] += int(n_grounded - n_kept - n_repeat)
    report.notes["responders_without_items"] += int(n_pairs - pooled["n_responders"].sum())
    pooled = flag_rows(
        pooled,
        pl.col("union").is_null(),
        report,
        reason="no_grounded_item",
        field="title",
        message="request {value}: no mention grounded to a catalog item (or all were seen items)",
        show="request_id",
        hint="check the catalog (--catalog) and --match, or pass --skip-bad-rows to drop such requests",
    )
    pooled = assign_splits(pooled, split)
    return pooled.select(*REQUESTS_SCHEMA, "responder_ids").cast(
        {**REQUESTS_SCHEMA, "responder_ids": pl.List(pl.String)}
    )


def expand_responders(requests: pl.DataFrame) -> pl.DataFrame:
    """Rank-GRPO's view: one row per (request, responder) with ``items``, plus every request field.

    Responders are named by ``responder_ids`` when the pooled table has it, else by their 0-based
    position (``"0"``, ``"1"``, ...). ``responder_index`` is the position in ``responders``.
    """
    if "responder_ids" in requests.columns:
        names = pl.col("responder_ids")
    else:
        names = pl.int_ranges(pl.col("responders").list.len()).list.eval(pl.element().cast(pl.String))
    rows = (
        requests.lazy()
        .with_columns(
            names.alias("responder_id"),
            pl.int_ranges(pl.col("responders").list.len(), dtype=pl.UInt32).alias("responder_index"),
            pl.col("responders").alias("items"),
        )
        .explode("responder_id", "responder_index", "items")
        .drop_nulls("responder_index")
    )
    return rows.select(*RESPONDER_ROWS_SCHEMA).collect().cast(RESPONDER_ROWS_SCHEMA)
