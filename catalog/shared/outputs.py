"""Atomic, owned outputs and table input shared by every package.

``atomic_write(path)`` and ``atomic_dir(path, kind)`` yield a temporary path in the destination's folder
(same filesystem, so the final ``os.replace`` is atomic); on success it replaces ``path``, on any
exception it is removed and ``path`` is untouched. A killed run therefore leaves the old output or
none, never half a file or a folder mixing two runs. They yield a *path* (not a handle) so that any
writer works: polars ``write_parquet``, ``json.dump`` through ``open``, safetensors, matplotlib.

Output folders are *owned*: ``atomic_dir`` writes ``.remark-output.json`` (``{"kind", "format",
"remark_version"}``) into the temporary folder before the swap, and only replaces an existing folder that
is empty or carries the marker of the same ``kind`` (the same command's earlier output). Anything else is
refused with ``InputError`` before any work is done (``check_output_dir``), unless ``force=True`` (the
CLI's ``--force``), which may replace a foreign folder but never one of the command's ``inputs``: a
destination that equals, contains or lies inside an input is always refused. Every command's
multi-file output goes through here (``remark prep``, ``remark eval score|run``, training's ``best/`` and
``final/``, the demo's report), so no command deletes what it did not write.

Temporary names carry the writer's host and pid (``.NAME.<host>.<pid>.<random>.tmp`` / ``.old``). Before
each write, leftovers of ``NAME`` from writers that are dead on this host are cleaned: a ``.tmp`` is
removed; an ``.old`` (the previous output, moved aside just before the swap) is put back when ``NAME``
is missing (the writer died between the two renames) and removed otherwise. Leftovers whose owner is
unknown (another host, or an older remark) are reported with a ``StaleOutputWarning``, never removed.

``read_table(path)`` reads CSV, parquet, JSON (a list of records) or JSON lines by extension into a
polars frame; unreadable input raises ``InputError`` naming the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from catalog.shared.errors import InputError
from catalog.text import decode_utf8

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "OUTPUT_MARKER",
    "TABLE_FORMATS",
    "StaleOutputWarning",
    "atomic_dir",
    "atomic_write",
    "check_inputs",
    "check_output_dir",
    "clean_stale",
    "output_kind",
    "read_table",
    "table_format",
]

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

#: the ownership marker inside every folder written by :func:`atomic_dir`.
OUTPUT_MARKER = ".remark-output.json"
MARKER_FORMAT = 1

PathLike = str | os.PathLike[str]


class StaleOutputWarning(UserWarning):
    """A temporary file or folder left by an interrupted write that remark could not safely remove."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def _prefix(dest: Path) -> str:
    """Prefix of this process's temporary names for ``dest``: ``.NAME.<host>.<pid>.``."""
    return f".{dest.name}.{_host()}.{os.getpid()}."


def _remark_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("remark")
    except PackageNotFoundError:
        return "unknown"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def clean_stale(path: PathLike) -> list[str]:
    """Clean what interrupted writes of ``path`` left beside it; returns one line per action.

    Ours (``.NAME.<host>.<pid>.<random>.tmp|.old`` with this host and a dead pid): ``.tmp`` removed;
    ``.old`` restored as ``NAME`` when ``NAME`` is missing, else removed. Others named like temporary
    outputs of ``NAME`` (another host, a live pid, or no owner recorded) are left; those without a live
    owner on this host are reported with a :class:`StaleOutputWarning`.
    """
    dest = Path(path)
    parent = dest.parent
    if not parent.is_dir():
        return []
    ours = re.compile(rf"^\.{re.escape(dest.name)}\.([A-Za-z0-9-]+)\.(\d+)\.[^.]+\.(tmp|old)$")
    legacy = re.compile(rf"^\.{re.escape(dest.name)}\.[^.]+\.(tmp|old)$")
    done: list[str] = []
    for entry in sorted(parent.iterdir()):
        m = ours.match(entry.name)
        if m is not None:
            host, pid, suffix = m.group(1), int(m.group(2)), m.group(3)
            if host == _host() and _pid_alive(pid):
                continue  # a writer at work (or a reused pid: leave it)
            if host != _host():
                warnings.warn(
                    f"{entry}: temporary output of a writer on host {host!r}; remove it if that writer is "
                    "no longer running",
                    StaleOutputWarning,
                    stacklevel=3,
                )
                continue
            if suffix == "old" and not dest.exists() and not dest.is_symlink():
                os.replace(entry, dest)
                done.append(f"restored {dest} from {entry.name} (a write was interrupted mid-swap)")
            else:
                _remove(entry)
                done.append(f"removed {entry} (left by an interrupted write, pid {pid})")
        elif legacy.match(entry.name):
            warnings.warn(
                f"{entry}: left by an interrupted write of an older remark (no owner recorded); "
                "remove it when no remark command is writing "
                f"{dest.name}",
                StaleOutputWarning,
                stacklevel=3,
            )
    return done


def check_inputs(dest: PathLike, inputs: Iterable[PathLike | None], *, field: str = "--out") -> None:
    """Refuse an output path that equals, contains or lies inside one of ``inputs`` (None entries skipped)."""
    d = Path(os.path.abspath(dest)).resolve()
    for item in inputs:
        if item is None:
            continue
        i = Path(os.path.abspath(item)).resolve()
        if d == i:
            how = "is"
        elif i.is_relative_to(d):
            how = "contains"
        elif d.is_relative_to(i):
            how = "lies inside"
        else:
            continue
        raise InputError(
            f"the output {how} the input {item}; writing it would destroy the input",
            path=dest,
            field=field,
            hint="write the output to a new path outside every input; --force does not override this",
        )


def output_kind(path: PathLike) -> str | None:
    """The ``kind`` in ``path``'s ownership marker, or None when it has no readable marker."""
    marker = Path(path) / OUTPUT_MARKER
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) else None


def check_output_dir(
    path: PathLike,
    kind: str,
    *,
    inputs: Iterable[PathLike | None] = (),
    force: bool = False,
    field: str = "--out",
) -> None:
    """Raise ``InputError`` unless :func:`atomic_dir` may write ``path`` as an output of ``kind``.

    Allowed: a new path, an empty folder, or a folder whose marker says ``kind``; with ``force`` any
    folder. Never: a path that is, contains or lies inside an input; a file (not a folder). Call it
    before the work starts, so that a refusal costs nothing; ``atomic_dir`` checks again.
    """
    dest = Path(path)
    check_inputs(dest, inputs, field=field)
    if not dest.exists():
        return
    if not dest.is_dir():
        raise InputError(
            "exists and is not a folder", path=dest, field=field, hint="pass a new or empty folder"
        )
    found = output_kind(dest)
    if found == kind or force or not any(dest.iterdir()):
        return
    what = f"the output of {found!r}" if found else "a folder that remark did not write"
    raise InputError(
        f"refusing to replace {what} (this command writes {kind!r} outputs)",
        path=dest,
        field=field,
        hint="pass a new or empty folder, or --force to replace this one and everything in it",
    )


@contextlib.contextmanager
def atomic_write(path: PathLike, *, inputs: Iterable[PathLike | None] = ()) -> Iterator[Path]:
    """Yield a temporary file path next to ``path``; move it onto ``path`` when the block succeeds.

    ``inputs``: refuse (``InputError``) when ``path`` is one of them or lies inside one.

    >>> import json, tempfile
    >>> out = Path(tempfile.mkdtemp()) / "a.json"
    >>> with atomic_write(out) as tmp:
    ...     _ = tmp.write_text(json.dumps({"ok": 1}))
    >>> json.loads(out.read_text())
    {'ok': 1}
    """
    dest = Path(path)
    check_inputs(dest, inputs)
    dest.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(dest)
    fd, name = tempfile.mkstemp(prefix=_prefix(dest), suffix=".tmp", dir=dest.parent)
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
def atomic_dir(
    path: PathLike,
    kind: str = "output",
    *,
    inputs: Iterable[PathLike | None] = (),
    force: bool = False,
    field: str = "--out",
) -> Iterator[Path]:
    """Yield a temporary folder next to ``path``; it becomes ``path``, with its marker, when the block succeeds.

    ``kind`` names what writes it (``"prep"``, ``"eval-score"``, ...): an existing ``path`` is replaced only
    when it is empty or an earlier output of the same kind, or with ``force``; ``inputs`` are never
    replaced (see :func:`check_output_dir`, called on entry and again just before the swap). The existing
    folder is renamed aside, the new one renamed in, then the old one deleted; if the swap fails the old
    folder is put back, and if the process dies between the renames the next write restores it.

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "scores"
    >>> with atomic_dir(out, "example") as tmp:
    ...     _ = (tmp / "a.txt").write_text("1")
    >>> sorted(p.name for p in out.iterdir()), output_kind(out)
    (['.remark-output.json', 'a.txt'], 'example')
    """
    dest = Path(path)
    inputs = [i for i in inputs if i is not None]
    check_output_dir(dest, kind, inputs=inputs, force=force, field=field)
    dest.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(dest)
    tmp = Path(tempfile.mkdtemp(prefix=_prefix(dest), suffix=".tmp", dir=dest.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700
    try:
        yield tmp
        marker = {"kind": kind, "format": MARKER_FORMAT, "remark_version": _remark_version()}
        (tmp / OUTPUT_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        check_output_dir(dest, kind, inputs=inputs, force=force, field=field)  # it may have changed meanwhile
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if dest.exists() or dest.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=_prefix(dest), suffix=".old", dir=dest.parent))
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
        _remove(old)


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
