"""Pooled datasets -> the rows the trainer samples (``datasets.Dataset``), for each sampling mode.

- ``uniform`` (ReMaRk): one row per request of the split (``requests.parquet``), ``responder_index`` -1
  (a responder is drawn per step only if the reward scheme needs one).
- ``per_responder`` (Rank-GRPO): one row per (request, responder) (``responder_rows.parquet``), so a
  request with n responders is drawn n times as often; ``responder_index`` is the row's own responder.

Both views come from the same pooled table (data_prep), so the two recipes see the same requests,
items and prompts. ``prompt`` is the chat messages built by ``data_prep.prompts.build_messages``: the
trainer and the evaluation prompt identically.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from catalog.io.errors import InputError
from data_prep.dataset import PooledDataset
from data_prep.pool import responder_view
from data_prep.prompts import build_messages

#: Columns the trainer's reward step reads from every row.
#: (n_x is ``len(responders)``: the pooled ``n_responders`` column is not carried into training rows.)
REWARD_COLUMNS = ("request_id", "seen", "union", "counts", "responders", "responder_index")


def prompt_messages(prompt: Any, meta: dict[str, Any], k: int) -> list[dict[str, str]]:
    """The policy's messages for one pooled prompt (the instruction for K items, then the request)."""
    return build_messages(
        prompt,
        k=k,
        domain=meta.get("domain", "movie"),
        with_year=bool(meta.get("has_years", True)),
        instruction_included=bool(meta.get("instruction_included", False)),
    )


def training_rows(ds: PooledDataset, *, split: str, sampling: str, k: int) -> pl.DataFrame:
    """The polars frame of training rows (``prompt`` as messages + ``REWARD_COLUMNS``)."""
    if sampling == "uniform":
        frame = ds.requests.with_columns(pl.lit(-1, pl.Int64).alias("responder_index"))
    elif sampling == "per_responder":
        rows = responder_view(
            ds.requests, ds.responder_rows
        )  # each responder's row with its request's fields
        frame = rows.with_columns(pl.col("responder_index").cast(pl.Int64))
    else:
        raise InputError(f"unknown sampling {sampling!r}", field="sampling", hint="uniform or per_responder")
    frame = frame.filter(pl.col("split") == split)
    if frame.height == 0:
        splits = sorted(set(ds.requests["split"].to_list()))
        raise InputError(f"no rows in split {split!r}", field="train_split", hint=f"splits present: {splits}")
    messages = [prompt_messages(p, ds.meta, k) for p in frame["prompt"].to_list()]
    return frame.select(*REWARD_COLUMNS).with_columns(
        pl.Series("prompt", messages), pl.col("counts").cast(pl.List(pl.Int64))
    )


def training_dataset(ds: PooledDataset, *, split: str, sampling: str, k: int):
    """``datasets.Dataset`` of :func:`training_rows` (what ``GRPOTrainer`` takes)."""
    from datasets import Dataset

    return Dataset.from_polars(training_rows(ds, split=split, sampling=sampling, k=k))
