"""Atomic, owned outputs shared by every package: folders, single files, and what a full disk leaves.

``atomic_write(path)``, ``atomic_file(path, kind)`` and ``atomic_dir(path, kind)`` yield a temporary path in
the destination's folder (same filesystem, so the final ``os.replace`` is atomic); on success it replaces
``path``, on any exception it is removed and ``path`` is untouched. A killed run therefore leaves the old
output or none, never half a file or a folder mixing two runs. They yield a *path* (not a handle) so that
any writer works: polars ``write_parquet``, ``json.dump`` through ``open``, safetensors, matplotlib.

**Folders** are *owned*: ``atomic_dir`` writes ``.remark-output.json`` (``{"kind", "format",
"remark_version"}``) into the temporary folder before the swap, and only replaces an existing folder that
is empty or carries the marker of the same ``kind`` (the same command's earlier output). Anything else is
refused with ``InputError`` before any work is done (``check_output_dir``), unless ``force=True`` (the
CLI's ``--force``), which may replace a foreign folder but never one of the command's ``inputs``: a
destination that equals, contains or lies inside an input is always refused. Every command's
multi-file output goes through here (``remark prep``, ``remark data fetch``, ``remark eval score|run``,
``remark sft``, ``remark merge-adapter``, training's ``best/`` and ``final/``, the demo), so no command
deletes what it did not write.

**Single files** a command writes on its own (a plot, a predictions file, a pass-rates table) follow the
same rule through ``atomic_file(path, kind, formats=..., inputs=..., force=...)`` (checked before the work
by ``check_output_file``):

- the file's format follows its extension, from the ``formats`` the command can write (``PLOT_FORMATS``:
  ``.png``/``.pdf``/``.svg``; ``TABLE_FORMATS``: ``.parquet``/``.jsonl``/``.csv``; ``JSON_FORMATS``;
  ``JSONL_FORMATS``); any other extension is refused, so a plot never lands in ``x.csv``;
- a path that is one of the inputs, or lies inside an input folder, is always refused, and so is a path
  inside a folder written whole by ``atomic_dir`` (a dataset, a model, a score folder: any folder with
  ``.remark-output.json``), since adding a file there changes another command's output;
- an existing file is replaced only when remark wrote it as the same ``kind`` and it is unchanged since,
  or with ``force``.

How a file records that remark wrote it: a registry ``.remark-outputs.json`` in the file's folder,
``{"format": 1, "files": {NAME: {"kind", "size", "sha256", "remark_version"}}}``, updated (under an
``flock`` of the folder, atomically, entries of vanished files pruned) just before the file is swapped in.
A file counts as remark's own only when its entry names the same kind *and* its size and sha256 still
match: a file the user edited, or replaced by a copy of their own, is foreign again. The registry was
chosen over extended attributes (many filesystems and every ``cp`` drop them) and markers inside the
files (CSV and JSON lines have no place for one); it survives copying the folder, and costs one hash of
a file that is about to be replaced. A lost or unreadable registry makes files foreign (refused, never
overwritten). Files *inside* a folder a command owns (a dataset's ``meta.json``, a run's logs) are covered
by the folder's rule and written with plain ``atomic_write``.

**A full disk or an unwritable folder** (``ENOSPC``, ``EDQUOT``, ``EROFS``, ``EACCES``, ``EPERM``, from
Python's own I/O or a library's message ``(os error N)``, anywhere in the write; or any error while the
destination's filesystem has under ``min(1 MiB, 1%)`` or no inodes left, since some writers lose the
errno, e.g. polars' ``Invalid thrift: transport error``) is an
:class:`OutputWriteError` (an ``InputError``: exit 2) naming the destination: the temporary is removed
and the previous output, when there was one, is unchanged.

**One writer per folder**: a long command's ``--out`` (``check_output_dir(..., hold=True)``) and a run's
``output_dir`` are locked for the command's life (``catalog.io.locks``); ``atomic_dir`` carries a
held lock file into the new folder at the swap, and ``check_output_dir`` does not count it as content.

Temporary names carry the writer's host and pid (``.NAME.<host>.<pid>.<random>.tmp`` / ``.old``). Before
each write, leftovers of ``NAME`` from writers that are dead on this host are cleaned: a ``.tmp`` is
removed; an ``.old`` (the previous output, moved aside just before the swap) is put back when ``NAME``
is missing (the writer died between the two renames) and removed otherwise. Leftovers of a writer on
another host are reported with a ``StaleOutputWarning``, never removed; other names are not remark's.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from catalog.io.errors import InputError
from catalog.io.locks import LOCK_FILE, carry_lock, hold_output

__all__ = [
    "FILE_REGISTRY",
    "JSONL_FORMATS",
    "JSON_FORMATS",
    "OUTPUT_MARKER",
    "PLOT_FORMATS",
    "TABLE_FORMATS",
    "OutputWriteError",
    "StaleOutputWarning",
    "atomic_dir",
    "atomic_file",
    "atomic_write",
    "check_inputs",
    "check_output_dir",
    "check_output_file",
    "clean_stale",
    "file_format",
    "file_kind",
    "output_kind",
    "owning_output",
]


#: the ownership marker inside every folder written by :func:`atomic_dir`.
OUTPUT_MARKER = ".remark-output.json"
MARKER_FORMAT = 1
#: the registry of the single files remark wrote in a folder (see the module docstring).
FILE_REGISTRY = ".remark-outputs.json"
REGISTRY_FORMAT = 1

#: extension -> format, for the kinds of single file commands write.
PLOT_FORMATS: dict[str, str] = {".png": "png", ".pdf": "pdf", ".svg": "svg"}
TABLE_FORMATS: dict[str, str] = {".parquet": "parquet", ".jsonl": "jsonl", ".csv": "csv"}
JSON_FORMATS: dict[str, str] = {".json": "json"}
JSONL_FORMATS: dict[str, str] = {".jsonl": "jsonl"}

#: errno values that mean "this disk or folder cannot take the output" (the user's environment, exit 2).
WRITE_ERRNOS = {
    errno.ENOSPC: ("no space left on the disk", "free space on that disk, or write the output elsewhere"),
    errno.EDQUOT: ("disk quota exceeded", "free space within your quota, or write the output elsewhere"),
    errno.EROFS: ("the filesystem is read-only", "write the output to a writable folder"),
    errno.EACCES: ("permission denied", "write the output to a folder you may write to"),
    errno.EPERM: ("operation not permitted", "write the output to a folder you may write to"),
}

PathLike = str | os.PathLike[str]


class StaleOutputWarning(UserWarning):
    """A temporary file or folder left by an interrupted write that remark could not safely remove."""


class OutputWriteError(InputError):
    """The output could not be written where asked (disk full, read-only, not permitted); nothing was left.

    ``errno`` is the OS error number behind it."""

    def __init__(self, message: str, *, errno: int, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.errno = errno


def _write_errno(exc: BaseException) -> int | None:
    """The errno of ``exc`` (or of an exception it was raised from) when it is one of :data:`WRITE_ERRNOS`.

    Python's I/O sets ``OSError.errno``; Rust-backed writers (polars, safetensors) only say
    ``... (os error 28)`` in their message."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OutputWriteError):
            return e.errno
        if isinstance(e, OSError) and e.errno in WRITE_ERRNOS:
            return e.errno
        for m in re.finditer(r"os error (\d+)", str(e)):
            if int(m.group(1)) in WRITE_ERRNOS:
                return int(m.group(1))
        todo += [e.__cause__, e.__context__]
    return None


#: a write that failed with less than this free on its filesystem failed for want of space.
FULL_BELOW = 1 << 20


def _disk_full(folder: Path) -> bool:
    """Whether ``folder``'s filesystem has (almost) no space or no inodes left for this user: under
    ``min(FULL_BELOW, 1% of its size)`` free."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return False
    low = min(FULL_BELOW, st.f_blocks * st.f_frsize // 100 + 1)
    return st.f_bavail * st.f_frsize < low or (st.f_files > 0 and st.f_favail == 0)


def _write_failure(
    exc: BaseException, dest: Path, *, existed: bool, field: str | None, full: bool = False
) -> OutputWriteError | None:
    """The :class:`OutputWriteError` naming ``dest`` that ``exc`` amounts to, or None when it is no write failure.

    ``full``: the destination's disk was found full when ``exc`` came (a writer may report ENOSPC without
    naming it: polars ends a parquet file it cannot flush with ``Invalid thrift: transport error``)."""
    if isinstance(exc, InputError) and not isinstance(exc, OutputWriteError):
        return None  # a refusal or bad input: already says what it is
    code = _write_errno(exc)
    if code is None and full and isinstance(exc, Exception):
        code = errno.ENOSPC
    if code is None:
        return None
    what, hint = WRITE_ERRNOS[code]
    kept = f"the previous {dest} is unchanged" if existed else f"nothing was left at {dest}"
    return OutputWriteError(
        f"cannot write the output in {dest.parent}: {what} ({errno.errorcode.get(code, code)}); {kept}",
        errno=code,
        path=dest,
        field=field,
        hint=hint,
    )


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
    ``.old`` restored as ``NAME`` when ``NAME`` is missing, else removed. Those of a live pid on this host
    are left; those of another host are left and reported with a :class:`StaleOutputWarning`.
    """
    dest = Path(path)
    parent = dest.parent
    if not parent.is_dir():
        return []
    ours = re.compile(rf"^\.{re.escape(dest.name)}\.([A-Za-z0-9-]+)\.(\d+)\.[^.]+\.(tmp|old)$")
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


def output_kind(path: PathLike, *, strict: bool = False) -> str | None:
    """The ``kind`` in ``path``'s ownership marker, or None when it has none (or, unless ``strict``, an
    unreadable one). ``strict``: a marker that is not UTF-8 JSON ``{"kind": str, ...}`` raises
    ``InputError`` naming it and the field."""
    from catalog.io.files import read_json

    marker = Path(path) / OUTPUT_MARKER
    if not marker.is_file():
        return None
    try:
        data = read_json(
            marker,
            schema={"kind": str},
            optional={"format": int, "remark_version": (str, None)},
            what=OUTPUT_MARKER,
            hint="remark cannot tell which command wrote this folder; pass a new folder, or --force to replace it",
        )
    except InputError:
        if strict:
            raise
        return None
    return data["kind"]


def check_output_dir(
    path: PathLike,
    kind: str,
    *,
    inputs: Iterable[PathLike | None] = (),
    force: bool = False,
    field: str = "--out",
    hold: bool = False,
) -> None:
    """Raise ``InputError`` unless :func:`atomic_dir` may write ``path`` as an output of ``kind``.

    Allowed: a new path, an empty folder, or a folder whose marker says ``kind``; with ``force`` any
    folder. Never: a path that is, contains or lies inside an input; a file (not a folder). Call it
    before the work starts, so that a refusal costs nothing; ``atomic_dir`` checks again. ``hold``: then
    take the folder's writer lock for the command's life (``catalog.io.locks.hold_output``: another
    command writing it is refused, exit 2), as every long command does with its ``--out``.
    """
    dest = Path(path)
    _check_output_dir(dest, kind, inputs=inputs, force=force, field=field)
    if hold:
        hold_output(dest, field=field)


def _check_output_dir(
    dest: Path, kind: str, *, inputs: Iterable[PathLike | None], force: bool, field: str
) -> None:
    """:func:`check_output_dir`'s checks."""
    check_inputs(dest, inputs, field=field)
    if not dest.exists():
        return
    if not dest.is_dir():
        raise InputError(
            "exists and is not a folder", path=dest, field=field, hint="pass a new or empty folder"
        )
    if force or not any(p.name != LOCK_FILE for p in dest.iterdir()):  # a writer lock is no content
        return
    try:
        found = output_kind(dest, strict=True)
    except InputError as err:
        where = ", ".join(
            x for x in (err.row and f"row {err.row}", err.field and f"field {err.field!r}") if x
        )
        raise InputError(
            f"refusing to replace a folder that remark did not write: its {OUTPUT_MARKER} is damaged "
            f"({where + ': ' if where else ''}{err.message})",
            path=dest,
            field=field,
            hint="pass a new or empty folder, or --force to replace this one and everything in it",
        ) from None
    if found == kind:
        return
    what = f"the output of {found!r}" if found else "a folder that remark did not write"
    raise InputError(
        f"refusing to replace {what} (this command writes {kind!r} outputs)",
        path=dest,
        field=field,
        hint="pass a new or empty folder, or --force to replace this one and everything in it",
    )


@contextlib.contextmanager
def _temporary_file(dest: Path, *, field: str | None) -> Iterator[Path]:
    """A fresh temporary file beside ``dest`` (usual permissions), removed when the block raises; a write
    failure (:data:`WRITE_ERRNOS`) anywhere in the block becomes an :class:`OutputWriteError` naming ``dest``."""
    existed = dest.exists()
    tmp: Path | None = None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(dest)
        fd, name = tempfile.mkstemp(prefix=_prefix(dest), suffix=".tmp", dir=dest.parent)
        os.close(fd)
        tmp = Path(name)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual permissions
        yield tmp
    except BaseException as exc:
        full = _disk_full(dest.parent)  # before the temporary goes: it holds what filled the disk
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        failure = _write_failure(exc, dest, existed=existed, field=field, full=full)
        if failure is None:
            raise
        raise failure from exc


@contextlib.contextmanager
def atomic_write(
    path: PathLike, *, inputs: Iterable[PathLike | None] = (), field: str | None = None
) -> Iterator[Path]:
    """Yield a temporary file path next to ``path``; move it onto ``path`` when the block succeeds.

    ``inputs``: refuse (``InputError``) when ``path`` is one of them or lies inside one. No ownership check:
    this is for files inside a folder the command owns (written whole by :func:`atomic_dir`, or a run's
    ``output_dir``); a file a command writes on its own goes through :func:`atomic_file`. A full disk or an
    unwritable folder is an :class:`OutputWriteError` (``field`` names the flag, when there is one).

    >>> import json, tempfile
    >>> out = Path(tempfile.mkdtemp()) / "a.json"
    >>> with atomic_write(out) as tmp:
    ...     _ = tmp.write_text(json.dumps({"ok": 1}))
    >>> json.loads(out.read_text())
    {'ok': 1}
    """
    dest = Path(path)
    check_inputs(dest, inputs, field=field or "--out")
    with _temporary_file(dest, field=field) as tmp:
        yield tmp
        os.replace(tmp, dest)


def file_format(path: PathLike, formats: Mapping[str, str], *, field: str = "--out") -> str:
    """The format ``path``'s extension names among ``formats`` (extension -> format); ``InputError`` otherwise.

    >>> file_format("curves.svg", PLOT_FORMATS)
    'svg'
    """
    dest = Path(path)
    found = formats.get(dest.suffix.lower())
    if found is not None:
        return found
    allowed = ", ".join(formats)
    raise InputError(
        f"{dest.suffix or 'no extension'}: not a format this writes (it writes {allowed})",
        path=dest,
        field=field,
        hint=f"end the file name with one of {allowed}",
    )


def owning_output(path: PathLike) -> tuple[Path, str] | None:
    """The nearest folder at or above ``path`` written whole by :func:`atomic_dir` (it holds
    :data:`OUTPUT_MARKER`), with its kind (``"unknown"`` when the marker is unreadable); None when none is."""
    p = Path(os.path.abspath(path))
    for folder in (p, *p.parents):
        if (folder / OUTPUT_MARKER).is_file():
            return folder, output_kind(folder) or "unknown"
    return None


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _registry(folder: Path) -> dict[str, dict]:
    """``folder``'s :data:`FILE_REGISTRY` entries (empty when it is missing or unreadable)."""
    try:
        data = json.loads((folder / FILE_REGISTRY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, dict)}


def file_kind(path: PathLike) -> str | None:
    """The kind remark wrote ``path`` as, when its registry entry still matches the file (size and sha256);
    None for a file remark did not write, or one changed since (a symlink is never remark's)."""
    dest = Path(path)
    entry = _registry(dest.parent).get(dest.name)
    if entry is None or dest.is_symlink() or not dest.is_file():
        return None
    try:
        if entry.get("size") != dest.stat().st_size or entry.get("sha256") != _digest(dest):
            return None
    except OSError:
        return None
    kind = entry.get("kind")
    return kind if isinstance(kind, str) else None


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``folder`` (its registry's read-modify-write); none where flock is missing."""
    try:
        import fcntl

        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _write_registry(folder: Path, files: dict[str, dict]) -> None:
    dest = folder / FILE_REGISTRY
    with atomic_write(dest) as tmp:
        doc = {"format": REGISTRY_FORMAT, "files": dict(sorted(files.items()))}
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def check_output_file(
    path: PathLike,
    kind: str,
    *,
    formats: Mapping[str, str] | None = None,
    inputs: Iterable[PathLike | None] = (),
    force: bool = False,
    field: str = "--out",
) -> str | None:
    """Raise ``InputError`` unless :func:`atomic_file` may write ``path`` as a ``kind`` file; returns its
    format (from ``formats``; None when ``formats`` is None).

    Allowed: a new path, or a file remark wrote as ``kind`` and nobody changed since; with ``force`` any
    existing file. Never: an extension outside ``formats``; a path that is an input or lies inside one; a
    path inside a folder written whole by :func:`atomic_dir`; a folder. Call it before the work starts.
    """
    dest = Path(path)
    fmt = None if formats is None else file_format(dest, formats, field=field)
    check_inputs(dest, inputs, field=field)
    owner = owning_output(dest.parent)
    if owner is not None:
        folder, found = owner
        raise InputError(
            f"the output lies inside {folder}, the output of {found!r} (a folder remark writes whole); "
            "a file added there would change that output",
            path=dest,
            field=field,
            hint="write it outside that folder; --force does not override this",
        )
    if dest.is_dir() and not dest.is_symlink():
        raise InputError("exists and is a folder", path=dest, field=field, hint="pass a file path")
    if not (dest.exists() or dest.is_symlink()) or force:
        return fmt
    entry = _registry(dest.parent).get(dest.name)
    found = file_kind(dest)
    if found == kind:
        return fmt
    if found is not None:
        what = f"the output of {found!r}"
    elif entry is not None and not dest.is_symlink():
        what = "a file changed since remark wrote it"
    else:
        what = "a file that remark did not write"
    raise InputError(
        f"refusing to replace {what} (this command writes {kind!r} files)",
        path=dest,
        field=field,
        hint="pass a new path, or --force to replace this file",
    )


@contextlib.contextmanager
def atomic_file(
    path: PathLike,
    kind: str,
    *,
    formats: Mapping[str, str] | None = None,
    inputs: Iterable[PathLike | None] = (),
    force: bool = False,
    field: str = "--out",
) -> Iterator[Path]:
    """Yield a temporary file next to ``path``; it becomes ``path``, recorded in the folder's registry as
    ``kind``, when the block succeeds (see :func:`check_output_file`, called on entry and again, under the
    folder's lock, just before the swap).

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "rates.csv"
    >>> with atomic_file(out, "example", formats=TABLE_FORMATS) as tmp:
    ...     _ = tmp.write_text("request_id,pass_rate\\n")
    >>> file_kind(out), sorted(p.name for p in out.parent.iterdir())
    ('example', ['.remark-outputs.json', 'rates.csv'])
    """
    dest = Path(path)
    inputs = [i for i in inputs if i is not None]
    check = dict(kind=kind, formats=formats, inputs=inputs, force=force, field=field)
    check_output_file(dest, **check)
    with _temporary_file(dest, field=field) as tmp:
        yield tmp
        entry = {"kind": kind, "size": tmp.stat().st_size, "sha256": _digest(tmp)}
        with _folder_lock(dest.parent):
            check_output_file(dest, **check)  # it may have appeared or changed meanwhile
            before = _registry(dest.parent)
            files = {n: e for n, e in before.items() if n != dest.name and (dest.parent / n).is_file()}
            files[dest.name] = {**entry, "remark_version": _remark_version()}
            _write_registry(dest.parent, files)
            try:
                os.replace(tmp, dest)
            except BaseException:
                with contextlib.suppress(Exception):
                    _write_registry(dest.parent, before)
                raise


@contextlib.contextmanager
def atomic_dir(
    path: PathLike,
    kind: str = "output",
    *,
    inputs: Iterable[PathLike | None] = (),
    force: bool = False,
    field: str = "--out",
    keep_on_failure: PathLike | None = None,
) -> Iterator[Path]:
    """Yield a temporary folder next to ``path``; it becomes ``path``, with its marker, when the block succeeds.

    When the block fails the temporary folder is deleted, or, with ``keep_on_failure``, renamed to that path
    (unless the disk is full or the path exists): the work of a long command stays there to resume from.

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
    existed = dest.exists()
    tmp: Path | None = None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(dest)
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(dest), suffix=".tmp", dir=dest.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700
        yield tmp
        marker = {"kind": kind, "format": MARKER_FORMAT, "remark_version": _remark_version()}
        (tmp / OUTPUT_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        check_output_dir(dest, kind, inputs=inputs, force=force, field=field)  # it may have changed meanwhile
    except BaseException as exc:
        full = _disk_full(dest.parent)  # before the temporary goes: it holds what filled the disk
        keep = None if keep_on_failure is None or full else Path(keep_on_failure)
        if tmp is not None and keep is not None and not keep.exists():
            with contextlib.suppress(OSError):
                os.replace(tmp, keep)
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        failure = _write_failure(exc, dest, existed=existed, field=field, full=full)
        if failure is None:
            raise
        raise failure from exc
    old = None
    if dest.exists() or dest.is_symlink():
        carry_lock(dest, tmp)  # this command's writer lock goes with the new folder
        old = Path(tempfile.mkdtemp(prefix=_prefix(dest), suffix=".old", dir=dest.parent))
        old.rmdir()
        os.replace(dest, old)
    try:
        os.replace(tmp, dest)
    except BaseException:
        if old is not None:
            carry_lock(tmp, old, held=dest)
            os.replace(old, dest)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        _remove(old)
