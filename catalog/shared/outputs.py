"""Atomic, owned outputs shared by every package.

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

from catalog.shared.errors import InputError

__all__ = [
    "OUTPUT_MARKER",
    "StaleOutputWarning",
    "atomic_dir",
    "atomic_write",
    "check_inputs",
    "check_output_dir",
    "clean_stale",
    "output_kind",
]


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


def output_kind(path: PathLike, *, strict: bool = False) -> str | None:
    """The ``kind`` in ``path``'s ownership marker, or None when it has none (or, unless ``strict``, an
    unreadable one). ``strict``: a marker that is not UTF-8 JSON ``{"kind": str, ...}`` raises
    ``InputError`` naming it and the field."""
    from catalog.shared.files import read_json

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
    if force or not any(dest.iterdir()):
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
