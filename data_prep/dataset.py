"""A prepared dataset directory: write it atomically, load it back.

Layout (``remark prep --out DIR``)::

    requests.parquet        one row per request (design.md's columns, REQUESTS_SCHEMA)
    responder_rows.parquet  one row per (request, responder): Rank-GRPO's view, expanded from the
                            same pooled table (RESPONDER_ROWS_SCHEMA)
    catalog.parquet         the catalog the ids refer to (catalog.Catalog's frame)
    meta.json               source, domain, has_years, instruction_included (+ how it was prepared)
    stats.json              data_prep.stats.dataset_stats, plus "prep": what was skipped or noted

The directory is written with ``catalog.io.atomic_dir``: a killed run leaves the old directory or none.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from catalog.errors import InputError
from catalog.io import atomic_dir
from catalog.table import Catalog, load_catalog
from data_prep.pool import expand_responders
from data_prep.schema import REQUESTS_SCHEMA, RESPONDER_ROWS_SCHEMA, Report
from data_prep.stats import dataset_stats

FILES = ("requests.parquet", "responder_rows.parquet", "catalog.parquet", "meta.json", "stats.json")
META_KEYS = ("source", "domain", "has_years", "instruction_included")


@dataclass
class PooledDataset:
    """A loaded dataset: ``requests``, ``responder_rows`` (polars), ``catalog`` and ``meta``."""

    requests: pl.DataFrame
    responder_rows: pl.DataFrame
    catalog: Catalog
    meta: dict[str, Any]


def write_dataset(
    out_dir: str | Path,
    pooled: pl.DataFrame,
    catalog: Catalog,
    meta: dict[str, Any],
    *,
    report: Report | None = None,
) -> PooledDataset:
    """Write the five files of a dataset directory atomically and return what was written.

    ``pooled`` is :func:`data_prep.pool.pool_threads`' output (``responder_ids`` is used for the
    responder rows and left out of ``requests.parquet``).
    """
    missing = [k for k in META_KEYS if k not in meta]
    if missing:
        raise ValueError(f"meta lacks {missing}")
    requests = pooled.select(*REQUESTS_SCHEMA).cast(REQUESTS_SCHEMA)
    rows = expand_responders(pooled)
    stats = dataset_stats(requests)
    if report is not None:
        stats["prep"] = report.to_dict()
    with atomic_dir(out_dir) as tmp:
        requests.write_parquet(tmp / "requests.parquet")
        rows.write_parquet(tmp / "responder_rows.parquet")
        catalog.df.write_parquet(tmp / "catalog.parquet")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        (tmp / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    return PooledDataset(requests, rows, catalog, dict(meta))


def _read(path: Path, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    try:
        df = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as err:
        raise InputError(f"cannot read parquet: {err}", path=path) from err
    for name, dtype in schema.items():
        if name not in df.columns:
            raise InputError("missing column", path=path, field=name, hint="re-run remark prep")
        if df.schema[name] != dtype:
            raise InputError(f"column has type {df.schema[name]}, expected {dtype}", path=path, field=name)
    return df


def _load_own_catalog(path: Path) -> Catalog:
    """The catalog ``write_dataset`` wrote: duplicates were reported when it was prepared, so not again."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*share a \\(title, year\\)", category=UserWarning)
        return load_catalog(path, on_duplicate="keep")


def load_dataset(directory: str | Path) -> PooledDataset:
    """Load a directory written by :func:`write_dataset` (``remark prep``), checking its columns."""
    d = Path(directory)
    for name in FILES[:4]:
        if not (d / name).is_file():
            raise InputError(
                f"not a prepared dataset: {name} is missing",
                path=d,
                hint="build one with `remark prep SOURCE --input PATH --out DIR`",
            )
    try:
        meta = json.loads((d / "meta.json").read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"invalid JSON ({err.msg})", path=d / "meta.json", row=err.lineno) from err
    missing = [k for k in META_KEYS if k not in meta]
    if missing:
        raise InputError(f"meta lacks {missing}", path=d / "meta.json", field=missing[0])
    return PooledDataset(
        requests=_read(d / "requests.parquet", REQUESTS_SCHEMA),
        responder_rows=_read(d / "responder_rows.parquet", RESPONDER_ROWS_SCHEMA),
        catalog=_load_own_catalog(d / "catalog.parquet"),
        meta=meta,
    )
