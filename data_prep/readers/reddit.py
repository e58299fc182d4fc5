"""Rank-GRPO's processed Reddit rows (Reddit-v2, and Reddit-Books / Reddit-Music in the same shape).

One row per (request, responder), as JSON lines or parquet (export a ``datasets.load_from_disk`` split
with ``.to_parquet``). Fields: ``prompt`` (chat messages that already carry Rank-GRPO's instruction),
``seen_titles`` (titles named in the request), ``groundtruth_with_release_year`` (the responder's items
as ``[title, year]``, the year an int or a string), and optionally ``timestamp`` or ``created_utc``
(epoch seconds or ISO 8601; what ``remark prep --split-by-time`` reads). Other fields (``completion``)
are ignored.

Rows with the same prompt are one request's responders (docs/references.md#rank-grpo): the request id is a stable
hash of the prompt messages unless the row carries ``request_id``. Responder ids are ``r1, r2, ...`` in
file order within a request unless the row carries ``responder_id``; then a repeated
(request, responder) pair is reported as a duplicate. Without responder ids two identical rows are two
responders who named the same items, which real threads do contain, so they are kept.

Departures from Rank-GRPO: pooling happens later (``data_prep.pool``), so rows are not duplicated
per responder in training; a year that does not parse is reported (Rank-GRPO skips that ground-truth
entry silently in ``_safe_int_year``); a title repeated within one row counts once (noted in stats).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl

from catalog.io.errors import InputError
from data_prep.readers._io import decode_json_column, parse_string_list, read_rows
from data_prep.schema import (
    DOMAINS,
    Report,
    Threads,
    bad_year,
    flag_rows,
    normalize_prompt,
    parse_year,
    validate_threads,
)

GT = "groundtruth_with_release_year"
FIELDS = ["prompt", "seen_titles", GT, "request_id", "responder_id", "split", "timestamp", "created_utc"]
TIME_FIELDS = ("timestamp", "created_utc")
#: the JSON kinds each field may have in JSON lines
KINDS = {
    "prompt": ("list", "string"),
    "seen_titles": ("list", "string"),
    GT: ("list",),
    "request_id": ("string", "number"),
    "responder_id": ("string", "number"),
    "split": ("string",),
    "timestamp": ("number", "string"),
    "created_utc": ("number", "string"),
}


def request_ids_from_prompts(prompts: pl.Series, prefix: str = "rq-") -> pl.Series:
    """Stable ids: ``prefix`` + 16 hex digits of BLAKE2b over the messages' canonical JSON.

    Hashed in Python once per distinct prompt (polars finds the distinct ones): polars' ``hash`` is not
    stable across versions, and a dataset's ids must not change when a library is upgraded.
    """
    key = pl.col("prompt").list.eval(pl.element().struct.json_encode()).list.join("\u0001")
    frame = prompts.to_frame("prompt").with_columns(key.alias("_key"))
    firsts = frame.group_by("_key", maintain_order=True).agg(pl.col("prompt").first())
    ids = [
        prefix
        + hashlib.blake2b(
            json.dumps(m, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode(), digest_size=8
        ).hexdigest()
        for m in firsts["prompt"].to_list()
    ]
    table = firsts.select("_key", pl.Series("_id", ids, dtype=pl.String))
    return frame.join(table, on="_key", how="left", maintain_order="left")["_id"].alias("request_id")


def read_reddit(
    path: str | Path, *, domain: str = "movie", source: str = "reddit", report: Report | None = None
) -> Threads:
    """Read Rank-GRPO-style rows into a threads frame (no catalog: pass gt_catalog.csv with --catalog)."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; valid: {list(DOMAINS)}")
    report = report or Report()
    path_s = str(path)
    df = read_rows(path, FIELDS, report, kinds=KINDS)
    for name in (GT, "prompt"):
        if name not in df.columns:
            raise InputError(f"missing column; found {df.columns}", path=path, field=name)
        df = flag_rows(
            df,
            pl.col(name).is_null(),
            report,
            reason=f"missing_{name}",
            field=name,
            message="missing field",
            path=path_s,
            hint=f"each row needs prompt and {GT}; pass --skip-bad-rows to drop such rows",
        )
    df = normalize_prompt(df, report, path_s)
    df = parse_string_list(df, "seen_titles", report, path) if "seen_titles" in df.columns else df
    hint = f'{GT} must be a list of [title, year] pairs, e.g. [["Arrival", 2016], ["Moon", "2009"]]'
    df = decode_json_column(df, GT, pl.List(pl.List(pl.String)), report, path, hint=hint)
    df = flag_rows(
        df,
        pl.col(GT).list.len() == 0,
        report,
        reason="empty_responder",
        field=GT,
        message="empty ground-truth list: this responder named no items",
        path=path_s,
        hint="drop the row, or pass --skip-bad-rows",
    )
    hashed = request_ids_from_prompts(df["prompt"]).alias("_hid")
    given = pl.col("request_id").cast(pl.String) if "request_id" in df.columns else pl.lit(None, pl.String)
    df = df.with_columns(hashed).with_columns(pl.coalesce(given, "_hid").alias("request_id")).drop("_hid")
    if "responder_id" in df.columns and df["responder_id"].is_not_null().any():
        df = flag_rows(
            df,
            pl.struct("request_id", "responder_id").is_duplicated()
            & ~pl.struct("request_id", "responder_id").is_first_distinct(),
            report,
            reason="duplicate_responder",
            field="responder_id",
            message="responder {value} already has a row for this request ({n} row(s) in all)",
            path=path_s,
            show="responder_id",
            hint="each (request, responder) pair must appear once",
        )
    else:
        df = df.with_columns(pl.lit(None, pl.String).alias("responder_id"))
    generated = pl.format("r{}", pl.int_range(1, pl.len() + 1).over("request_id"))
    df = df.with_columns(pl.coalesce(pl.col("responder_id").cast(pl.String), generated).alias("responder_id"))

    mentions = df.explode(GT).with_columns(
        pl.col(GT).list.get(0, null_on_oob=True).alias("title"),
        pl.col(GT).list.get(1, null_on_oob=True).alias("year"),
    )
    mentions = flag_rows(
        mentions,
        pl.col(GT).list.len() != 2,
        report,
        reason="bad_groundtruth_entry",
        field=GT,
        message="entry {value} is not a [title, year] pair",
        path=path_s,
        show=GT,
        hint=hint,
    )
    mentions = flag_rows(
        mentions,
        bad_year("year"),
        report,
        reason="bad_year",
        field=GT,
        message="year {value} is not a year",
        path=path_s,
        show="year",
        hint='use an integer year such as 2016 or "2016"',
    ).with_columns(parse_year("year"))
    before = mentions.height
    mentions = mentions.unique(
        ["request_id", "responder_id", "title", "year"], keep="first", maintain_order=True
    )
    report.notes["duplicate_titles_within_responder"] += before - mentions.height
    cols = ["request_id", "prompt", "responder_id", "title", "year", "file", "row"]
    time_col = next(
        (c for c in TIME_FIELDS if c in mentions.columns and mentions[c].is_not_null().any()), None
    )
    mentions = mentions.select(
        *cols,
        *([pl.col(time_col).alias("timestamp")] if time_col else []),
        pl.col("seen_titles").alias("seen")
        if "seen_titles" in mentions.columns
        else pl.lit([], pl.List(pl.String)).alias("seen"),
        pl.col("split") if "split" in mentions.columns else pl.lit(None, pl.String).alias("split"),
    )
    frame = validate_threads(mentions, path_s, report)
    meta = {
        "source": source,
        "domain": domain,
        "has_years": True,
        "instruction_included": True,
    }
    return Threads(frame, None, meta)
