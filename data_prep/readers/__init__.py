"""Readers: every source into the threads frame (+ the source's own catalog, + meta).

``read_source(name, path, ...)`` calls the source's reader (:data:`READERS`); :data:`DATA_SOURCES` lists the
sources with their domain, and a listed source without a reader is an error. Each reader is also importable on its own (``read_protoqa``, ``read_reddit``, ``read_redial``,
``read_threads``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from catalog.io.errors import InputError
from data_prep.readers.protoqa import read_protoqa
from data_prep.readers.reddit import read_reddit
from data_prep.readers.redial import read_redial
from data_prep.readers.threads import read_threads
from data_prep.schema import Report, Threads
from data_prep.sources import DATA_SOURCES

__all__ = [
    "DATA_SOURCES",
    "READERS",
    "check_not_empty",
    "combine",
    "read_protoqa",
    "read_reddit",
    "read_redial",
    "read_source",
    "read_threads",
]


#: A reader as ``read_source`` calls it: ``(path, items=, domain=, source=, report=) -> Threads``.
Reader = Callable[..., Threads]

#: source name -> its reader; every name of :data:`DATA_SOURCES` has one (``tests/data_prep/test_readers.py``)
READERS: dict[str, Reader] = {
    "protoqa": lambda path, *, items, domain, source, report: read_protoqa(path, items=items, report=report),
    "reddit": lambda path, *, items, domain, source, report: read_reddit(
        path, domain=domain, source=source, report=report
    ),
    "redial": lambda path, *, items, domain, source, report: read_redial(path, report=report),
    "threads": lambda path, *, items, domain, source, report: read_threads(
        path, domain=domain, report=report
    ),
}
READERS["reddit-books"] = READERS["reddit-music"] = READERS["reddit"]


def read_source(
    source: str,
    path: str | Path,
    *,
    items: str = "raw",
    domain: str | None = None,
    report: Report | None = None,
) -> Threads:
    """Read ``path`` with the reader of ``source`` (:data:`READERS`); ``domain`` overrides the source's
    default. A name of :data:`DATA_SOURCES` without a reader is an error, never a fallback to another reader."""
    if source not in DATA_SOURCES:
        raise InputError(
            f"unknown source {source!r}", field="source", hint=f"valid: {', '.join(DATA_SOURCES)}"
        )
    if source not in READERS:
        raise NotImplementedError(
            f"source {source!r} is listed in data_prep.sources.DATA_SOURCES but has no reader in "
            "data_prep.readers.READERS"
        )
    report = report or Report()
    dom = domain or DATA_SOURCES[source][0]
    skipped_before = sum(report.skipped.values())
    threads = READERS[source](path, items=items, domain=dom, source=source, report=report)
    check_not_empty(threads, path, report, skipped_before)
    return threads


def check_not_empty(threads: Threads, path: str | Path, report: Report, skipped_before: int = 0) -> None:
    """An input that yields no mention is an error, never an empty dataset written with exit 0.

    Says why: the file has no rows (empty, or a CSV header only), every row was bad and skipped
    (``--skip-bad-rows``, with the counts and the first message), or the source dropped every record
    (ReDial conversations without a recommendation).
    """
    if threads.frame.height:
        return
    skipped = sum(report.skipped.values()) - skipped_before
    dropped = threads.meta.get("dropped") or {}
    if skipped:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(report.skipped.items()))
        first = next(iter(report.examples.values()), None)
        raise InputError(
            f"every row was bad: {skipped} row(s) skipped ({counts}), nothing left to prepare",
            path=path,
            hint=f"the first: {first}" if first else None,
        )
    if dropped:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items()))
        raise InputError(f"no record holds a request: all dropped ({counts})", path=path)
    raise InputError(
        "no rows: the file is empty (or a header only)", path=path, hint="check that this is the right file"
    )


def combine(parts: list[Threads], *, splits: list[str | None] | None = None) -> Threads:
    """Several inputs of one source -> one Threads: frames concatenated (``splits[i]`` fills the null
    splits of input i), catalogs merged by ``item_id`` (aliases united, popularity summed), meta of
    the first input with ``has_years`` true if any is, ``answers`` (ProtoQA) concatenated.
    """
    import polars as pl

    from catalog.table import Catalog

    if not parts:
        raise ValueError("combine needs at least one input")
    splits = splits or [None] * len(parts)
    frames = [
        p.frame.with_columns(pl.coalesce("split", pl.lit(s, pl.String)).alias("split")) if s else p.frame
        for p, s in zip(parts, splits, strict=True)
    ]
    included = {p.meta["instruction_included"] for p in parts}
    if len(included) > 1:
        raise InputError(
            "the inputs disagree on whether their prompts already include the instruction",
            field="--input",
            hint="prepare them separately",
        )
    meta = dict(parts[0].meta)
    meta["has_years"] = any(p.meta["has_years"] for p in parts)
    cats = [p.catalog for p in parts if p.catalog is not None]
    if len(cats) <= 1 or all(c is cats[0] or c.df.equals(cats[0].df) for c in cats):
        catalog = cats[0] if cats else None
    else:
        df = (
            pl.concat([c.df.select("item_id", "title", "year", "aliases", "popularity") for c in cats])
            .group_by("item_id", maintain_order=True)
            .agg(
                pl.col("title").first(),
                pl.col("year").first(),
                pl.col("aliases").list.explode(keep_nulls=False, empty_as_null=False).unique().sort(),
                pl.col("popularity").sum(),
            )
        )
        catalog = Catalog(df.with_columns(pl.col("aliases").list.drop_nulls()))
    answers = [p.answers for p in parts if p.answers is not None]
    return Threads(
        pl.concat(frames, how="diagonal_relaxed"), catalog, meta, pl.concat(answers) if answers else None
    )
