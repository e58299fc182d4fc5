"""Reading JSON lines, CSV and parquet with errors that name the file and the 1-based line or row.

Bytes are decoded by ``catalog.io.files`` (invalid UTF-8 names the line and column; a byte-order mark
is dropped; CRLF reads as LF), CSV and parquet read by its ``read_table``.

Flat JSON lines go through polars (``read_ndjson`` with every field read as a string, so a year that
is an int on one line and a string on the next, or a nested list, never breaks the read); only when
polars rejects the file are the lines parsed one by one to find and report the bad ones. Nested
formats (ProtoQA's answer dicts, ReDial's conversations) are read with :func:`iter_json_lines`.
A ``.json`` file is read as JSON lines too (Rank-GRPO-style dumps use that suffix for them).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from catalog.io.errors import InputError
from catalog.io.files import BOM, decode_utf8, read_table, table_format
from catalog.normalize import split_title_year
from data_prep.schema import Report, flag_rows

SKIP_HINT = "fix or delete the line, or pass --skip-bad-rows to skip it"


def _check_exists(path: Path) -> None:
    if not path.is_file():
        raise InputError("file not found", path=path, hint="check the --input path")


def iter_json_lines(path: str | Path, report: Report) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line; malformed lines raise or are skipped."""
    path = Path(path)
    _check_exists(path)
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            obj, problem = _parse_line(raw)
            if problem is not None:
                report.bad(
                    InputError(problem, path=path, row=line_no, hint=SKIP_HINT), reason="malformed_json"
                )
                continue
            yield line_no, obj


def _parse_line(raw: bytes) -> tuple[Any, str | None]:
    """One JSON-lines line (bytes, a leading BOM allowed) -> (object, None) or (None, what is wrong)."""
    try:
        obj = json.loads(decode_utf8(raw, None))
    except InputError as err:
        return None, err.message
    except json.JSONDecodeError as err:
        return None, f"not valid JSON ({err.msg}); each line must be one JSON object"
    if not isinstance(obj, dict):
        return None, f"expected a JSON object, found {type(obj).__name__}"
    return obj, None


#: JSON kinds a field may have: a key of :data:`KINDS` for each field a reader checks
Kinds = dict[str, tuple[str, ...]]
#: candidate test on the field's text as polars renders it when read as a string (nested values become
#: JSON text, numbers and booleans their literal); the real kind is then read from the line itself
KINDS: dict[str, pl.Expr] = {
    "list": pl.col("_t").str.starts_with("["),
    "object": pl.col("_t").str.starts_with("{"),
    "number": pl.col("_t").str.contains(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$"),
    "boolean": pl.col("_t").is_in(["true", "false"]),
}


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {list: "list", dict: "object", str: "string"}.get(
        type(value), "null" if value is None else "other"
    )


def check_json_kinds(
    df: pl.DataFrame, lines: list[bytes], kinds: Kinds, report: Report, path: str | Path
) -> pl.DataFrame:
    """Report rows whose JSON value has a kind its field does not allow (a title that is a list, a
    ``seen`` that is a number): the string read would otherwise take ``["Moon"]`` or ``5`` as text.

    Vectorised: the text of each field selects the few rows that *could* hold a wrong kind, and only
    those lines are parsed again to read the value's real kind (a string "[REC]" stays a title).
    """
    for name, allowed in kinds.items():
        if name not in df.columns:
            continue
        text = pl.col(name).str.strip_chars().alias("_t")
        other = pl.any_horizontal([e for kind, e in KINDS.items() if kind not in allowed] or [pl.lit(False)])
        # any text may be a string; without "string" allowed, text that looks like no allowed kind is suspect
        fits = pl.any_horizontal([KINDS[kind] for kind in allowed if kind in KINDS] or [pl.lit(False)])
        suspect = other if "string" in allowed else other | ~fits
        rows = df.select(text, "row").filter(suspect.fill_null(False))["row"].to_list()
        wrong = {}
        for row in rows:
            found = _kind(json.loads(lines[row - 1]).get(name))
            if found not in allowed and found != "null":
                wrong[row] = found
        if not wrong:
            continue
        want = " or ".join(allowed)
        df = df.with_columns(
            pl.col("row").replace_strict(wrong, default=None, return_dtype=pl.String).alias("_kind")
        )
        df = flag_rows(
            df,
            pl.col("_kind").is_not_null(),
            report,
            reason=f"bad_type_{name}",
            field=name,
            message=f"is a JSON {{text}}, expected a {want}",
            path=str(path),
            show="_kind",
            hint=SKIP_HINT,
        ).drop("_kind")
    return df


def read_json_lines_frame(
    path: str | Path, fields: list[str], report: Report, *, kinds: Kinds | None = None
) -> pl.DataFrame:
    """A JSON-lines file -> frame with ``fields`` as strings (nested values as JSON text) + file, row.

    Absent keys read as null (callers report them as missing fields). ``kinds`` names the JSON kinds
    (``string``, ``number``, ``list``, ``object``, ``boolean``) each field may have; a value of another
    kind is a bad row (:func:`check_json_kinds`).
    """
    path = Path(path)
    _check_exists(path)
    data = path.read_bytes().removeprefix(BOM)  # polars rejects a byte-order mark; CRLF it reads
    lines = data.split(b"\n")
    line_nos = [i for i, raw in enumerate(lines, 1) if raw.strip()]
    schema = dict.fromkeys(fields, pl.String)
    try:
        df = pl.read_ndjson(io.BytesIO(data), schema=schema)
        if df.height != len(line_nos):
            raise pl.exceptions.ComputeError("row count differs from the non-blank line count")
    except (pl.exceptions.PolarsError, ValueError) as err:
        good, good_nos = [], []
        for line_no in line_nos:
            _, problem = _parse_line(lines[line_no - 1])
            if problem is None:
                good.append(lines[line_no - 1])
                good_nos.append(line_no)
            else:
                report.bad(
                    InputError(problem, path=path, row=line_no, hint=SKIP_HINT), reason="malformed_json"
                )
        if len(good) == len(line_nos):  # polars failed for a reason we cannot pin to a line
            raise InputError(f"could not read the file: {err}", path=path) from err
        line_nos = good_nos
        df = (
            pl.read_ndjson(io.BytesIO(b"\n".join(good)), schema=schema)
            if good
            else pl.DataFrame(schema=schema)
        )
    df = df.with_columns(pl.lit(str(path)).alias("file"), pl.Series("row", line_nos, dtype=pl.UInt32))
    return check_json_kinds(df, lines, kinds, report, path) if kinds else df


def read_rows(
    path: str | Path, fields: list[str], report: Report, *, kinds: Kinds | None = None
) -> pl.DataFrame:
    """Read JSON lines, CSV/TSV or parquet (by extension) with provenance columns ``file`` and ``row``.

    JSON lines read ``fields`` as strings, with the JSON kinds of ``kinds`` checked; CSV cells are strings and ``row`` counts the header as row 1,
    as a spreadsheet shows it; parquet keeps its types and ``row`` is the 1-based row index. CSV and
    parquet are read by ``catalog.io.files.read_table``.
    """
    path = Path(path)
    fmt = table_format(path)
    if fmt in ("jsonl", "json"):
        return read_json_lines_frame(path, fields, report, kinds=kinds)
    df = read_table(path, format=fmt, infer_schema=False)
    first_row = 2 if fmt in ("csv", "tsv") else 1
    return df.with_columns(
        pl.lit(str(path)).alias("file"),
        (pl.int_range(pl.len(), dtype=pl.UInt32) + first_row).alias("row"),
    )


def parse_string_list(df: pl.DataFrame, col: str, report: Report, path: str | Path | None) -> pl.DataFrame:
    """Column ``col`` -> List(String). Strings hold a JSON list (``["A (1999)", "B"]``) or "|"-separated
    values (``A (1999)|B``, handy in CSV); null and "" are the empty list. Parsed once per distinct value.
    """
    dtype = df.schema[col]
    if isinstance(dtype, pl.List) and not isinstance(dtype.inner, pl.List | pl.Struct | pl.Array):
        return df.with_columns(pl.col(col).cast(pl.List(pl.String)).fill_null([]))
    if dtype not in (pl.String, pl.Null):  # a typed input (parquet) with numbers or nested lists here
        raise InputError(
            f"the column holds {dtype} values; expected a list of titles",
            path=path,
            field=col,
            hint='write a list of strings, e.g. ["Arrival (2016)", "Moon (2009)"], or A|B',
        )
    df = df.with_columns(pl.col(col).cast(pl.String))
    uniq = df.select(pl.col(col).unique().drop_nulls())[col].to_list()
    values, problems = [], []
    for text in uniq:
        items, problem = _string_list(text)
        values.append(items)
        problems.append(problem)
    table = pl.DataFrame(
        {col: uniq, "_list": values, "_problem": problems},
        schema={col: pl.String, "_list": pl.List(pl.String), "_problem": pl.String},
    )
    df = df.join(table, on=col, how="left", maintain_order="left")
    df = flag_rows(
        df,
        pl.col("_problem").is_not_null(),
        report,
        reason=f"bad_{col}",
        field=col,
        message="{text}",
        path=None if path is None else str(path),
        show="_problem",
        hint='write a JSON list of strings, e.g. ["Arrival (2016)", "Moon (2009)"], or A|B',
    )
    return df.with_columns(pl.col("_list").fill_null([]).alias(col)).drop("_list", "_problem")


def _string_list(text: str) -> tuple[list[str] | None, str | None]:
    stripped = text.strip()
    if not stripped:
        return [], None
    if not stripped.startswith("["):
        return [p.strip() for p in stripped.split("|") if p.strip()], None
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as err:
        return None, f"not a valid JSON list ({err.msg})"
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        return None, "expected a list of strings"
    return [str(v).strip() for v in value if str(v).strip()], None


def split_years_from_titles(df: pl.DataFrame) -> pl.DataFrame:
    """Where ``year`` is null and ``title`` ends with "(YYYY)", move the year into ``year``.

    Uses ``catalog.normalize.split_title_year`` once per distinct such title, so a threads file whose
    titles read "Arrival (2016)" grounds the same as one with a separate year column.
    """
    candidates = (
        df.lazy()
        .filter(pl.col("year").is_null() & pl.col("title").str.contains(r"\(\s*\d{4}\s*\)\s*$"))
        .select(pl.col("title").unique())
        .collect()["title"]
        .to_list()
    )
    if not candidates:
        return df
    split = [split_title_year(t) for t in candidates]
    table = pl.DataFrame(
        {"title": candidates, "_t": [t for t, _ in split], "_y": [y for _, y in split]},
        schema={"title": pl.String, "_t": pl.String, "_y": pl.Int32},
    )
    df = df.join(table, on="title", how="left", maintain_order="left")
    use = pl.col("year").is_null() & pl.col("_y").is_not_null()
    return df.with_columns(
        pl.when(use).then(pl.col("_t")).otherwise(pl.col("title")).alias("title"),
        pl.when(use).then(pl.col("_y")).otherwise(pl.col("year")).alias("year"),
    ).drop("_t", "_y")


def decode_json_column(
    df: pl.DataFrame, col: str, dtype: pl.DataType, report: Report, path: str | Path, *, hint: str
) -> pl.DataFrame:
    """Decode a String column of JSON text to ``dtype`` (vectorised); report the rows that do not fit.

    Non-string columns (parquet) are cast. Only when the vectorised decode fails are the values tried
    one by one, to name the first bad row.
    """
    if df.schema[col] != pl.String:
        try:
            return df.with_columns(pl.col(col).cast(dtype))
        except pl.exceptions.PolarsError as err:
            raise InputError(f"cannot read as {dtype}: {err}", path=path, field=col, hint=hint) from err
    try:
        return df.with_columns(pl.col(col).str.json_decode(dtype))
    except pl.exceptions.PolarsError:
        pass
    ok = []
    for value in df[col].to_list():
        try:
            pl.Series([value], dtype=pl.String).str.json_decode(dtype)
            ok.append(True)
        except pl.exceptions.PolarsError:
            ok.append(value is None)
    df = df.with_columns(pl.Series("_ok", ok))
    df = flag_rows(
        df,
        ~pl.col("_ok"),
        report,
        reason=f"bad_{col}",
        field=col,
        message="{value} does not have the expected shape",
        path=str(path),
        show=col,
        hint=hint,
    ).drop("_ok")
    return df.with_columns(pl.col(col).str.json_decode(dtype))
