"""``remark`` console script: a thin dispatcher over subcommand modules, and the one error boundary.

Each module listed in :data:`COMMANDS` defines ``add_parser(subparsers)``, which registers its
subcommand and sets ``func`` (a callable taking the parsed ``argparse.Namespace`` and returning an exit
code). Modules import heavy libraries (torch, transformers, trl) inside ``func`` only, so ``remark --help``
stays fast. Library code never reads ``sys.argv``; everything here only orchestrates.

The error boundary (:func:`main`) decides what a failure looks like. Bad input is found where it enters
(readers, config validation, argument types) and raised as ``catalog.io.errors.InputError`` naming the
file, row and field; the boundary only prints it. Exit statuses:

- ``0``: done;
- ``2``: the user's input is wrong (a file, a config field, a flag): one line
  ``remark CMD: error: FILE, row N, field 'F': what is wrong (what to do)``, no traceback. Bad flags
  (argparse: a missing or unknown flag, a value out of its range) also exit 2 with one line, which points
  to the command's ``--help`` instead of printing the usage block. An ``OSError`` that names a file (permission denied, not a
  directory, disk full) is the user's environment, not a bug: reported the same way. ``REMARK_DEBUG=1``
  adds the traceback to these, for whoever debugs the check itself;
- ``1``: a bug in remark (any other exception). A bug is not the user's fault and its traceback is what a
  report needs, so the full traceback is printed to stderr as Python prints it, followed by one line
  saying that this is an internal error and not a problem with the input;
- ``130``: interrupted (Ctrl-C), one line, no traceback. A closed stdout (``remark ... | head``) ends
  quietly.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import shlex
import sys
import traceback

from catalog.io.errors import InputError
from remark import __version__

#: subcommand name -> module defining ``add_parser``. Order is the order shown in ``remark --help``.
COMMANDS: dict[str, str] = {
    "prep": "remark.cli.prep",
    "stats": "remark.cli.stats",
    "data": "remark.cli.data",
    "model": "remark.cli.model",
    "ground": "remark.cli.ground",
    "diagnose": "remark.cli.diagnose",
    "sft": "remark.cli.sft",
    "train": "remark.cli.train",
    "recipes": "remark.cli.recipes",
    "eval": "remark.cli.eval",
    "merge-adapter": "remark.cli.adapter",
    "card": "remark.cli.card",
    "curve": "remark.cli.curve",
    "plan-group-size": "remark.cli.plan",
    "demo": "remark.cli.demo",
    "versions": "remark.cli.versions",
}

#: exit statuses (see the module docstring)
EXIT_OK, EXIT_BUG, EXIT_USER, EXIT_INTERRUPTED = 0, 1, 2, 130

EPILOG = (
    "exit status: 0 done; 2 bad input (the message names the file, row and field, and what to do); "
    "1 an internal error (a bug: its traceback is printed); 130 interrupted."
)


class OneLineErrorParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, like every other bad input: ``remark eval score:
    error: argument --seed: '-1' is out of range: ... (see remark eval score --help)``, exit 2. Subparsers
    inherit the class (argparse creates them with ``type(parent)``)."""

    def error(self, message: str):
        self.exit(EXIT_USER, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="remark",
        description="Rank-level RL for LLM recommenders: build pooled datasets, train ReMaRk / Rank-GRPO, "
        "evaluate with CIs, plan compute.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"remark {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMANDS.values():
        importlib.import_module(module_name).add_parser(sub)
    return parser


def _command(args: argparse.Namespace) -> str:
    """``prep`` or ``eval score``: the words a user typed, for the message prefix."""
    words = [args.command]
    for key in ("eval_command", "curve_command", "data_command"):
        if getattr(args, key, None):
            words.append(getattr(args, key))
    return " ".join(words)


#: What to do, by the errno of an ``OSError`` that names a file (the rest say what the system said).
OS_ERROR_HINTS = {
    errno.EROFS: "the file system is read-only: write the outputs to a folder on a writable disk",
    errno.ENOSPC: "the disk is full: free space or write to another disk; a finished stage's work stays "
    "where the lines above say",
    errno.EDQUOT: "the disk quota is used up: free space or write to another disk",
    errno.EACCES: "permission denied: write to a folder you own, or fix the permissions",
}


def _os_error_message(err: OSError) -> str:
    where = ", ".join(str(p) for p in (err.filename, err.filename2) if p is not None)
    hint = OS_ERROR_HINTS.get(err.errno)
    return f"{where}: {err.strerror or type(err).__name__}" + (f" ({hint})" if hint else "")


def main(argv: list[str] | None = None) -> int:
    """Run ``remark`` with ``argv`` (default ``sys.argv[1:]``) and return the exit status (never raises)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help / --version (0) or a bad flag (2, usage printed)
        return exit_.code if isinstance(exit_.code, int) else EXIT_USER
    # the exact command, for the cards a command writes (dataset and model cards)
    args.command_line = shlex.join(["remark", *(sys.argv[1:] if argv is None else argv)])
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 1
    name = f"remark {_command(args)}"
    from catalog.io.locks import set_command

    set_command(args.command_line)  # named in the writer locks the command takes
    debug = os.environ.get("REMARK_DEBUG", "") not in ("", "0")
    try:
        return int(args.func(args) or 0)
    except InputError as err:
        if debug:
            traceback.print_exc()
        print(f"{name}: error: {err}", file=sys.stderr)
        return EXIT_USER
    except KeyboardInterrupt:
        print(f"\n{name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout was closed by the reader (`| head`): stop quietly, and keep Python's exit-time flush quiet
        with contextlib.suppress(OSError, ValueError):  # in-process callers may have replaced stdout
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1  # as Python itself exits on EPIPE
    except OSError as err:
        if err.filename is None:
            return _bug(name)
        if debug:
            traceback.print_exc()
        print(f"{name}: error: {_os_error_message(err)}", file=sys.stderr)
        return EXIT_USER
    except Exception:
        return _bug(name)
    finally:
        from catalog.io.locks import release_output_locks

        release_output_locks()  # the writer locks of the folders the command wrote


def _bug(name: str) -> int:
    traceback.print_exc()
    print(
        f"{name}: internal error: the traceback above is a bug in remark, not a problem with your input; "
        "please report it with the command you ran",
        file=sys.stderr,
    )
    return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
