"""Atomic outputs and table input shared by every package.

``atomic_write(path)`` and ``atomic_dir(path)`` yield a temporary path in the destination's folder
(same filesystem, so the final ``os.replace`` is atomic); on success it replaces ``path``, on any
exception it is removed and ``path`` is untouched. A killed run therefore leaves the old output or
none, never half a file. They yield a *path* (not a handle) so that any writer works: polars
``write_parquet``, ``json.dump`` through ``open``, safetensors, matplotlib.

``read_table(path)`` reads CSV, parquet, JSON (a list of records) or JSON lines by extension into a
polars frame; unreadable input raises ``InputError`` naming the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from catalog.errors import InputError

__all__ = ["TABLE_FORMATS", "atomic_dir", "atomic_write", "read_table", "table_format"]

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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary file path next to ``path``; move it onto ``path`` when the block succeeds.

    >>> import json, tempfile
    >>> out = Path(tempfile.mkdtemp()) / "a.json"
    >>> with atomic_write(out) as tmp:
    ...     _ = tmp.write_text(json.dumps({"ok": 1}))
    >>> json.loads(out.read_text())
    {'ok': 1}
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(name)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual permissions
    try:
        yield tmp
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary directory next to ``path``; it becomes ``path`` when the block succeeds.

    An existing ``path`` is first renamed aside and deleted after the swap (a directory cannot be
    replaced atomically while it has content); if the swap fails the old directory is put back.
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if dest.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=dest.parent))
        old.rmdir()
        os.replace(dest, old)
    try:
        os.replace(tmp, dest)
    except BaseException:
        if old is not None:
            os.replace(old, dest)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def iter_jsonl(path: str | os.PathLike[str], *, hint: str | None = None) -> Iterator[tuple[int, dict]]:
    """Non-blank lines of a JSON-lines file as ``(1-based line number, object)``.

    A line that is not valid JSON, or not a JSON object, raises ``InputError`` naming the file and line
    (with ``hint``, e.g. the expected format).
    """
    p = Path(path)
    with p.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
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
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"cannot read as {fmt}: {first}", path=p, hint="check the file's format") from err
    raise InputError(f"unknown table format {fmt!r}", path=p, hint="use csv, tsv, parquet, json or jsonl")
