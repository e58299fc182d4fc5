"""Validation of a threads frame: column types, then every column checked and cast to
``THREADS_SCHEMA`` (missing ids and titles, garbage years and timestamps, unknown splits, duplicate
mentions are reported through a ``Report``).
"""

from __future__ import annotations

import polars as pl

from catalog.io.errors import InputError
from data_prep.schema.columns import (
    TIME_HINT,
    bad_timestamp,
    bad_year,
    normalize_split,
    parse_timestamp,
    parse_year,
)
from data_prep.schema.messages import normalize_prompt
from data_prep.schema.tables import (
    IDS,
    OPTIONAL_SCHEMA,
    PROVENANCE_SCHEMA,
    SPLITS,
    THREADS_SCHEMA,
    YEAR_MAX,
    YEAR_MIN,
    Report,
    flag_rows,
)


def check_column_types(df: pl.DataFrame, path: str | None = None) -> None:
    """Typed inputs (parquet): a column of lists or structs where scalars belong (or the reverse) is an
    error naming the column, before any cast turns it into a polars traceback or a stringified list.
    """
    nested = (pl.List, pl.Array, pl.Struct)
    for name in ("request_id", "responder_id", "title", "year", "split"):
        if name in df.columns and isinstance(df.schema[name], nested):
            raise InputError(
                f"the column holds {df.schema[name]} values; expected one scalar per row",
                path=path,
                field=name,
                hint="write one value per row (a string, or a number for year)",
            )
    seen = df.schema.get("seen")
    if seen is not None and not (seen == pl.String or seen == pl.Null or _string_list(seen)):
        raise InputError(
            f"the column holds {seen} values; expected a list of titles",
            path=path,
            field="seen",
            hint='write a list of strings, e.g. ["Arrival (2016)"], or "|"-separated titles',
        )
    prompt = df.schema.get("prompt")
    if prompt is not None and not (
        prompt == pl.String or (isinstance(prompt, pl.List) and isinstance(prompt.inner, pl.Struct))
    ):
        raise InputError(
            f"the column holds {prompt} values; expected text or a list of {{role, content}} messages",
            path=path,
            field="prompt",
        )


def _string_list(dtype: pl.DataType) -> bool:
    return isinstance(dtype, pl.List) and (dtype.inner == pl.String or dtype.inner == pl.Null)


def validate_threads(df: pl.DataFrame, path: str | None = None, report: Report | None = None) -> pl.DataFrame:
    """Check and cast a threads frame to :data:`THREADS_SCHEMA` (plus provenance columns, if any).

    ``year`` may arrive as strings (parsed; garbage is reported); ``seen`` and ``split`` are optional
    (empty list and null when absent). Rows with a missing request_id, responder_id or title, an empty
    title, a garbage year or an unknown split name are reported (raise, or skip and count).
    Exact duplicate mentions (same request, responder, title and year twice) are reported too: they
    usually mean a file was concatenated twice, and pooling would otherwise hide it.
    """
    report = report or Report()
    for name in ("request_id", "prompt", "responder_id", "title"):
        if name not in df.columns:
            raise InputError(
                f"missing column; the columns found are {df.columns}",
                path=path,
                field=name,
                hint="a threads file needs request_id, prompt, responder_id, title and optionally year, seen, split",
            )
    check_column_types(df, path)
    df = normalize_prompt(df, report, path)
    if "year" not in df.columns:
        df = df.with_columns(pl.lit(None, pl.String).alias("year"))
    if "seen" not in df.columns:
        df = df.with_columns(pl.lit([], IDS).alias("seen"))
    if "split" not in df.columns:
        df = df.with_columns(pl.lit(None, pl.String).alias("split"))
    for name in ("request_id", "responder_id", "title"):
        df = df.with_columns(pl.col(name).cast(pl.String).str.strip_chars())
        df = flag_rows(
            df,
            pl.col(name).is_null() | (pl.col(name) == ""),
            report,
            reason=f"missing_{name}",
            field=name,
            message="missing or empty value",
            path=path,
            hint="fill it in, or pass --skip-bad-rows to drop such rows",
        )
    if df.schema["year"] != pl.Int32:
        df = flag_rows(
            df,
            bad_year("year"),
            report,
            reason="bad_year",
            field="year",
            message="{value} is not a year",
            path=path,
            show="year",
            hint=f"use an integer between {YEAR_MIN} and {YEAR_MAX} or leave it empty",
        )
        df = df.with_columns(parse_year("year"))
    if "timestamp" in df.columns:
        dtype = df.schema["timestamp"]
        if not (dtype.is_numeric() or dtype.is_temporal() or dtype == pl.String):
            raise InputError(
                f"timestamps of type {dtype} cannot be read", path=path, field="timestamp", hint=TIME_HINT
            )
        df = flag_rows(
            df,
            bad_timestamp("timestamp", dtype),
            report,
            reason="bad_timestamp",
            field="timestamp",
            message="{value} is not a timestamp between 1970 and 2100",
            path=path,
            show="timestamp",
            hint=TIME_HINT,
        )
        df = df.with_columns(parse_timestamp("timestamp", dtype))
    df = df.with_columns(normalize_split("split"), pl.col("seen").fill_null([]))
    df = flag_rows(
        df,
        pl.col("split").is_not_null() & ~pl.col("split").is_in(SPLITS),
        report,
        reason="bad_split",
        field="split",
        message="unknown split {value}",
        path=path,
        show="split",
        hint=f"use one of {list(SPLITS)} (or val/validation/dev) or leave it empty to split by hash",
    )
    df = flag_rows(
        df,
        pl.struct("request_id", "responder_id", "title", "year").is_duplicated()
        & ~pl.struct("request_id", "responder_id", "title", "year").is_first_distinct(),
        report,
        reason="duplicate_mention",
        field="responder_id",
        message="duplicate row: this responder already named this title in this request ({n} row(s) in all)",
        path=path,
        hint="remove the repeated rows (was the file concatenated twice?) or pass --skip-bad-rows",
    )
    extra = {**OPTIONAL_SCHEMA, **PROVENANCE_SCHEMA}
    cols = list(THREADS_SCHEMA) + [c for c in extra if c in df.columns]
    return df.select(cols).cast({c: t for c, t in {**THREADS_SCHEMA, **extra}.items() if c in cols})
