"""Reading user files: one decoding path, whose errors name the file, the line and the byte.

Python's own ``UnicodeDecodeError`` says "position 12" of an anonymous buffer; a user needs the file and
the line to find the byte. Every reader of user text (thread files, predictions, configs, eval logs,
profiles, ``remark ground`` input, the JSON files remark writes beside its outputs) goes through
:func:`read_text`, :func:`decode_utf8`, :func:`iter_jsonl`, :func:`read_json` or :func:`read_table`:

- bytes that are not UTF-8 raise ``InputError`` naming the file, the 1-based line and column and the
  byte (exit 2), never a ``UnicodeDecodeError``;
- a leading byte-order mark (what Windows editors and Excel write) is dropped;
- CRLF line ends read the same as LF (:func:`read_text` turns ``\\r\\n`` into ``\\n``; JSON, CSV and
  YAML parsers treat the ``\\r`` as whitespace).

:func:`read_json` and :func:`check_fields` validate what a JSON file (or one JSON-lines line) must hold:
``schema`` maps each required key to its type(s), ``optional`` the keys checked only when present. A type
is ``str``, ``int`` (not a bool), ``float`` (any number, not a bool), ``bool``, ``list``, ``dict`` or
``None`` (null); a tuple allows several; a nested mapping is an object with those required keys. The
error names the file, the line (for JSON lines) and the field (``grounding.match_mode``)::

    ds/stats.json, field 'n_requests': expected an integer, got a string ('12') (...)

``read_table(path)`` reads CSV, parquet, JSON (a list of records) or JSON lines by extension into a
polars frame; unreadable input raises ``InputError`` naming the file.

Weights are not text: :func:`safetensors_problem` checks a safetensors file's header (its length, its
JSON, each tensor's dtype, shape and byte range) without loading a tensor, so that a damaged file is
named before ``safetensors`` fails with "header too large" deep in a load.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from catalog.io.errors import InputError

if TYPE_CHECKING:
    import polars as pl

UTF8_HINT = "save it as UTF-8, e.g. with iconv -f latin1 -t utf-8"
BOM = b"\xef\xbb\xbf"

#: bytes per element of each safetensors dtype (``safetensors``' own table)
SAFETENSORS_DTYPES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
#: a safetensors header longer than this is refused by ``safetensors`` itself ("header too large")
SAFETENSORS_MAX_HEADER = 100_000_000
#: a field's type in a :func:`check_fields` schema: a type, a tuple of types, or a nested schema
FieldType = type | None | tuple[type | None, ...] | Mapping[str, Any]
Schema = Mapping[str, FieldType]


def decode_utf8(data: bytes, path: str | os.PathLike[str] | None, *, line_offset: int = 0) -> str:
    """``data`` decoded as UTF-8 (a leading byte-order mark is dropped), or ``InputError`` naming the
    1-based line (``line_offset`` + line within ``data``) and column of the first invalid byte.
    """
    skip = len(BOM) if data.startswith(BOM) else 0
    try:
        return str(memoryview(data)[skip:], "utf-8")
    except UnicodeDecodeError as err:
        raise utf8_error(data, err, path, line_offset=line_offset, offset=skip) from None


def utf8_error(
    data: bytes,
    err: UnicodeDecodeError,
    path: str | os.PathLike[str] | None,
    *,
    line_offset: int = 0,
    offset: int = 0,
) -> InputError:
    """The ``InputError`` for ``err`` raised while decoding ``data[offset:]`` (line and column of the bad
    byte; a byte-order mark does not count as a column)."""
    start = err.start + offset
    line = data.count(b"\n", 0, start) + 1 + line_offset
    line_start = data.rfind(b"\n", 0, start) + 1
    column = start - max(line_start, offset if line_start == 0 else 0) + 1
    return InputError(
        f"not UTF-8 text: byte 0x{data[start]:02x} at column {column} is not valid UTF-8 ({err.reason})",
        path=path,
        row=line,
        hint=UTF8_HINT,
    )


def read_bytes(path: str | os.PathLike[str], *, what: str = "file", hint: str | None = None) -> bytes:
    """The bytes of ``path``; a missing file or a directory raises ``InputError`` (``what`` names it)."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{what} is a directory, not a file", path=p, hint=hint)
    if not p.is_file():
        raise InputError(f"{what} not found", path=p, hint=hint or "check the path")
    return p.read_bytes()


def decode_text(data: bytes, path: str | os.PathLike[str] | None) -> str:
    """:func:`decode_utf8` with CRLF line ends read as LF (text a user may have saved on Windows)."""
    text = decode_utf8(data, path)
    return text.replace("\r\n", "\n") if "\r" in text else text


def read_text(path: str | os.PathLike[str], *, what: str = "file", hint: str | None = None) -> str:
    """The UTF-8 text of ``path`` with a byte-order mark dropped and CRLF line ends read as LF; a
    missing file, a directory or undecodable bytes raise ``InputError``."""
    return decode_text(read_bytes(path, what=what, hint=hint), Path(path))


def _type_name(t: FieldType) -> str:
    if isinstance(t, tuple):
        return " or ".join(_type_name(x) for x in t)
    if isinstance(t, Mapping):
        return "an object"
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        list: "a list",
        dict: "an object",
        None: "null",
        type(None): "null",
    }.get(t, getattr(t, "__name__", str(t)))


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    text = json.dumps(value, ensure_ascii=False, default=str)
    text = text if len(text) <= 40 else text[:37] + "..."
    kind = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "an object"}
    return f"{kind.get(type(value), type(value).__name__)} ({text})"


def _fits(value: Any, t: FieldType) -> bool:
    if isinstance(t, tuple):
        return any(_fits(value, x) for x in t)
    if isinstance(t, Mapping):
        return isinstance(value, dict)
    if t is None or t is type(None):
        return value is None
    if isinstance(value, bool):
        return t is bool
    if t is float:
        return isinstance(value, int | float)
    return isinstance(value, t)


def check_fields(
    obj: Any,
    schema: Schema,
    *,
    path: str | os.PathLike[str] | None,
    row: int | None = None,
    optional: Schema | None = None,
    prefix: str = "",
    hint: str | None = None,
) -> dict[str, Any]:
    """``obj`` itself when it is a JSON object holding every key of ``schema`` with a value of its type
    (and the keys of ``optional`` that it holds, each of its type); else ``InputError`` naming ``path``,
    ``row`` and the field (``prefix`` + key; nested schemas give ``outer.inner``).
    """
    if not isinstance(obj, dict):
        raise InputError(
            f"expected a JSON object, got {_json_kind(obj)}",
            path=path,
            row=row,
            field=prefix or None,
            hint=hint,
        )
    for required, table in ((True, schema), (False, optional or {})):
        for key, t in table.items():
            name = f"{prefix}.{key}" if prefix else key
            if key not in obj:
                if required:
                    raise InputError("missing", path=path, row=row, field=name, hint=hint)
                continue
            value = obj[key]
            if not _fits(value, t):
                raise InputError(
                    f"expected {_type_name(t)}, got {_json_kind(value)}",
                    path=path,
                    row=row,
                    field=name,
                    hint=hint,
                )
            if isinstance(t, Mapping):
                check_fields(value, t, path=path, row=row, prefix=name, hint=hint)
    return obj


def parse_json(
    text: str, path: str | os.PathLike[str] | None, *, row: int | None = None, hint: str | None = None
) -> Any:
    """``json.loads(text)``, or ``InputError`` naming the line (``row`` for one JSON-lines line) and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        line = row if row is not None else err.lineno
        raise InputError(
            f"not valid JSON ({err.msg} at column {err.colno})", path=path, row=line, hint=hint
        ) from None
    except RecursionError:
        raise InputError("not readable as JSON (nested too deeply)", path=path, row=row, hint=hint) from None


def read_json(
    path: str | os.PathLike[str],
    *,
    schema: Schema | None = None,
    optional: Schema | None = None,
    what: str = "file",
    hint: str | None = None,
) -> Any:
    """The JSON value in ``path`` (through :func:`read_text`). With ``schema`` (or ``optional``) it must be
    an object holding those fields (:func:`check_fields`); every problem is an ``InputError`` naming the
    file, the line or the field, with ``hint`` (what the file is, how to remake it)."""
    value = parse_json(read_text(path, what=what, hint=hint), Path(path), hint=hint)
    if schema is not None or optional is not None:
        check_fields(value, schema or {}, optional=optional, path=Path(path), hint=hint)
    return value


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


def iter_jsonl(
    path: str | os.PathLike[str],
    *,
    hint: str | None = None,
    schema: Schema | None = None,
    optional: Schema | None = None,
) -> Iterator[tuple[int, dict]]:
    """Non-blank lines of a JSON-lines file as ``(1-based line number, object)``.

    A missing file, a line that is not UTF-8, not valid JSON or not a JSON object raises ``InputError``
    naming the file and line (with ``hint``, e.g. the expected format); with ``schema`` / ``optional``
    each object's fields are checked too (:func:`check_fields`). A byte-order mark and CRLF line ends
    read as a clean file does.
    """
    p = Path(path)
    if p.is_dir():
        raise InputError("is a directory, not a file", path=p, hint=hint)
    if not p.is_file():
        raise InputError("file not found", path=p, hint=hint)
    with p.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            line = decode_utf8(raw, p, line_offset=line_no - 1)
            if not line.strip():
                continue
            obj = parse_json(line, p, row=line_no, hint=hint)
            if not isinstance(obj, dict):
                raise InputError("each line must be a JSON object", path=p, row=line_no, hint=hint)
            if schema is not None or optional is not None:
                check_fields(obj, schema or {}, optional=optional, path=p, row=line_no, hint=hint)
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
    Text formats: a byte-order mark and CRLF line ends give the frame a clean file gives; bytes that are
    not UTF-8 raise ``InputError`` naming the line and column (polars names neither).
    """
    import polars as pl  # here, not at the top: the atomic writers must not load polars (remark --help)

    p = Path(path)
    if p.is_dir():
        raise InputError("is a directory, not a file", path=p, hint="pass a table file")
    if not p.is_file():
        raise InputError("file not found", path=p, hint="check the path")
    fmt = format or table_format(p)
    source: Any = p
    try:
        if fmt in ("csv", "tsv"):
            return pl.read_csv(
                source,
                separator="\t" if fmt == "tsv" else ",",
                infer_schema=infer_schema,
                infer_schema_length=None,
            )
        if fmt == "parquet":
            return pl.read_parquet(source)
        if fmt in ("json", "jsonl"):
            data = p.read_bytes()
            source = io.BytesIO(data[len(BOM) :] if data.startswith(BOM) else data)  # polars rejects a BOM
            if fmt == "json":
                return pl.read_json(source, infer_schema_length=None)
            return pl.read_ndjson(source, infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError, ValueError) as err:
        if fmt != "parquet":
            decode_utf8(p.read_bytes(), p)  # raises, naming the line and column of the first bad byte
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"cannot read as {fmt}: {first}", path=p, hint="check the file's format") from err
    raise InputError(f"unknown table format {fmt!r}", path=p, hint="use csv, tsv, parquet, json or jsonl")


def safetensors_problem(path: str | Path) -> str | None:
    """Why ``path`` is not a readable safetensors file (None when its header is sound), without loading
    a tensor: the 8-byte header length, the header's JSON, and each tensor's dtype, shape and byte range
    (inside the file, its length = elements x dtype size, the ranges covering the data exactly)."""
    p = Path(path)
    size = p.stat().st_size
    with p.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return f"{p.name} is {size} bytes, shorter than a safetensors header"
        n = int.from_bytes(head, "little")
        if n > min(size - 8, SAFETENSORS_MAX_HEADER):
            return f"the safetensors header of {p.name} claims {n} bytes in a file of {size}"
        raw = fh.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return f"the safetensors header of {p.name} is not valid JSON"
    if not isinstance(header, dict):
        return f"the safetensors header of {p.name} is not a JSON object"
    data, covered = size - 8 - n, 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        ok = isinstance(info, dict) and info.get("dtype") in SAFETENSORS_DTYPES
        shape, offsets = (info.get("shape"), info.get("data_offsets")) if ok else (None, None)
        ok = ok and isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)
        ok = (
            ok
            and isinstance(offsets, list)
            and len(offsets) == 2
            and all(isinstance(o, int) for o in offsets)
        )
        if not ok or not 0 <= offsets[0] <= offsets[1] <= data:
            return f"the safetensors header of {p.name} has a damaged entry {name!r}"
        if offsets[1] - offsets[0] != math.prod(shape) * SAFETENSORS_DTYPES[info["dtype"]]:
            return f"the safetensors header of {p.name} gives tensor {name!r} a byte range that does not fit its shape"
        covered = max(covered, offsets[1])
    if covered != data:
        return (
            f"the safetensors header of {p.name} describes {covered} bytes of tensors, the file holds {data}"
        )
    return None
