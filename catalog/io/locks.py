"""One writer per output folder: an exclusive lock held for the command's life.

Two commands writing one folder at once mix their files (two ``remark train`` runs into one ``output_dir``
leave an eval log holding both seeds, and checkpoints, ``best/`` and ``final/`` of whichever wrote last).
So every command that writes a run folder or a long command's ``--out`` takes :func:`hold_output` on it
before any work; a second writer gets an :class:`OutputBusyError` (an ``InputError``: exit 2, one line)
naming the folder and the holder (pid, host, command, start time).

How: the lock file :data:`LOCK_FILE` inside the folder, opened and ``fcntl.flock(LOCK_EX | LOCK_NB)``-ed;
the open descriptor is kept for as long as the lock is held, so the kernel releases it when the holder
exits **however it exits** (kill -9 included): a lock left by a dead process is free again, and the
next writer takes it over without any pid guessing; the holder's record in the file (JSON: pid, host,
command, started) is only there for the message. After locking, the descriptor's inode is compared with
the path's (a holder that was just removing the file on release leaves the next writer a lock on a
removed file: it locks again). On release the file is removed (and the folder too when the lock created
it and nothing else was written there), so outputs do not carry it.

``atomic_dir`` (``catalog.io.outputs``) moves a held lock file into the new folder just before the
swap, so the lock stays with the output through the swap; ``check_output_dir`` does not count it as
content.

Limits: ``flock`` is advisory and local: it binds remark commands (and anything else that flocks the file),
and on network filesystems where ``flock`` is not shared between hosts two hosts are not kept apart.
Where ``fcntl`` is missing (Windows) nothing is locked.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from catalog.io.errors import InputError

__all__ = [
    "LOCK_FILE",
    "OutputBusyError",
    "carry_lock",
    "current_command",
    "hold_output",
    "lock_holder",
    "note_companion",
    "output_lock",
    "release_output",
    "release_output_locks",
    "set_command",
]

#: the lock file inside a folder being written (removed when the writer is done).
LOCK_FILE = ".remark-lock"


class OutputBusyError(InputError):
    """Another process holds the folder's writer lock."""


#: folder (absolute) -> (open lock descriptor, whether the lock created the folder)
_HELD: dict[str, tuple[int, bool]] = {}


def _key(folder: str | os.PathLike[str]) -> str:
    return os.path.abspath(folder)


def _holder(lock: Path) -> str:
    """The holder's record as words, for the message."""
    try:
        rec = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "another process (its record is not written yet)"
    if not isinstance(rec, dict):
        return "another process"
    who = f"pid {rec.get('pid')} on host {rec.get('host')}"
    if rec.get("command"):
        who += f", running {rec['command']!r}"
    if rec.get("started"):
        who += f", since {rec['started']}"
    return who


#: the command line recorded in the locks this process takes (``remark.cli.main`` sets the one it runs)
_COMMAND: list[str] = []


def set_command(text: str) -> None:
    """Record ``text`` as this process's command in the locks it takes from now on."""
    _COMMAND[:] = [text]


def _command() -> str:
    return _COMMAND[0] if _COMMAND else " ".join(sys.argv) or "python"


def current_command() -> str:
    """The command line this process records in its locks (:func:`set_command`, else ``sys.argv``)."""
    return _command()


#: folder (absolute) -> {name of a companion file: whether it means nothing now (or None: when alone)}
_COMPANIONS: dict[str, dict[str, Callable[[], bool] | None]] = {}


def note_companion(
    folder: str | os.PathLike[str], name: str, *, idle: Callable[[], bool] | None = None
) -> None:
    """Record ``name`` as a companion file of ``folder``, which this process writes (a ledger of what it is
    about to write, ``remark.step.run_ledger``): when the lock is released, it is removed if ``idle()`` says
    it means nothing now, or (without ``idle``) if the folder holds nothing else; then the folder too, when
    the lock created it and it is empty. So a command refused after its checks leaves nothing behind."""
    _COMPANIONS.setdefault(_key(folder), {})[name] = idle


def lock_holder(folder: str | os.PathLike[str]) -> str | None:
    """Who holds the writer lock of ``folder`` now (the words of :class:`OutputBusyError`: pid, host,
    command, start), ``"this process"`` when this process does, None when nobody does (no lock file, or
    one whose holder has exited: the kernel released it). Takes nothing: the probe is released at once."""
    try:
        import fcntl
    except ImportError:
        return None
    key = _key(folder)
    if key in _HELD:
        return "this process"
    lock = Path(key) / LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return _holder(lock)
    finally:
        os.close(fd)  # closing drops the probe's lock, if it got one
    return None


def hold_output(folder: str | os.PathLike[str], *, field: str = "--out", command: str | None = None) -> None:
    """Take the writer lock of ``folder`` (created when missing) for this process, until
    :func:`release_output` / :func:`release_output_locks` or the process's exit; a lock this process already
    holds is kept. Raises :class:`OutputBusyError` naming the folder and the holder when another process
    holds it. ``command`` goes into the record (default: this process's command line)."""
    try:
        import fcntl
    except ImportError:  # no flock here: nothing to hold
        return
    key = _key(folder)
    if key in _HELD:
        return
    path = Path(key)
    if path.exists() and not path.is_dir():
        return  # not a folder: the caller's own check refuses it
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    lock = path / LOCK_FILE
    for _ in range(10):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            if created:
                with contextlib.suppress(OSError):
                    path.rmdir()
            raise OutputBusyError(
                f"is being written by {_holder(lock)}; two writers would mix their files",
                path=folder,
                field=field,
                hint="wait for that command to finish (or stop it), or write to another folder",
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed the file as we opened it: lock the new one
    else:
        raise OutputBusyError("the lock file keeps changing", path=folder, field=field)
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": command or _command(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
    _HELD[key] = (fd, created)


def carry_lock(
    old: str | os.PathLike[str], new: str | os.PathLike[str], *, held: str | os.PathLike[str] | None = None
) -> None:
    """Move the lock file this process holds on the folder ``held`` (default ``old``) from the folder ``old``
    into the folder ``new``, which is about to take ``held``'s place (``atomic_dir``'s swap): a rename keeps
    the inode, so the lock stays held and is found at ``held``'s path again once ``new`` is renamed there.
    No-op when this process holds no lock on ``held``."""
    if _key(old if held is None else held) in _HELD and (Path(old) / LOCK_FILE).exists():
        os.replace(Path(old) / LOCK_FILE, Path(new) / LOCK_FILE)


def release_output(folder: str | os.PathLike[str]) -> None:
    """Release this process's lock on ``folder`` (removing the lock file, the folder's companion files when
    they are all it holds (:func:`note_companion`), and the folder when the lock created it and it is
    otherwise empty); no-op when not held."""
    key = _key(folder)
    if key not in _HELD:
        return
    fd, created = _HELD.pop(key)
    lock = Path(key) / LOCK_FILE
    with contextlib.suppress(OSError):
        if os.fstat(fd).st_ino == os.stat(lock).st_ino:
            lock.unlink()  # still locked by us: nobody else can hold it meanwhile
    os.close(fd)
    companions = _COMPANIONS.pop(key, {})
    with contextlib.suppress(OSError):
        left = set(os.listdir(key))
        alone = bool(left) and left <= set(companions)  # nothing but companions: they mean nothing alone
        for name, idle in companions.items():
            if name in left and (alone if idle is None else idle()):
                (Path(key) / name).unlink()
    if created:
        with contextlib.suppress(OSError):
            Path(key).rmdir()  # only when empty


def release_output_locks() -> None:
    """Release every lock this process holds (the CLI calls it when a command ends)."""
    for key in list(_HELD):
        release_output(key)


@contextlib.contextmanager
def output_lock(
    folder: str | os.PathLike[str], *, field: str = "--out", command: str | None = None
) -> Iterator[None]:
    """:func:`hold_output` for the block; released after it unless it was already held on entry."""
    held = _key(folder) in _HELD
    hold_output(folder, field=field, command=command)
    try:
        yield
    finally:
        if not held:
            release_output(folder)
