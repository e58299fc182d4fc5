"""The generic threads file: one row per responder mention, in JSON lines, CSV/TSV or parquet.

Columns: ``request_id``, ``prompt`` (text, or a JSON list of ``{role, content}`` messages),
``responder_id``, ``title``, optional ``year``, ``seen`` (a JSON list or "|"-separated titles),
``split`` (train / valid / test; empty = assigned by hash or by time) and ``timestamp`` (epoch seconds
or ISO 8601, UTC when no offset is given; what ``remark prep --split-by-time`` reads). A title written "Arrival (2016)" with no
year gets its year split off. The file defines no catalog: pass one with ``--catalog``.

Per-request fields must agree across a request's rows: two different prompts, or two different splits,
for one request_id are reported (the pooling step checks the splits).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from data_prep.readers._io import parse_string_list, read_rows, split_years_from_titles
from data_prep.schema import DOMAINS, Report, Threads, flag_rows, validate_threads

FIELDS = ["request_id", "prompt", "responder_id", "title", "year", "seen", "split", "timestamp"]
#: the JSON kinds each field may have in JSON lines (ids and titles may be numbers: "1917", 42)
KINDS = {
    "request_id": ("string", "number"),
    "prompt": ("string", "list"),
    "responder_id": ("string", "number"),
    "title": ("string", "number"),
    "year": ("number", "string"),
    "seen": ("list", "string"),
    "split": ("string",),
    "timestamp": ("number", "string"),
}


def read_threads(path: str | Path, *, domain: str = "movie", report: Report | None = None) -> Threads:
    """Read a generic threads file into a validated threads frame (no catalog)."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; valid: {list(DOMAINS)}")
    report = report or Report()
    df = read_rows(path, FIELDS, report, kinds=KINDS)
    if "seen" in df.columns:
        df = parse_string_list(df, "seen", report, path)
    frame = validate_threads(df, str(path), report)
    frame = split_years_from_titles(frame)
    frame = flag_rows(
        frame,
        pl.col("prompt").n_unique().over("request_id") > 1,
        report,
        reason="conflicting_prompt",
        field="prompt",
        message="request {value} has different prompts on different rows",
        path=str(path),
        show="request_id",
        hint="a request's rows must repeat the same prompt; give different requests different ids",
    )
    meta = {
        "source": "threads",
        "domain": domain,
        "has_years": bool(frame["year"].is_not_null().any()),
        "instruction_included": False,
    }
    return Threads(frame, None, meta)
