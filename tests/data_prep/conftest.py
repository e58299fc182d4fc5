"""Fixtures for data_prep tests: a five-film catalog and helpers that write small input files."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from catalog.match import Matcher
from catalog.table import Catalog

CATALOG_ROWS = [
    ("m1", "The Matrix", 1999),
    ("m2", "Arrival", 2016),
    ("m3", "Moon", 2009),
    ("m4", "Primer", 2004),
    ("m5", "Solaris", 1972),
]


def make_catalog() -> Catalog:
    ids, titles, years = zip(*CATALOG_ROWS, strict=True)
    return Catalog.from_frame(pl.DataFrame({"item_id": ids, "title": titles, "year": years}))


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return make_catalog()


@pytest.fixture(scope="session")
def matcher(catalog) -> Matcher:
    return Matcher(catalog)


def write_jsonl(path: Path, rows: list) -> Path:
    """Each element is a dict (dumped as JSON) or a str (written as the raw line)."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def write_catalog_csv(path: Path) -> Path:
    lines = ["item_id,title,year"] + [f"{i},{t},{y}" for i, t, y in CATALOG_ROWS]
    path.write_text("\n".join(lines) + "\n")
    return path
