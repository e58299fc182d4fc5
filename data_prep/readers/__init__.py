"""Readers: every source into the threads frame (+ the source's own catalog, + meta).

``read_source(name, path, ...)`` dispatches by source name; :data:`SOURCES` lists them with their
domain. Each reader is also importable on its own (``read_protoqa``, ``read_reddit``, ``read_redial``,
``read_threads``).
"""

from __future__ import annotations

from pathlib import Path

from data_prep.readers.protoqa import read_protoqa
from data_prep.readers.reddit import read_reddit
from data_prep.readers.redial import read_redial
from data_prep.readers.threads import read_threads
from data_prep.schema import Report, Threads

__all__ = ["SOURCES", "combine", "read_protoqa", "read_reddit", "read_redial", "read_source", "read_threads"]

#: source name -> (domain, what it reads)
SOURCES: dict[str, tuple[str, str]] = {
    "protoqa": ("answer", "ProtoQA answer files (crowdsourced or scraped), iesl/protoqa-data"),
    "reddit": ("movie", "Rank-GRPO's processed Reddit-v2 rows (JSON lines or parquet)"),
    "reddit-books": ("book", "Reddit-Books rows in Rank-GRPO's shape"),
    "reddit-music": ("music", "Reddit-Music rows in Rank-GRPO's shape"),
    "redial": ("movie", "ReDial conversations (test_data.jsonl)"),
    "threads": (
        "movie",
        "a generic threads file: request_id, prompt, responder_id, title, year[, seen, split]",
    ),
}


def read_source(
    source: str,
    path: str | Path,
    *,
    items: str = "raw",
    domain: str | None = None,
    report: Report | None = None,
) -> Threads:
    """Read ``path`` with the reader for ``source``; ``domain`` overrides the source's default."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; valid: {', '.join(SOURCES)}")
    report = report or Report()
    dom = domain or SOURCES[source][0]
    if source == "protoqa":
        return read_protoqa(path, items=items, report=report)  # type: ignore[arg-type]
    if source.startswith("reddit"):
        return read_reddit(path, domain=dom, source=source, report=report)
    if source == "redial":
        return read_redial(path, report=report)
    return read_threads(path, domain=dom, report=report)


def combine(parts: list[Threads], *, splits: list[str | None] | None = None) -> Threads:
    """Several inputs of one source -> one Threads: frames concatenated (``splits[i]`` fills the null
    splits of input i), catalogs merged by ``item_id`` (aliases united, popularity summed), meta of
    the first input with ``has_years`` true if any is.
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
        raise ValueError("inputs disagree on instruction_included; prepare them separately")
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
    return Threads(pl.concat(frames, how="diagonal_relaxed"), catalog, meta)
