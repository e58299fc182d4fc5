"""A catalog kept to the items that some splits' requests name (``remark prep --catalog-splits train``).

A source's own catalog (ProtoQA's: every answer of the file) is built from every question, test questions
included, so what a generated line can ground to, the chance level's denominator (the catalog's size) and
the popularity baseline depend on test answers. Grounding and pooling still use the whole catalog (every
request keeps all its targets); only the catalog *written* for the dataset, the one the reward, the
validation and ``remark eval`` ground generated lists to, is cut to the items the chosen splits' requests
name (their ``union`` and ``seen``), and each kept item's ``popularity`` becomes its number of mentions by
those requests' responders (``sum`` of ``counts`` over their ``union``; 0 for an item only seen).
A test answer that no training request names is then out of catalog: the catalog metric cannot credit it,
ProtoQA's per-question matching (``eval.protoqa_match``) still does.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from catalog.table import Catalog


def item_mentions(rows: pl.DataFrame) -> pl.DataFrame:
    """``m(i) = sum over rows of counts[i]``: each item's mentions by the rows' responders, one row per item
    named (``item_id``, ``n``; the ``counts`` dtype), unordered. ``rows``: pooled rows (``union``,
    ``counts``); null items skipped. The training popularity of the catalog cut, the popularity baselines
    and the collapse metrics."""
    return (
        rows.select(pl.col("union").alias("item_id"), pl.col("counts").alias("n"))
        .explode("item_id", "n")
        .drop_nulls("item_id")
        .group_by("item_id")
        .agg(pl.col("n").sum())
    )


def catalog_of_splits(catalog: Catalog, requests: pl.DataFrame, splits: Sequence[str]) -> Catalog:
    """``catalog`` cut to the items named by the requests of ``splits`` (pooled rows with ``split``,
    ``union``, ``counts``, ``seen``), catalog order kept, ``popularity`` = their mentions there.

    Raises ``ValueError`` when no request is in ``splits`` (the catalog would be empty)."""
    chosen = requests.filter(pl.col("split").is_in(list(splits)))
    if chosen.height == 0:
        found = sorted(requests["split"].drop_nulls().unique().to_list())
        raise ValueError(f"no request in split(s) {list(splits)}; the splits are {found}")
    mentions = item_mentions(chosen).select("item_id", pl.col("n").cast(pl.Float64).alias("_n"))
    seen = chosen.select(pl.col("seen").explode().alias("item_id")).drop_nulls().unique()
    named = pl.concat([mentions, seen.with_columns(pl.lit(0.0).alias("_n"))])
    named = named.group_by("item_id").agg(pl.col("_n").sum())
    df = (
        catalog.df.join(named, on="item_id", how="inner", maintain_order="left")
        .with_columns(pl.col("_n").cast(catalog.df.schema["popularity"]).alias("popularity"))
        .drop("_n")
    )
    return Catalog(df)
