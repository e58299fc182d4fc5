"""The item catalog, title normalisation, list parsing and grounding (the bottom layer of remark).

Public names (docs/architecture.md, "catalog/"): :class:`Catalog`, :func:`load_catalog`,
:func:`normalize_title`, :func:`split_title_year`, :class:`ParsedLine`, :func:`parse_list`,
:func:`parse_line`, :class:`Matcher`, :class:`GroundingSettings`, :class:`Match`, :func:`tolerance_groups` (Rank-GRPO's year-tolerant
title equivalence), :class:`InputError`, and the atomic output
helpers :func:`atomic_write`, :func:`atomic_dir` with :func:`read_table`.

The names are imported on first use (PEP 562 ``__getattr__``), not here: ``from catalog.io.errors import
InputError`` (every CLI module) then loads neither polars, numpy nor rapidfuzz, so ``remark --help`` stays
light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from catalog._lazy import lazy_exports

#: public name -> the module that defines it
_LAZY_EXPORTS: dict[str, str] = {
    "tolerance_groups": "catalog.equivalence",
    "InputError": "catalog.io.errors",
    "atomic_dir": "catalog.io.outputs",
    "atomic_write": "catalog.io.outputs",
    "read_table": "catalog.io.files",
    "DEFAULT_SCORER": "catalog.match",
    "DEFAULT_THRESHOLD": "catalog.match",
    "GroundingSettings": "catalog.match",
    "Match": "catalog.match",
    "Matcher": "catalog.match",
    "normalize_title": "catalog.normalize",
    "split_title_year": "catalog.normalize",
    "ParsedLine": "catalog.parse",
    "parse_line": "catalog.parse",
    "parse_list": "catalog.parse",
    "CATALOG_SCHEMA": "catalog.table",
    "Catalog": "catalog.table",
    "load_catalog": "catalog.table",
}

if TYPE_CHECKING:
    from catalog.equivalence import tolerance_groups
    from catalog.io.errors import InputError
    from catalog.io.files import read_table
    from catalog.io.outputs import atomic_dir, atomic_write
    from catalog.match import DEFAULT_SCORER, DEFAULT_THRESHOLD, GroundingSettings, Match, Matcher
    from catalog.normalize import normalize_title, split_title_year
    from catalog.parse import ParsedLine, parse_line, parse_list
    from catalog.table import CATALOG_SCHEMA, Catalog, load_catalog


__getattr__, __dir__ = lazy_exports("catalog", _LAZY_EXPORTS, globals())


__all__ = [
    "CATALOG_SCHEMA",
    "DEFAULT_SCORER",
    "DEFAULT_THRESHOLD",
    "Catalog",
    "GroundingSettings",
    "InputError",
    "Match",
    "Matcher",
    "ParsedLine",
    "atomic_dir",
    "atomic_write",
    "load_catalog",
    "normalize_title",
    "parse_line",
    "parse_list",
    "read_table",
    "split_title_year",
    "tolerance_groups",
]
