"""Rank-GRPO's year-tolerant title equivalence, as a partition of catalog items.

Rank-GRPO grounds a line by an exact (title, year) lookup, then counts a hit when the line's casefolded,
whitespace-collapsed title equals a ground-truth title and the years differ by at most 2
(``libs/metrics_align.py``). remark compares catalog ids instead, so two catalog rows with the same
title a year or two apart ("Django Unchained" 2012 and 2013, "Titanic" 1996 and 1997: 37 pairs in
Reddit-v2's gt_catalog.csv) are different items for us and the same item for Rank-GRPO.
``tolerance_groups`` gives every item a group id so that code that must reproduce Rank-GRPO exactly can
compare groups instead of ids.

Departure: a partition needs a transitive relation, so groups chain (2010 ~ 2012 ~ 2014 is one group
although 2010 and 2014 are 4 years apart); Rank-GRPO's pairwise test would not match those two.
Year-less items group with the year-less items of the same title.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from catalog.normalize import normalize_title
from catalog.table import Catalog

__all__ = ["tolerance_groups"]


def _casefold(s: str) -> str:
    return " ".join(s.split()).casefold()


def tolerance_groups(
    catalog: Catalog, *, year_tolerance: int = 2, key: Literal["casefold", "normalized"] = "casefold"
) -> pl.DataFrame:
    """Frame ``item_id, group``: items with equal title keys whose years chain within ``year_tolerance``.

    ``key="casefold"`` is Rank-GRPO's comparison (casefold + whitespace collapse); ``"normalized"`` uses
    :func:`~catalog.normalize.normalize_title`. ``group`` is the first ``item_id`` of the group in
    (year, item_id) order, so a singleton's group is its own id. Rows come back in catalog order.
    """
    fold = _casefold if key == "casefold" else normalize_title
    k = pl.col("title").map_elements(fold, return_dtype=pl.String, skip_nulls=False)
    df = (
        catalog.df.select("item_id", "year", k.alias("key"))
        .with_row_index("pos")
        .sort("key", pl.col("year").is_null(), "year", "item_id")
    )
    gap = (pl.col("year") - pl.col("year").shift(1)).abs()
    new = (
        (pl.col("key") != pl.col("key").shift(1)).fill_null(True)
        | (pl.col("year").is_null() != pl.col("year").shift(1).is_null()).fill_null(True)
        | (gap > year_tolerance).fill_null(False)
    )
    df = df.with_columns(new.cum_sum().alias("g"))
    df = df.with_columns(pl.col("item_id").first().over("g").alias("group"))
    return df.sort("pos").select("item_id", "group")
