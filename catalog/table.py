"""The item catalog: a validated polars frame, and loaders for the real catalog formats.

``Catalog.df`` columns (docs/architecture.md): ``item_id: str`` (unique), ``title: str`` (non-empty,
whitespace collapsed), ``year: Int32`` (null when unknown: ProtoQA answers, some ReDial rows),
``aliases: list[str]``, ``popularity: Float64`` (null when unknown). Extra columns are kept as they are.

Formats (``load_catalog(path, format=None)`` sniffs them):

- generic table (``csv``/``tsv``/``parquet``/``json``/``jsonl``): a ``title`` column, optional ``year``,
  ``item_id`` (or ``id``), ``aliases`` (a list, or a "|"-separated string in CSV), ``popularity``.
  Without a ``year`` column a trailing "(YYYY)" is split off the title. Without an id column the id is
  the display string "Title (Year)" (or "Title"), stable across runs. Reddit-v2's ``gt_catalog.csv``
  (title, year) is read this way.
- ``entity2id``: Reddit-Movie's JSON object {"Title (Year)": "tt0133093"}; the IMDb id is the item id,
  several names for one id become aliases of the first.
- ``redial``: ReDial's ``movies_with_mentions.csv`` (movieId, movieName "Title  (Year)", nbMentions);
  the movieId is the item id (conversations mention "@movieId"), mentions are the popularity.

Duplicates (``on_duplicate``): rows equal in every catalog column are merged with a warning under
"merge" (the default) and refused under "error". Rows that share (title, year) but differ otherwise are
an error, except under "keep", which keeps them when their ids differ (grounding then prefers the more
popular, then the smaller id). ReDial lists 8 films twice under two movieIds, so its loader uses "keep"
unless "error" is asked for: conversations refer to both ids.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Literal

import polars as pl

from catalog.io.errors import InputError
from catalog.io.files import BOM, read_json, read_table, table_format
from catalog.io.outputs import atomic_write

__all__ = ["CATALOG_SCHEMA", "Catalog", "load_catalog"]

OnDuplicate = Literal["merge", "error", "keep"]
CatalogFormat = Literal["csv", "tsv", "parquet", "json", "jsonl", "entity2id", "redial"]

CATALOG_SCHEMA: dict[str, pl.DataType] = {
    "item_id": pl.String(),
    "title": pl.String(),
    "year": pl.Int32(),
    "aliases": pl.List(pl.String()),
    "popularity": pl.Float64(),
}
_ROW = "__row"
_YEAR_SUFFIX = r"^(.*?)\s*\(\s*(\d{4})\s*\)\s*$"


class Catalog:
    """A validated catalog frame. Build one with :meth:`from_frame` or :func:`load_catalog`."""

    def __init__(self, df: pl.DataFrame, *, path: str | os.PathLike[str] | None = None) -> None:
        self.path = None if path is None else str(path)
        for name, dtype in CATALOG_SCHEMA.items():
            if name not in df.columns:
                raise InputError(f"catalog frame lacks column {name!r}", path=path, field=name)
            if df.schema[name] != dtype:
                raise InputError(
                    f"column {name!r} has type {df.schema[name]}, expected {dtype}",
                    path=path,
                    field=name,
                    hint="build catalogs with Catalog.from_frame, which converts types",
                )
        _check_ids(df, path)
        bad = df.select(pl.col("title").is_null() | (pl.col("title").str.strip_chars() == "")).to_series()
        if bad.any():
            raise InputError("empty title", path=path, row=int(bad.arg_true()[0]) + 1, field="title")
        self.df = df
        self._display: dict[str, str] | None = None

    @classmethod
    def from_frame(
        cls,
        df: pl.DataFrame,
        *,
        path: str | os.PathLike[str] | None = None,
        on_duplicate: OnDuplicate = "merge",
    ) -> Catalog:
        """Validate and convert a frame with ``title`` and optional year/id/aliases/popularity columns.

        Row numbers in errors are 1-based data rows (for CSV, the header is not counted).
        """
        return cls(_build(df, path, on_duplicate), path=path)

    def __len__(self) -> int:
        return self.df.height

    def __repr__(self) -> str:
        where = f", path={self.path!r}" if self.path else ""
        return f"Catalog({len(self)} items, has_years={self.has_years}{where})"

    @property
    def has_years(self) -> bool:
        """True when at least one item has a year (movies); False for year-less catalogs (ProtoQA)."""
        return self.df["year"].null_count() < self.df.height

    def display(self, item_id: str) -> str:
        """``"Title (Year)"``, or ``"Title"`` when the year is unknown; KeyError for an unknown id."""
        if self._display is None:
            shown = _display_expr().alias("shown")
            self._display = dict(zip(self.df["item_id"], self.df.select(shown)["shown"], strict=True))
        return self._display[item_id]

    def write_parquet(self, path: str | os.PathLike[str]) -> None:
        """Write the frame atomically; :func:`load_catalog` reads it back unchanged."""
        with atomic_write(path) as tmp:
            self.df.write_parquet(tmp)


def _display_expr() -> pl.Expr:
    return (
        pl.when(pl.col("year").is_null())
        .then(pl.col("title"))
        .otherwise(pl.format("{} ({})", pl.col("title"), pl.col("year")))
    )


def _first_row(df: pl.DataFrame, mask: pl.Expr) -> int | None:
    hit = df.filter(mask)
    return None if hit.is_empty() else int(hit[_ROW][0])


def _check_ids(df: pl.DataFrame, path: str | os.PathLike[str] | None) -> None:
    ids = df["item_id"]
    if ids.null_count() or (ids.str.strip_chars() == "").any():
        row = int((ids.is_null() | (ids.str.strip_chars() == "")).arg_true()[0]) + 1
        raise InputError("empty item id", path=path, row=row, field="item_id")
    dup = ids.is_duplicated()
    if dup.any():
        rows = (dup.arg_true()[:2] + 1).to_list()
        raise InputError(
            f"item id {ids[rows[0] - 1]!r} is used by rows {rows[0]} and {rows[1]}",
            path=path,
            row=rows[1],
            field="item_id",
            hint="give every item its own id",
        )


def _year(df: pl.DataFrame, path: str | os.PathLike[str] | None) -> pl.DataFrame:
    dtype = df.schema["year"]
    if dtype.is_integer() or dtype == pl.Null:
        return df.with_columns(pl.col("year").cast(pl.Int32))
    if dtype.is_float():
        bad = pl.col("year").is_not_null() & (pl.col("year") != pl.col("year").floor())
    else:
        text = pl.col("year").cast(pl.String).str.strip_chars()
        df = df.with_columns(pl.when(text == "").then(None).otherwise(text).alias("year"))
        bad = pl.col("year").is_not_null() & ~pl.col("year").str.contains(r"^[+-]?\d{1,4}(\.0+)?$")
    row = _first_row(df, bad)
    if row is not None:
        value = df.filter(pl.col(_ROW) == row)["year"][0]
        raise InputError(
            f"{value!r} is not an integer year",
            path=path,
            row=row,
            field="year",
            hint="write the year as digits (e.g. 1999) or leave it empty when unknown",
        )
    return df.with_columns(pl.col("year").cast(pl.Float64).cast(pl.Int32))


def _aliases(df: pl.DataFrame) -> pl.DataFrame:
    if "aliases" not in df.columns:
        return df.with_columns(pl.lit([], dtype=pl.List(pl.String)).alias("aliases"))
    col = pl.col("aliases")
    if df.schema["aliases"] in (pl.String, pl.Null):
        col = col.cast(pl.String).str.split("|")
    clean = col.list.eval(pl.element().cast(pl.String).str.strip_chars()).list.eval(
        pl.element().filter(pl.element().is_not_null() & (pl.element() != ""))
    )
    return df.with_columns(clean.fill_null(pl.lit([], dtype=pl.List(pl.String))).alias("aliases"))


def _build(df: pl.DataFrame, path: str | os.PathLike[str] | None, on_duplicate: OnDuplicate) -> pl.DataFrame:
    if on_duplicate not in ("merge", "error", "keep"):
        raise InputError(f"on_duplicate={on_duplicate!r}", hint="use 'merge', 'error' or 'keep'")
    if "title" not in df.columns:
        raise InputError(
            "no 'title' column",
            path=path,
            field="title",
            hint=f"columns found: {', '.join(df.columns) or 'none'}; a catalog needs title and may have "
            "year, item_id (or id), aliases, popularity",
        )
    df = df.with_row_index(_ROW, offset=1)
    id_col = "item_id" if "item_id" in df.columns else ("id" if "id" in df.columns else None)
    if id_col == "id":
        df = df.rename({"id": "item_id"})
    title = pl.col("title").cast(pl.String).str.replace_all(r"\s+", " ").str.strip_chars()
    df = df.with_columns(title.alias("title"))
    if "year" not in df.columns:
        parts = pl.col("title").str.extract_groups(_YEAR_SUFFIX)
        has = parts.struct.field("1").is_not_null() & (parts.struct.field("1") != "")
        df = df.with_columns(
            pl.when(has).then(parts.struct.field("1")).otherwise(pl.col("title")).alias("title"),
            pl.when(has).then(parts.struct.field("2")).otherwise(None).alias("year"),
        )
    row = _first_row(df, pl.col("title").is_null() | (pl.col("title") == ""))
    if row is not None:
        raise InputError("empty title", path=path, row=row, field="title", hint="give every row a title")
    df = _aliases(_year(df, path))
    if "popularity" in df.columns:
        raw = pl.col("popularity")
        if df.schema["popularity"] == pl.String:
            raw = pl.when(raw.str.strip_chars() == "").then(None).otherwise(raw.str.strip_chars())
        df = df.with_columns(raw.alias("popularity"))
        df = df.with_columns(pl.col("popularity").cast(pl.Float64, strict=False).alias("__pop"))
        row = _first_row(df, pl.col("__pop").is_null() & pl.col("popularity").is_not_null())
        if row is not None:
            value = df.filter(pl.col(_ROW) == row)["popularity"][0]
            raise InputError(
                f"{value!r} is not a number",
                path=path,
                row=row,
                field="popularity",
                hint="use a number or leave it empty",
            )
        df = df.with_columns(pl.col("__pop").alias("popularity")).drop("__pop")
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.Float64).alias("popularity"))
    if id_col is None:
        df = df.with_columns(_display_expr().alias("item_id"))
    else:
        df = df.with_columns(pl.col("item_id").cast(pl.String).str.strip_chars())
    row = _first_row(df, pl.col("item_id").is_null() | (pl.col("item_id") == ""))
    if row is not None:
        raise InputError("empty item id", path=path, row=row, field="item_id", hint="give every row an id")
    df = _dedupe(df, path, on_duplicate, has_ids=id_col is not None)
    row = _first_row(df, ~pl.col("item_id").is_first_distinct())
    if row is not None:
        this = df.filter(pl.col(_ROW) == row)["item_id"][0]
        first = df.filter(pl.col("item_id") == this)[_ROW][0]
        raise InputError(
            f"item id {this!r} is also used by row {first}",
            path=path,
            row=row,
            field="item_id",
            hint="give every item its own id",
        )
    core = list(CATALOG_SCHEMA)
    return df.select(core + [c for c in df.columns if c not in core and c != _ROW])


def _dedupe(df: pl.DataFrame, path, on_duplicate: OnDuplicate, *, has_ids: bool) -> pl.DataFrame:
    core = list(CATALOG_SCHEMA)
    exact = ~pl.struct(core).is_first_distinct()
    row = _first_row(df, exact)
    if row is not None:
        if on_duplicate == "error":
            raise InputError(
                "duplicate row (same as an earlier row in every catalog column)",
                path=path,
                row=row,
                field="title",
                hint="remove the repeated row, or load with on_duplicate='merge'",
            )
        n = df.select(exact.sum()).item()
        warnings.warn(
            f"{path or 'catalog'}: merged {n} exact duplicate row(s) (first at row {row})",
            UserWarning,
            stacklevel=4,
        )
        df = df.filter(~exact)
    same_key = ~pl.struct("title", "year").is_first_distinct()
    row = _first_row(df, same_key)
    if row is None:
        return df
    dupes = df.filter(pl.struct("title", "year").is_duplicated())
    if on_duplicate == "keep" and has_ids and dupes["item_id"].n_unique() == dupes.height:
        warnings.warn(
            f"{path or 'catalog'}: kept {dupes.height} rows that share a (title, year) under different ids "
            f"(first at row {row}); grounding prefers the most popular, then the smallest id",
            UserWarning,
            stacklevel=4,
        )
        return df
    this = df.filter(pl.col(_ROW) == row).row(0, named=True)
    first = df.filter((pl.col("title") == this["title"]) & (pl.col("year").eq_missing(this["year"])))
    differs = [c for c in ("item_id", "aliases", "popularity") if first[c].n_unique() > 1]
    raise InputError(
        f"{this['title']!r} ({this['year']}) repeats row {first[_ROW][0]} with a different "
        f"{' and '.join(differs) or 'value'}",
        path=path,
        row=row,
        field="title",
        hint="keep one row per (title, year); load with on_duplicate='keep' to keep rows with distinct ids",
    )


def _load_entity2id(path: Path) -> pl.DataFrame:
    obj = read_json(path, what="catalog file", hint="format='entity2id'")
    if not isinstance(obj, dict) or not all(isinstance(v, str) for v in obj.values()):
        raise InputError('expected an object {"Title (Year)": "id"}', path=path, hint="format='entity2id'")
    df = pl.DataFrame(
        {"name": list(obj), "item_id": list(obj.values())}, schema={"name": pl.String, "item_id": pl.String}
    )
    # Several names for one id: the first is the title, the rest are aliases.
    return df.group_by("item_id", maintain_order=True).agg(
        pl.col("name").first().alias("title"), pl.col("name").slice(1).alias("aliases")
    )


def _sniff(path: Path) -> str:
    fmt = table_format(path)
    if fmt == "json":
        with path.open("rb") as fh:
            head = fh.read(4096).removeprefix(BOM).lstrip()
        if head.startswith(b"{"):
            return "entity2id"
    if fmt == "csv":
        with path.open(encoding="utf-8-sig", errors="replace") as fh:  # a sniff: read_table checks the bytes
            header = fh.readline()
        if "movieName" in header and "movieId" in header:
            return "redial"
    return fmt


def load_catalog(
    path: str | os.PathLike[str],
    *,
    format: CatalogFormat | None = None,
    on_duplicate: OnDuplicate = "merge",
) -> Catalog:
    """Load a catalog file (see the module docstring for formats and the duplicate policy)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("catalog file not found", path=p, hint="check the path")
    fmt = format or _sniff(p)
    if fmt == "entity2id":
        df = _load_entity2id(p)
    elif fmt == "redial":
        raw = read_table(p, format="csv", infer_schema=False)
        missing = [c for c in ("movieId", "movieName") if c not in raw.columns]
        if missing:
            raise InputError(
                f"no {missing[0]!r} column", path=p, field=missing[0], hint="expected ReDial's columns"
            )
        cols = [pl.col("movieId").alias("item_id"), pl.col("movieName").alias("title")]
        if "nbMentions" in raw.columns:
            cols.append(pl.col("nbMentions").alias("popularity"))
        df = raw.select(cols)
        if on_duplicate == "merge":
            on_duplicate = "keep"
    elif fmt in ("csv", "tsv", "parquet", "json", "jsonl"):
        df = read_table(p, format=fmt, infer_schema=False)
    else:
        raise InputError(
            f"unknown catalog format {fmt!r}",
            path=p,
            hint="use csv, tsv, parquet, json, jsonl, entity2id or redial",
        )
    if df.height == 0:  # every title would ground to nothing, silently
        raise InputError("the catalog has no items (an empty file or a header only)", path=p)
    return Catalog.from_frame(df, path=p, on_duplicate=on_duplicate)
