"""Docstrings say what the code does and why; timings and speed-ups live in bench/RESULTS.md.

Every docstring (module, class, function) and every ``#:`` attribute comment of the four packages is read;
a timing (``1.2 ms``, ``~13 us``, ``60 ns``), a speed ratio (``10x faster``) or a first-person finding
(``we found``) is reported with its place. Such a figure goes stale with the next change of the code or the
machine, and the reader of a docstring needs the reason, not the number.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("catalog", "data_prep", "eval", "remark")
FIGURE = re.compile(
    r"\b\d+(?:\.\d+)?\s?(?:ms|us|µs|ns)\b"
    r"|\b\d+(?:\.\d+)?\s?x\s(?:faster|slower)\b"
    r"|\bwe (?:found|saw|measured)\b",
    re.IGNORECASE,
)


def doc_texts(source: str) -> list[tuple[int, str]]:
    """(line, text) of every docstring and ``#:`` comment in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                out.append((node.body[0].lineno, doc))
    out += [(i, line) for i, line in enumerate(source.splitlines(), 1) if line.lstrip().startswith("#:")]
    return out


def figures(source: str) -> list[tuple[int, str]]:
    return [(line, m.group(0)) for line, text in doc_texts(source) for m in FIGURE.finditer(text)]


def test_the_check_finds_a_timing_a_ratio_and_a_finding():
    source = (
        '"""Module: parses in 1.28 ms."""\n\n'
        "#: the table (10x faster than a loop)\nTABLE = 1\n\n\n"
        'def f():\n    """What f does; we found it pays."""\n\n\n'
        'def g():\n    """Sums 3 items per request (a count, not a timing)."""\n'
    )
    assert figures(source) == [(1, "1.28 ms"), (8, "we found"), (3, "10x faster")]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_timings_in_docstrings(package):
    found = [
        f"{path.relative_to(REPO)}:{line}: {text!r}"
        for path in sorted((REPO / package).rglob("*.py"))
        for line, text in figures(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "move these figures to bench/RESULTS.md and cite it:\n" + "\n".join(found)
