"""Column schemas of the threads and pooled tables, and validation of a threads frame.

A *threads* frame has one row per responder mention (docs/architecture.md, "data_prep/"). Every reader produces
one, so pooling never sees a source format. Besides the schema columns a threads frame may carry the
provenance columns ``file`` (input path) and ``row`` (1-based line or row in that file), so errors found
while pooling still name the line they came from, and an optional ``timestamp`` (UTC; what time-based
splits read, ``data_prep.timesplit``).

Bad input is reported through a :class:`Report`: by default the first bad row raises
``catalog.errors.InputError`` naming file, row and field; with ``skip=True`` (``--skip-bad-rows``) bad
rows are dropped and counted by reason, and the counts land in ``stats.json``. Checks are vectorised:
a boolean expression selects the bad rows, and only the first one is formatted.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from catalog.errors import InputError

MESSAGE = pl.Struct({"role": pl.String, "content": pl.String})
MESSAGES = pl.List(MESSAGE)
IDS = pl.List(pl.String)

#: The threads frame (one row per responder mention). ``year`` may be null; ``split`` null = by hash.
THREADS_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "prompt": MESSAGES,
    "responder_id": pl.String(),
    "title": pl.String(),
    "year": pl.Int32(),
    "seen": IDS,
    "split": pl.String(),
}
#: Optional provenance columns of a threads frame.
PROVENANCE_SCHEMA: dict[str, pl.DataType] = {"file": pl.String(), "row": pl.UInt32()}
#: Optional data columns of a threads frame, kept when the input has them.
OPTIONAL_SCHEMA: dict[str, pl.DataType] = {"timestamp": pl.Datetime("us", "UTC")}

#: ``requests.parquet``: the pooled table of docs/architecture.md, in this column order.
REQUESTS_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "prompt": MESSAGES,
    "seen": IDS,
    "responders": pl.List(IDS),
    "n_responders": pl.UInt32(),
    "union": IDS,
    "counts": pl.List(pl.UInt32),
    "ungrounded": IDS,
    "split": pl.String(),
}

#: ``responder_rows.parquet``: Rank-GRPO's view, one row per (request, responder).
RESPONDER_ROWS_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "responder_id": pl.String(),
    "responder_index": pl.UInt32(),
    "items": IDS,
    **{k: v for k, v in REQUESTS_SCHEMA.items() if k != "request_id"},
}

SPLITS = ("train", "valid", "test")
SPLIT_ALIASES = {"val": "valid", "validation": "valid", "dev": "valid", "training": "train", "eval": "test"}
DOMAINS = ("movie", "book", "music", "answer")

#: Years outside this range are treated as garbage (a typo or a wrong column), not as data.
YEAR_MIN, YEAR_MAX = 1, 2100
#: Timestamps must fall in [1970-01-01, 2100-01-01) UTC: epoch seconds outside it (often milliseconds
#: given as seconds) are reported, not read as the year 52000.
EPOCH_MAX_S = 4_102_444_800
_NAIVE_FORMATS = ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f")
_AWARE_FORMATS = ("%Y-%m-%dT%H:%M:%S%.f%#z", "%Y-%m-%d %H:%M:%S%.f%#z")


@dataclass
class Threads:
    """What every reader returns: the threads frame, the source's own catalog (or None), and meta.

    ``meta`` holds at least ``source``, ``domain``, ``has_years`` and ``instruction_included``.
    """

    frame: pl.DataFrame
    catalog: Any  # catalog.Catalog or None (typed loosely: readers build it lazily)
    meta: dict[str, Any]


@dataclass
class Report:
    """Collects what preparation skipped (with ``skip=True``) and what it noticed along the way.

    ``skipped`` counts dropped rows by reason; ``examples`` keeps the first message of each reason;
    ``notes`` holds counts that are not errors (e.g. mentions of seen items removed from the union).
    """

    skip: bool = False
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    notes: Counter = field(default_factory=Counter)

    def bad(self, error: InputError, *, reason: str, n: int = 1) -> None:
        """Raise ``error``, or (skip mode) count ``n`` bad rows under ``reason``."""
        if not self.skip:
            raise error
        self.skipped[reason] += n
        self.examples.setdefault(reason, str(error))

    def to_dict(self) -> dict[str, Any]:
        return {
            "skip_bad_rows": self.skip,
            "skipped": dict(sorted(self.skipped.items())),
            "skipped_examples": dict(sorted(self.examples.items())),
            "notes": dict(sorted(self.notes.items())),
        }


def flag_rows(
    df: pl.DataFrame,
    bad: pl.Expr,
    report: Report,
    *,
    reason: str,
    field: str | None,
    message: str,
    path: str | None = None,
    hint: str | None = None,
    show: str | None = None,
) -> pl.DataFrame:
    """Drop (or raise on) the rows of ``df`` where the boolean expression ``bad`` is true.

    The error names the first bad row through the ``file``/``row`` columns when present (else ``path``).
    ``message`` may contain ``{value}`` (repr) or ``{text}`` (str) of column ``show`` in the first bad
    row, and ``{n}``, the number of bad rows.
    """
    mask = df.select(bad.fill_null(False).alias("_bad"))["_bad"]
    n_bad = int(mask.sum())
    if n_bad == 0:
        return df
    first = df.filter(mask).row(0, named=True)
    value = first.get(show) if show else None
    where_file = first.get("file", path) or path
    error = InputError(
        message.format(value=_short(value), text=value, n=n_bad),
        path=where_file,
        row=first.get("row"),
        field=field,
        hint=hint,
    )
    report.bad(error, reason=reason, n=n_bad)
    return df.filter(~mask)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


ROLES = ("system", "user", "assistant")


def _messages_from_text(text: str) -> tuple[list[dict[str, str]] | None, str | None]:
    """One prompt value -> (messages, None) or (None, what is wrong).

    A string that holds a JSON list of objects (``[{"role": ..., "content": ...}, ...]``, as JSON lines
    and CSV cells carry chat prompts) is a message list; any other string is one user message.
    """
    stripped = text.strip()
    if not stripped:
        return None, "empty prompt"
    if not (stripped.startswith("[") and stripped[1:].lstrip().startswith("{")):
        return [{"role": "user", "content": text}], None
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as err:
        return None, f"looks like a JSON message list but does not parse ({err.msg})"
    return _check_messages(value)


def _check_messages(value: Any) -> tuple[list[dict[str, str]] | None, str | None]:
    if not isinstance(value, list) or not value:
        return None, "a chat prompt must be a non-empty list of {role, content} messages"
    out = []
    for i, m in enumerate(value, 1):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in ROLES:
            return None, f"message {i} needs a role in {list(ROLES)} and a string content"
        out.append({"role": m["role"], "content": m["content"]})
    return out, None


def normalize_prompt(df: pl.DataFrame, report: Report, path: str | None = None) -> pl.DataFrame:
    """Bring column ``prompt`` to a list of {role, content} messages; report malformed prompts.

    Strings are parsed once per distinct prompt (a request's mentions share it), not once per row.
    """
    dtype = df.schema["prompt"]
    if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
        names = {f.name for f in dtype.inner.fields}
        if not {"role", "content"} <= names:
            raise InputError(
                f"chat messages need fields role and content, found {sorted(names)}",
                path=path,
                field="prompt",
            )
        df = df.with_columns(
            pl.col("prompt").list.eval(pl.struct(pl.element().struct.field("role", "content")))
        )
        df = flag_rows(
            df,
            pl.col("prompt").is_null()
            | (pl.col("prompt").list.len() == 0)
            | pl.col("prompt")
            .list.eval(
                ~pl.element().struct.field("role").is_in(ROLES)
                | pl.element().struct.field("content").is_null()
            )
            .list.any(),
            report,
            reason="bad_prompt",
            field="prompt",
            message="a chat prompt must be a non-empty list of messages with a role in "
            + f"{list(ROLES)} and a content",
            path=path,
        )
        return df.with_columns(pl.col("prompt").cast(MESSAGES))
    df = df.with_columns(pl.col("prompt").cast(pl.String))
    uniq = df.select(pl.col("prompt").unique().drop_nulls())["prompt"].to_list()
    parsed = [_messages_from_text(t) for t in uniq]
    table = pl.DataFrame(
        {
            "prompt": uniq,
            "_messages": [m for m, _ in parsed],
            "_problem": [p for _, p in parsed],
        },
        schema={"prompt": pl.String, "_messages": MESSAGES, "_problem": pl.String},
    )
    df = df.join(table, on="prompt", how="left", maintain_order="left")
    df = flag_rows(
        df,
        pl.col("prompt").is_null(),
        report,
        reason="missing_prompt",
        field="prompt",
        message="missing prompt",
        path=path,
        hint="every row needs the request text or its chat messages",
    )
    df = flag_rows(
        df,
        pl.col("_problem").is_not_null(),
        report,
        reason="bad_prompt",
        field="prompt",
        message="{text}",
        path=path,
        show="_problem",
    )
    return df.with_columns(pl.col("_messages").alias("prompt")).drop("_messages", "_problem")


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
                f"timestamps of type {dtype} cannot be read", path=path, field="timestamp", hint=_TIME_HINT
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
            hint=_TIME_HINT,
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


_TIME_HINT = (
    "use epoch seconds (e.g. 1667260800) or an ISO date or date-time (e.g. 2022-11-01 or "
    "2022-11-01T08:00:00Z), or leave it empty"
)
