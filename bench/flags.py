"""What every bench script shares on its command line: one-line errors and the ``--json`` / ``--force``
output flags.

A bad flag prints one line (``python bench/NAME.py: error: argument --reps: ... (see --help)``) and exits
with 2, as ``remark``'s own commands do; a bad input the script finds (``InputError``: an output file
remark did not write, a missing model folder) is one line and exit 2 too (:func:`run_script`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from catalog.io.errors import InputError
from catalog.io.outputs import JSON_FORMATS, check_output_file


class BenchParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line and exit 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def bench_parser(script: str, doc: str | None) -> BenchParser:
    """The parser of ``bench/NAME.py`` (``script``: its ``__file__``), described by its docstring's first line."""
    first = (doc or "").strip().splitlines()[0] if doc else ""
    return BenchParser(prog=f"python bench/{Path(script).name}", description=first)


def add_output_flags(ap: argparse.ArgumentParser, what: str = "the results") -> None:
    """``--json PATH`` (write ``what`` there, atomically, as a file remark owns) and ``--force``."""
    ap.add_argument("--json", default=None, help=f"write {what} here (.json; new, or one this script wrote)")
    ap.add_argument(
        "--force", action="store_true", help="let the output files replace files remark did not write"
    )


def check_json_output(a: argparse.Namespace, kind: str, flag: str = "--json") -> None:
    """Refuse ``--json`` (or ``flag``) before any timing when it would replace a file remark did not write."""
    path = getattr(a, flag.lstrip("-").replace("-", "_"))
    if path:
        check_output_file(path, kind, formats=JSON_FORMATS, force=a.force, field=flag)


def run_script(main: Callable[[], Any]) -> NoReturn:
    """Run a script's ``main``: an ``InputError`` is one line on stderr and exit 2; an int result is the
    exit status, anything else exit 0."""
    try:
        result = main()
    except InputError as err:
        print(f"{Path(sys.argv[0]).name}: error: {err}", file=sys.stderr)
        sys.exit(2)
    sys.exit(result if isinstance(result, int) else 0)
