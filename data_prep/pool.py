"""Pooling: threads (one row per responder mention) -> one row per request, and back to Rank-GRPO's view.

ReMaRk's data transformation (docs/architecture.md, "data_prep/"): per request, the responders' item lists, the
union of their items, c_i (how many responders named ``union[i]``), n_x, the grounded ``seen`` items and
the raw mentions that matched nothing. Everything after grounding is one lazy polars plan
(:func:`pool_grounded`), collected with the in-memory engine, which measured faster than polars 2's default streaming engine
and peaks lower (bench/pooling.py, bench/RESULTS.md). Everything prep writes is linear in its input:
a request's ``responders`` holds each responder's list once, and the per-responder rows
(:func:`expand_responders`, ``responder_rows.parquet``) hold each responder's own list and the request id
only, so one request with 100,000 responders pools in well under 2 GB (bench/pooling.py). Rank-GRPO's
whole view (:func:`responder_view`: every request field on every responder's row) grows as n_x^2 per
request and is built only where the trainer samples per responder.

Decisions (where Rank-GRPO's data has no equivalent, or where we depart from it):

- **A seen title without a year, in ``exact`` mode, names every catalog item with that title verbatim**
  (``catalog.published.items_titled``): Rank-GRPO skips a listed title that equals a seen title,
  whatever its year, and ``exact`` grounds no year-less title on a catalog with years. Other modes
  ground a seen title like any mention (one item).
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
  input); otherwise, with ``SplitSpec.by_time``, the period holding the request's earliest timestamp
  names it (``data_prep.timesplit``; Reddit-v2: train up to 2022-10, valid 2022-11, test 2022-12), and
  without it the split comes from a stable hash of (seed, request_id), so a request and all its
  responders always land in one split. The hash is BLAKE2b, computed once per request in Python:
  polars' ``hash`` is not stable across versions, and a dataset's splits must not change with it.
- **Near-duplicate prompts share a split** (``SplitSpec.near_duplicate_threshold``, default
  ``data_prep.request_split.NEAR_DUPLICATE_THRESHOLD``): requests without a given split are hashed by
  the smallest request id of their near-duplicate group (``data_prep.request_split``), so a reworded
  question is not in train and test at once. Groups are found over all requests: a group that holds
  requests with one given split puts its other requests there too. ``SplitSpec`` and ``hash_split``
  are defined there and used here.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from catalog.normalize import split_title_year
from data_prep.request_split import SplitSpec, hash_split, near_duplicate_groups, prompt_texts
from data_prep.schema import REQUESTS_SCHEMA, RESPONDER_ROWS_SCHEMA, Report, Threads, flag_rows
from data_prep.timesplit import assign_time_splits

#: the split of ``pool_threads`` and ``assign_splits`` when none is given
DEFAULT_SPLIT = SplitSpec()


def assign_splits(requests: pl.DataFrame, spec: SplitSpec = DEFAULT_SPLIT) -> pl.DataFrame:
    """Fill null ``split`` values of a pooled table; given splits are kept.

    With ``spec.near_duplicate_threshold`` (the default), the requests' prompts are grouped
    (``data_prep.request_split.near_duplicate_groups``, over every request): a request without a split
    takes its group's given split when the group has exactly one, else the split :func:`hash_split`
    gives the smallest id among the group's requests without a split. Without it, each request is
    hashed by its own id.
    """
    missing = requests["split"].is_null()
    if not missing.any():
        return requests
    if spec.near_duplicate_threshold is None:
        ids = requests.filter(missing)["request_id"].to_list()
        table = pl.DataFrame({"request_id": ids, "_h": hash_split(ids, spec)})
    else:
        if "prompt" not in requests.columns:
            raise ValueError(
                "grouping near-duplicate prompts needs a prompt column (or near_duplicate_threshold=None)"
            )
        groups = near_duplicate_groups(prompt_texts(requests), threshold=spec.near_duplicate_threshold)
        frame = requests.select("request_id", "split").with_columns(pl.Series("_g", groups))
        given = (
            frame.drop_nulls("split")
            .group_by("_g")
            .agg(pl.col("split").unique().alias("_given"))
            .filter(pl.col("_given").list.len() == 1)
            .select("_g", pl.col("_given").list.first().alias("_given"))
        )
        smallest = frame.filter(pl.col("split").is_null()).group_by("_g").agg(pl.col("request_id").min())
        smallest = smallest.with_columns(
            pl.Series("_hashed", hash_split(smallest["request_id"].to_list(), spec))
        )
        table = (
            frame.filter(pl.col("split").is_null())
            .join(given, on="_g", how="left")
            .join(smallest.select("_g", "_hashed"), on="_g", how="left")
            .select("request_id", pl.coalesce("_given", "_hashed").alias("_h"))
        )
    return (
        requests.join(table, on="request_id", how="left", maintain_order="left")
        .with_columns(pl.coalesce("split", "_h").alias("split"))
        .drop("_h")
    )


def _ground_seen(frame: pl.DataFrame, matcher: Any) -> pl.LazyFrame:
    """(request_id, item_id) of grounded seen titles, in first-mention order; ungrounded ones dropped.

    In ``exact`` mode a seen title without a year grounds to every item titled so verbatim (catalog
    order), as Rank-GRPO's seen test reads it; a title with a year, or in another mode, to one item."""
    raw = (
        frame.lazy()
        .select("request_id", "seen")
        .unique(maintain_order=True)
        .explode("seen")
        .drop_nulls("seen")
    )
    uniq = raw.select(pl.col("seen").unique()).collect()["seen"].to_list()
    if not uniq:
        return raw.select("request_id", pl.lit(None, pl.String).alias("item_id")).head(0)
    split = [split_title_year(s) for s in uniq]
    keys = pl.DataFrame(
        {"seen": uniq, "title": [t for t, _ in split], "year": [y for _, y in split]},
        schema={"seen": pl.String, "title": pl.String, "year": pl.Int32},
    )
    ground = matcher.ground_frame(keys, title="title", year="year").select("seen", "item_id")
    if matcher.settings.match_mode == "exact":
        from catalog.published import items_titled

        bare = [s for s, (_, y) in zip(uniq, split, strict=True) if y is None]
        named = items_titled(matcher.catalog, bare)
        ground = pl.DataFrame(
            {
                "seen": [s for s in bare for _ in named.get(s, ())],
                "item_id": [i for s in bare for i in named.get(s, ())],
            },
            schema={"seen": pl.String, "item_id": pl.String},
        ).vstack(ground.filter(~pl.col("seen").is_in(list(named))))
    return (
        raw.join(ground.lazy(), on="seen", how="inner", maintain_order="left")
        .drop_nulls("item_id")
        .select("request_id", "item_id")
    )


def _code(col: str) -> pl.Expr:
    """A string column -> u64 codes (polars' categorical codes; null stays null)."""
    return pl.col(col).cast(pl.Categorical).to_physical().cast(pl.UInt64)


_SHIFT = 2**32  # codes are u32, so (a * 2**32 + b) is a unique u64 key of the pair


def pool_grounded(mentions: pl.LazyFrame, seen: pl.LazyFrame) -> pl.LazyFrame:
    """The pooling plan on grounded mentions (no I/O, no grounding): one row per request.

    ``mentions`` (in file order): request_id, prompt, responder_id, title, year, split and ``item_id``
    (null when ungrounded), optionally file/row. ``seen`` (in first-mention order): request_id, item_id.
    Returns REQUESTS_SCHEMA's columns (split as given, possibly null) + ``responder_ids`` (+ file/row
    when present), requests in first-appearance order; a request with no grounded, unseen item has null
    ``union``.

    Speed: string keys are turned into integer codes once (categorical codes) and pairs into one u64
    key, so every group-by hashes integers; first-appearance orders come from ``maintain_order=True``
    group-bys over rows in file order, so nothing is sorted except each request's union by count.
    """
    extra = [c for c in ("file", "row") if c in mentions.collect_schema().names()]
    m = mentions.with_columns(_code("request_id").alias("_r"), _code("item_id").alias("_i")).with_columns(
        (pl.col("_r") * _SHIFT + _code("responder_id")).alias("_rr"),
        (pl.col("_r") * _SHIFT + pl.col("_i")).alias("_ri"),
    )
    seen = seen.with_columns(_code("request_id").alias("_r"), _code("item_id").alias("_i")).with_columns(
        (pl.col("_r") * _SHIFT + pl.col("_i")).alias("_ri")
    )
    seen = seen.unique("_ri", keep="first", maintain_order=True)
    seen_lists = seen.group_by("_r", maintain_order=True).agg(pl.col("item_id").alias("seen"))
    # Grounded, unseen mentions, each (request, responder, item) once.
    hit = (
        m.select("_r", "_i", "_rr", "_ri", "responder_id", "item_id")  # leave the prompts behind
        .filter(pl.col("_i").is_not_null())
        .join(seen.select("_ri"), on="_ri", how="anti", maintain_order="left")
        .filter(pl.struct("_rr", "_i").is_first_distinct())
    )
    # Groups come out in order of first appearance: responders by first mention, items likewise.
    responders = (
        hit.group_by("_rr", maintain_order=True)
        .agg(pl.col("_r").first(), pl.col("responder_id").first(), pl.col("item_id").alias("items"))
        .group_by("_r", maintain_order=True)
        .agg(pl.col("responder_id").alias("responder_ids"), pl.col("items").alias("responders"))
    )
    union = (
        hit.group_by("_ri", maintain_order=True)
        .agg(pl.col("_r").first(), pl.col("item_id").first(), pl.len().cast(pl.UInt32).alias("c"))
        .group_by("_r", maintain_order=True)
        .agg(  # a stable sort by descending count keeps first-mention order among equal counts
            pl.col("item_id").sort_by("c", descending=True, maintain_order=True).alias("union"),
            pl.col("c").sort(descending=True).alias("counts"),
        )
    )
    shown = pl.when(pl.col("year").is_null()).then("title").otherwise(pl.format("{} ({})", "title", "year"))
    ungrounded = (
        m.select("_r", "_i", "title", "year")
        .filter(pl.col("_i").is_null())
        .with_columns(shown.alias("_shown"))
        .unique(["_r", "_shown"], keep="first", maintain_order=True)
        .group_by("_r", maintain_order=True)
        .agg(pl.col("_shown").alias("ungrounded"))
    )
    split = (
        m.select("_r", "split")
        .filter(pl.col("split").is_not_null())
        .unique("_r", keep="first", maintain_order=True)
    )
    base = m.unique("_r", keep="first", maintain_order=True).select("_r", "request_id", "prompt", *extra)
    joined = base.join(split.select("_r", "split"), on="_r", how="left", maintain_order="left")
    for part in (seen_lists, responders, union, ungrounded):
        joined = joined.join(part, on="_r", how="left", maintain_order="left")
    return joined.drop("_r").with_columns(
        pl.col("seen", "ungrounded").fill_null([]),
        pl.col("responders").list.len().fill_null(0).cast(pl.UInt32).alias("n_responders"),
    )


def pool_threads(
    threads: Threads | pl.DataFrame,
    matcher: Any,
    *,
    split: SplitSpec = DEFAULT_SPLIT,
    report: Report | None = None,
) -> pl.DataFrame:
    """Pool a validated threads frame into one row per request (``REQUESTS_SCHEMA`` + ``responder_ids``).

    ``matcher`` is a ``catalog.match.Matcher``: each distinct (title, year) is grounded once with
    ``ground_frame``. The extra column ``responder_ids`` (aligned with ``responders``) is what
    :func:`expand_responders` names rows with; ``requests.parquet`` leaves it out (docs/architecture.md's columns).
    """
    report = report or Report()
    frame = threads.frame if isinstance(threads, Threads) else threads
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
    if split.by_time is not None:
        frame = assign_time_splits(frame, split.by_time, report)
    keys = frame.select("title", "year").unique(maintain_order=True)
    grounded = matcher.ground_frame(keys, title="title", year="year").select("title", "year", "item_id")
    mentions = frame.join(grounded, on=["title", "year"], how="left", nulls_equal=True, maintain_order="left")
    pooled = pool_grounded(mentions.lazy(), _ground_seen(frame, matcher)).collect(engine="in-memory")

    # Grounded (request, responder, item) triples that are not in any responder's list were seen items.
    n_triples = mentions.filter(pl.col("item_id").is_not_null()).select(
        pl.struct("request_id", "responder_id", "item_id").n_unique()
    )
    n_kept = pooled.select(pl.col("responders").list.eval(pl.element().list.len()).list.sum().sum())
    n_pairs = frame.select(pl.struct("request_id", "responder_id").n_unique()).item()
    report.notes["mentions_of_seen_items"] += int(n_triples.item() - (n_kept.item() or 0))
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
    """Rank-GRPO's rows: one per (request, responder), ``RESPONDER_ROWS_SCHEMA`` (request_id, responder_id,
    responder_index, items). Linear in the input: each responder's own list once, nothing of the request
    repeated (:func:`responder_view` joins the request's fields on where a consumer needs them).

    Responders are named by ``responder_ids`` when the pooled table has it, else by their 0-based
    position (``"0"``, ``"1"``, ...). ``responder_index`` is the position in ``responders``.
    """
    if "responder_ids" in requests.columns:
        names = pl.col("responder_ids")
    else:
        names = pl.int_ranges(pl.col("responders").list.len()).list.eval(pl.element().cast(pl.String))
    rows = (
        requests.lazy()
        .select(
            "request_id",
            names.alias("responder_id"),
            pl.int_ranges(pl.col("responders").list.len(), dtype=pl.UInt32).alias("responder_index"),
            pl.col("responders").alias("items"),
        )
        .explode("responder_id", "responder_index", "items")
        .drop_nulls("responder_index")
    )
    return rows.select(*RESPONDER_ROWS_SCHEMA).collect().cast(RESPONDER_ROWS_SCHEMA)


def responder_view(requests: pl.DataFrame, rows: pl.DataFrame | None = None) -> pl.DataFrame:
    """Rank-GRPO's whole view: each of ``rows`` (:func:`expand_responders` of ``requests`` when None) with
    its request's fields (``REQUESTS_SCHEMA`` but ``request_id``) joined on, in the rows' order.

    Size: sum over requests of n_x x (the request's lists), n_x^2 per request through ``responders``:
    for the trainer's per-responder sampling of ordinary data, not for a request with 10^5 responders."""
    rows = expand_responders(requests) if rows is None else rows
    fields = requests.select(*REQUESTS_SCHEMA)
    return rows.select(*RESPONDER_ROWS_SCHEMA).join(
        fields, on="request_id", how="left", maintain_order="left"
    )
