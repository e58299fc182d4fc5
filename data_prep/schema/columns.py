"""Column expressions that read raw values: years, timestamps (UTC) and split names.

Each ``parse_*`` turns unreadable values into null; its ``bad_*`` twin selects those rows, so that a
reader reports them (``data_prep.schema.tables.flag_rows``) instead of silently losing the value.
"""

from __future__ import annotations

import polars as pl

from data_prep.schema.tables import SPLIT_ALIASES, YEAR_MAX, YEAR_MIN

#: Timestamps must fall in [1970-01-01, 2100-01-01) UTC: epoch seconds outside it (often milliseconds
#: given as seconds) are reported, not read as the year 52000.
EPOCH_MAX_S = 4_102_444_800
_NAIVE_FORMATS = ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f")
_AWARE_FORMATS = ("%Y-%m-%dT%H:%M:%S%.f%#z", "%Y-%m-%d %H:%M:%S%.f%#z")


def parse_year(col: str = "year") -> pl.Expr:
    """A String column of years -> Int32: "1999", " 1999 ", "1999.0" parse; "" and null are null.

    Anything else (``"abc"``, ``"1999.5"``, ``"true"``, out of [YEAR_MIN, YEAR_MAX]) becomes null too:
    pair it with :func:`bad_year` to report those rows instead of silently losing the year.
    """
    s = pl.col(col).cast(pl.String).str.strip_chars()
    digits = s.str.extract(r"^(-?\d+)(?:\.0+)?$", 1).cast(pl.Int64, strict=False)
    return (
        pl.when(digits.is_between(YEAR_MIN, YEAR_MAX)).then(digits).otherwise(None).cast(pl.Int32).alias(col)
    )


def bad_year(col: str = "year") -> pl.Expr:
    """True where a non-empty year value does not parse as a plausible integer year."""
    s = pl.col(col).cast(pl.String).str.strip_chars()
    return s.is_not_null() & (s != "") & parse_year(col).is_null()


def _from_epoch_s(seconds: pl.Expr) -> pl.Expr:
    ok = seconds.is_between(0, EPOCH_MAX_S, closed="left")
    micros = pl.when(ok).then((seconds * 1_000_000).round()).otherwise(None).cast(pl.Int64)
    return pl.from_epoch(micros, time_unit="us").dt.replace_time_zone("UTC")


def parse_timestamp(col: str, dtype: pl.DataType) -> pl.Expr:
    """A timestamp column of type ``dtype`` -> ``Datetime("us", "UTC")``; unreadable values -> null.

    Read: epoch seconds (ints, floats or digit strings, as Reddit's ``created_utc``), ISO 8601 dates and
    date-times (``2022-11-03``, ``2022-11-03T10:20:30``, with ``Z`` or an offset; no offset = UTC),
    and Date / Datetime columns (naive = UTC). Values outside [1970, 2100) are null: pair it with
    :func:`bad_timestamp` to report them.
    """
    c = pl.col(col)
    if isinstance(dtype, pl.Datetime):
        t = c.dt.replace_time_zone("UTC") if dtype.time_zone is None else c.dt.convert_time_zone("UTC")
        t = t.dt.cast_time_unit("us")
    elif dtype == pl.Date:
        t = c.cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    elif dtype.is_numeric():
        t = _from_epoch_s(c.cast(pl.Float64))
    else:
        s = c.cast(pl.String).str.strip_chars()
        digits = s.str.extract(r"^(-?\d+(?:\.\d+)?)$", 1).cast(pl.Float64, strict=False)
        naive = [
            s.str.to_datetime(f, strict=False, time_unit="us").dt.replace_time_zone("UTC")
            for f in _NAIVE_FORMATS
        ]
        aware = [s.str.to_datetime(f, strict=False, time_unit="us", time_zone="UTC") for f in _AWARE_FORMATS]
        t = pl.coalesce(_from_epoch_s(digits), *naive, *aware)
    lo, hi = pl.datetime(1970, 1, 1, time_zone="UTC"), pl.datetime(2100, 1, 1, time_zone="UTC")
    return pl.when(t.is_between(lo, hi, closed="left")).then(t).otherwise(None).alias(col)


def bad_timestamp(col: str, dtype: pl.DataType) -> pl.Expr:
    """True where a non-empty timestamp does not parse (:func:`parse_timestamp`)."""
    text = pl.col(col).cast(pl.String).str.strip_chars()
    return pl.col(col).is_not_null() & (text != "") & parse_timestamp(col, dtype).is_null()


def normalize_split(col: str = "split") -> pl.Expr:
    """Lower-case, strip and map aliases (``val``, ``validation``, ``dev`` -> ``valid``); "" -> null."""
    s = pl.col(col).cast(pl.String).str.strip_chars().str.to_lowercase()
    s = pl.when(s == "").then(None).otherwise(s)
    return s.replace(SPLIT_ALIASES).alias(col)


#: what to write in a timestamp column (the hint of every timestamp error).
TIME_HINT = (
    "use epoch seconds (e.g. 1667260800) or an ISO date or date-time (e.g. 2022-11-01 or "
    "2022-11-01T08:00:00Z), or leave it empty"
)
