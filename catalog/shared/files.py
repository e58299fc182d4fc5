"""Reading user files: one decoding path, whose errors name the file, the line and the byte.

Python's own ``UnicodeDecodeError`` says "position 12" of an anonymous buffer; a user needs the file and
the line to find the byte. Every reader of user text (thread files, predictions, configs, eval logs,
profiles, ``remark ground`` input) goes through :func:`read_text`, :func:`decode_utf8`, :func:`iter_jsonl`
or :func:`read_table`.

``read_table(path)`` reads CSV, parquet, JSON (a list of records) or JSON lines by extension into a
polars frame; unreadable input raises ``InputError`` naming the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from catalog.shared.errors import InputError

if TYPE_CHECKING:
    import polars as pl

UTF8_HINT = "save it as UTF-8, e.g. with iconv -f latin1 -t utf-8"


def decode_utf8(data: bytes, path: str | os.PathLike[str] | None, *, line_offset: int = 0) -> str:
    """``data`` decoded as UTF-8 (a leading byte-order mark is dropped), or ``InputError`` naming the
    1-based line (``line_offset`` + line within ``data``) and column of the first invalid byte.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise utf8_error(data, err, path, line_offset=line_offset) from None


def utf8_error(
    data: bytes, err: UnicodeDecodeError, path: str | os.PathLike[str] | None, *, line_offset: int = 0
) -> InputError:
    """The ``InputError`` for ``err`` raised while decoding ``data`` (line and column of the bad byte)."""
    line = data.count(b"\n", 0, err.start) + 1 + line_offset
    column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
    return InputError(
        f"not UTF-8 text: byte 0x{data[err.start]:02x} at column {column} is not valid UTF-8 ({err.reason})",
        path=path,
        row=line,
        hint=UTF8_HINT,
    )


def read_text(path: str | os.PathLike[str], *, what: str = "file", hint: str | None = None) -> str:
    """The UTF-8 text of ``path``; a missing file, a directory or undecodable bytes raise ``InputError``."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{what} is a directory, not a file", path=p, hint=hint)
    if not p.is_file():
        raise InputError(f"{what} not found", path=p, hint=hint or "check the path")
    return decode_utf8(p.read_bytes(), p)


#: extension (lower case, without the dot) -> format name understood by :func:`read_table`.
TABLE_FORMATS: dict[str, str] = {
    "csv": "csv",
    "tsv": "tsv",
    "parquet": "parquet",
    "pq": "parquet",
    "json": "json",
    "jsonl": "jsonl",
    "ndjson": "jsonl",
}


def iter_jsonl(path: str | os.PathLike[str], *, hint: str | None = None) -> Iterator[tuple[int, dict]]:
    """Non-blank lines of a JSON-lines file as ``(1-based line number, object)``.

    A missing file, a line that is not UTF-8, not valid JSON or not a JSON object raises ``InputError``
    naming the file and line (with ``hint``, e.g. the expected format).
    """
    p = Path(path)
    if not p.is_file():
        raise InputError("file not found", path=p, hint=hint)
    with p.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            line = decode_utf8(raw, p, line_offset=line_no - 1)
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"not valid JSON ({err.msg})", path=p, row=line_no, hint=hint) from None
            if not isinstance(obj, dict):
                raise InputError("each line must be a JSON object", path=p, row=line_no, hint=hint)
            yield line_no, obj


def table_format(path: str | os.PathLike[str]) -> str:
    """The format :func:`read_table` would use for ``path`` (by extension), or raise ``InputError``."""
    ext = Path(path).suffix.lower().lstrip(".")
    if ext not in TABLE_FORMATS:
        raise InputError(
            f"cannot tell the table format from the extension {Path(path).suffix!r}",
            path=path,
            hint="use one of ." + ", .".join(TABLE_FORMATS),
        )
    return TABLE_FORMATS[ext]


def read_table(
    path: str | os.PathLike[str], *, format: str | None = None, infer_schema: bool = True
) -> pl.DataFrame:
    """Read a CSV/TSV, parquet, JSON (list of records) or JSON-lines file into a polars frame.

    ``format`` overrides the extension ("csv", "tsv", "parquet", "json", "jsonl"). With
    ``infer_schema=False`` CSV columns are read as strings (ids with leading zeros, years to validate).
    """
    import polars as pl  # here, not at the top: the atomic writers must not load polars (remark --help)

    p = Path(path)
    if not p.is_file():
        raise InputError("file not found", path=p, hint="check the path")
    fmt = format or table_format(p)
    try:
        if fmt in ("csv", "tsv"):
            return pl.read_csv(
                p,
                separator="\t" if fmt == "tsv" else ",",
                infer_schema=infer_schema,
                infer_schema_length=None,
            )
        if fmt == "parquet":
            return pl.read_parquet(p)
        if fmt == "json":
            return pl.read_json(p, infer_schema_length=None)
        if fmt == "jsonl":
            return pl.read_ndjson(p, infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError, ValueError) as err:
        if fmt != "parquet" and "utf-8" in str(err).lower():
            decode_utf8(p.read_bytes(), p)  # raises, naming the line and column of the first bad byte
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"cannot read as {fmt}: {first}", path=p, hint="check the file's format") from err
    raise InputError(f"unknown table format {fmt!r}", path=p, hint="use csv, tsv, parquet, json or jsonl")
