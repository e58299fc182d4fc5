"""An OSError that names a file is one line with the file, what the system said and what to do (exit 2)."""

from __future__ import annotations

import errno

from remark.cli import main as cli


def test_read_only_and_full_disks_say_what_to_do():
    ro = cli._os_error_message(OSError(errno.EROFS, "Read-only file system", "/mnt/ro/dm"))
    assert ro.startswith("/mnt/ro/dm: Read-only file system (") and "writable disk" in ro
    full = cli._os_error_message(
        OSError(errno.ENOSPC, "No space left on device", "/d/out", None, "/d/out.tmp")
    )
    assert full.startswith("/d/out, /d/out.tmp: No space left on device (the disk is full")
    plain = cli._os_error_message(OSError(errno.EISDIR, "Is a directory", "/x"))
    assert plain == "/x: Is a directory"  # no hint invented where there is none


def test_a_read_only_output_exits_2_with_the_hint(tmp_path, monkeypatch, capsys):
    def refuse(args):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "out"))

    monkeypatch.setattr(cli, "build_parser", lambda: _parser(refuse))
    assert cli.main(["x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Read-only file system" in err and "writable disk" in err


def _parser(func):
    import argparse

    p = argparse.ArgumentParser(prog="remark")
    sub = p.add_subparsers(dest="command")
    sub.add_parser("x").set_defaults(func=func)
    return p
