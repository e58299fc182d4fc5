"""Responder hold-out: split each request's responders into a train side and a held-out side.

Evaluation against *held-out responders of the same requests* asks whether a policy learned what other
people would answer, not which answers its training responders gave. ``holdout_responders`` takes a
pooled table (``data_prep.pool.pool_threads``' output: ``REQUESTS_SCHEMA`` + ``responder_ids``) and
returns two pooled tables with the same requests, columns and types, each re-pooled from its own
responders, so both feed ``write_dataset`` / ``expand_responders`` / the trainer unchanged.

Rules:

- Per request with n responders, ``h = clip(round(fraction * n), 1, n - 1)`` responders are held out
  (polars' round: half to even, so 5 responders at 0.5 hold out 2), so every request keeps at least
  one responder on each side. A request with fewer than 2 responders cannot be split: it is dropped
  from both sides and its id is listed in ``Holdout.dropped``.
- Which responders: a seeded uniform draw (``numpy.random.default_rng(seed)``, one number per
  (request, responder) row in the pooled table's order); the h smallest of a request are held out.
  Same table and seed, same split; the draw does not depend on responder ids.
- Re-pooling, per side: ``responders`` / ``responder_ids`` keep the original responder order;
  ``n_responders`` is the side's count; ``union`` / ``counts`` are recomputed from the side's responders
  (descending count, ties by first mention in responder order); ``request_id``, ``prompt``, ``seen``,
  ``split`` are carried over. ``ungrounded`` is carried to both sides unchanged (the pooled table does
  not say which responder a raw unmatched mention came from).

Everything is one polars plan per side (explode, group-bys with ``maintain_order``); no per-row loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from data_prep.schema import REQUESTS_SCHEMA

POOLED_SCHEMA: dict[str, pl.DataType] = {**REQUESTS_SCHEMA, "responder_ids": pl.List(pl.String)}


@dataclass
class Holdout:
    """The two sides of a responder hold-out (same requests, same order) and what was dropped."""

    train: pl.DataFrame
    heldout: pl.DataFrame
    dropped: list[str] = field(default_factory=list)
    settings: dict[str, float | int] = field(default_factory=dict)


def holdout_responders(pooled: pl.DataFrame, *, fraction: float = 0.5, seed: int = 0) -> Holdout:
    """Split every request's responders into train and held-out sides and re-pool both (see module doc).

    ``pooled`` needs ``REQUESTS_SCHEMA``'s columns; ``responder_ids`` is used when present (else the
    responders are named by their 0-based position). ``fraction`` is the share held out, in (0, 1).
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    missing = [c for c in REQUESTS_SCHEMA if c not in pooled.columns]
    if missing:
        raise ValueError(f"pooled table lacks column(s) {missing}")
    if "responder_ids" not in pooled.columns:
        pooled = pooled.with_columns(
            pl.int_ranges(pl.col("responders").list.len())
            .list.eval(pl.element().cast(pl.String))
            .alias("responder_ids")
        )
    n = pl.col("responders").list.len()
    dropped = pooled.filter(n < 2)["request_id"].to_list()
    kept = pooled.filter(n >= 2).with_row_index("_q")

    rows = (
        kept.select("_q", "responder_ids", "responders")
        .with_columns(pl.int_ranges(pl.col("responders").list.len()).alias("_pos"))
        .explode("responder_ids", "responders", "_pos")
        .rename({"responder_ids": "_rid", "responders": "_items"})
    )
    draw = np.random.default_rng(seed).random(rows.height)
    rows = (
        rows.with_columns(pl.Series("_u", draw))
        .with_columns(
            pl.col("_u").rank("ordinal").over("_q").alias("_rank"),
            pl.len().over("_q").alias("_n"),
        )
        .with_columns(
            (pl.col("_n").cast(pl.Float64) * fraction).round().clip(1, pl.col("_n") - 1).alias("_h"),
        )
        .with_columns((pl.col("_rank") <= pl.col("_h")).alias("_held"))
    )
    carried = kept.select("_q", "request_id", "prompt", "seen", "ungrounded", "split")
    train = _repool(rows.filter(~pl.col("_held")), carried)
    heldout = _repool(rows.filter(pl.col("_held")), carried)
    return Holdout(train, heldout, dropped, {"fraction": fraction, "seed": seed})


def _repool(rows: pl.DataFrame, carried: pl.DataFrame) -> pl.DataFrame:
    """One side's (request, responder) rows -> a pooled table in ``POOLED_SCHEMA``."""
    rows = rows.sort("_q", "_pos")
    responders = rows.group_by("_q", maintain_order=True).agg(
        pl.col("_rid").alias("responder_ids"), pl.col("_items").alias("responders")
    )
    mentions = (
        rows.select("_q", "_items")
        .explode("_items")
        .drop_nulls("_items")
        .with_columns(pl.int_range(pl.len()).over("_q").alias("_order"))
    )
    union = (
        mentions.group_by("_q", "_items", maintain_order=True)
        .agg(pl.len().cast(pl.UInt32).alias("_c"), pl.col("_order").min())
        .sort("_q", "_c", "_order", descending=[False, True, False])
        .group_by("_q", maintain_order=True)
        .agg(pl.col("_items").alias("union"), pl.col("_c").alias("counts"))
    )
    out = (
        carried.join(responders, on="_q", how="left", maintain_order="left")
        .join(union, on="_q", how="left", maintain_order="left")
        .with_columns(
            pl.col("responders").list.len().cast(pl.UInt32).alias("n_responders"),
            pl.col("union").fill_null([]),
            pl.col("counts").fill_null([]),
        )
    )
    return out.select(*POOLED_SCHEMA).cast(POOLED_SCHEMA)
