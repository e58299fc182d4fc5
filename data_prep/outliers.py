"""Requests whose responder count is an outlier in their split.

Per-responder views weight request x by its responder rows n_x, so one request with many more responders
than the rest of its split moves a per-responder mean by itself. ``remark stats`` lists the flagged
requests with their share of the split's weight; the demo reports its headline with and without the
flagged test requests. The rule (:data:`RULE`), per split s (null splits form one split), with c_i the
mention count of union item i of x (``counts``) and m_x = sum_i c_i its mentions:

- **equal counts**: at least :data:`EQUAL_MIN_ITEMS` (5) union items of x have exactly the same count
  c >= :data:`EQUAL_MIN_COUNT` (10), and those items hold at least :data:`EQUAL_MIN_SHARE` (50%) of m_x.
  A source that copied one answer cluster's count onto each of its aliases looks like this (ProtoQA's
  scraped q4013: 14 answers of 54 mentions each, 69% of 1094 mentions, where a question has about 100);
- **responders**: n_x > median_s + :data:`MAD_FACTOR` (10) * max(MAD_s, :data:`MAD_FLOOR` (1)), with
  median_s the median of n over the split's requests and MAD_s = median_x abs(n_x - median_s). The floor
  keeps a split where most requests share one count (MAD_s = 0) from flagging every request above it.

``weight_share`` = n_x / sum of n over split s: the request's share of the split's per-responder weight
(``eval.views``' ``n_rows`` counts the responders with a grounded item, so it can be slightly smaller).
"""

from __future__ import annotations

import polars as pl

EQUAL_MIN_ITEMS = 5
EQUAL_MIN_COUNT = 10
EQUAL_MIN_SHARE = 0.5
MAD_FACTOR = 10.0
MAD_FLOOR = 1.0
#: The rule in one line (reports print it beside the flagged requests).
RULE = (
    f">= {EQUAL_MIN_ITEMS} answers with one equal mention count >= {EQUAL_MIN_COUNT} holding >= "
    f"{EQUAL_MIN_SHARE:.0%} of the request's mentions, or responders > median + {MAD_FACTOR:g} MAD of its "
    f"split (MAD floored at {MAD_FLOOR:g})"
)

#: Columns of :func:`outlier_requests`.
OUTLIER_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "split": pl.String(),
    "n_responders": pl.Int64(),
    "weight_share": pl.Float64(),
    "equal_counts": pl.Boolean(),
    "responders": pl.Boolean(),
    "reason": pl.String(),
}


def _equal_counts(base: pl.LazyFrame) -> pl.LazyFrame:
    """Per request, its largest qualifying group of equal counts: ``request_id``, ``count``, ``k`` (items),
    ``share`` (k * count / m_x); requests with none are absent."""
    return (
        base.select("request_id", "mentions", pl.col("counts").alias("count"))
        .explode("count")
        .drop_nulls("count")
        .group_by("request_id", "mentions", "count")
        .agg(pl.len().alias("k"))
        .with_columns(share=pl.col("k") * pl.col("count") / pl.col("mentions"))
        .filter(
            (pl.col("k") >= EQUAL_MIN_ITEMS)
            & (pl.col("count") >= EQUAL_MIN_COUNT)
            & (pl.col("share") >= EQUAL_MIN_SHARE)
        )
        .sort(["request_id", "share", "count"], descending=[False, True, True])
        .unique("request_id", keep="first", maintain_order=True)
        .select("request_id", "count", "k", "share")
    )


def outlier_requests(requests: pl.DataFrame) -> pl.DataFrame:
    """The requests the rule in the module docstring flags, one row each in :data:`OUTLIER_SCHEMA`:
    which rule fired (``equal_counts``, ``responders``; both can), ``reason`` in words and ``weight_share``;
    sorted by split, then by n descending, then by id. ``requests``: a pooled table (``request_id``,
    ``n_responders``, ``counts``, ``split``; ``split`` optional)."""
    if requests.is_empty():
        return pl.DataFrame(schema=OUTLIER_SCHEMA)
    split = pl.col("split").cast(pl.String) if "split" in requests.columns else pl.lit(None, pl.String)
    n = pl.col("n_responders")
    base = (
        requests.lazy()
        .select(
            pl.col("request_id").cast(pl.String),
            split.alias("split"),
            n.cast(pl.Int64),
            pl.col("counts").cast(pl.List(pl.Int64)),
        )
        .with_columns(
            mentions=pl.col("counts").list.sum(),
            weight_share=n / n.sum().over("split"),
            median=n.cast(pl.Float64).median().over("split"),
        )
        .with_columns(mad=(n - pl.col("median")).abs().median().over("split"))
        .with_columns(
            threshold=pl.col("median") + MAD_FACTOR * pl.max_horizontal(pl.col("mad"), pl.lit(MAD_FLOOR))
        )
    )
    flagged = (
        base.join(_equal_counts(base), on="request_id", how="left")
        .with_columns(
            equal_counts=pl.col("k").is_not_null(),
            responders=n > pl.col("threshold"),
        )
        .filter(pl.col("equal_counts") | pl.col("responders"))
    )
    equal_text = pl.when(pl.col("equal_counts")).then(
        pl.format(
            "equal counts: {} answers of exactly {} mentions hold {}% of {}",
            "k",
            "count",
            (100 * pl.col("share")).round(0).cast(pl.Int64),
            "mentions",
        )
    )
    mad_text = pl.when(pl.col("responders")).then(
        pl.format(
            "responders: {} > median {} + {} x MAD {}{} = {}",
            n,
            pl.col("median").round(1),
            pl.lit(f"{MAD_FACTOR:g}"),
            pl.col("mad").round(1),
            pl.when(pl.col("mad") < MAD_FLOOR)
            .then(pl.lit(f" (floored at {MAD_FLOOR:g})"))
            .otherwise(pl.lit("")),
            pl.col("threshold").round(1),
        )
    )
    return (
        flagged.with_columns(reason=pl.concat_str([equal_text, mad_text], separator="; ", ignore_nulls=True))
        .sort(["split", "n_responders", "request_id"], descending=[False, True, False], nulls_last=True)
        .select(list(OUTLIER_SCHEMA))
        .collect()
        .cast(OUTLIER_SCHEMA)
    )
