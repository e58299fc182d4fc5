"""Catalog loading: formats, derived ids, round trip, and bad input named by file, row and field."""

from __future__ import annotations

import json
import warnings

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from catalog import CATALOG_SCHEMA, Catalog, InputError, load_catalog


def _csv(tmp_path, text: str, name: str = "cat.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_generic_csv_without_ids(tmp_path) -> None:
    path = _csv(tmp_path, "title,year\nThe Matrix,1999\n  Heat ,1995\nSome Answer,\n")
    cat = load_catalog(path)
    assert dict(cat.df.schema) == CATALOG_SCHEMA
    assert cat.df["item_id"].to_list() == ["The Matrix (1999)", "Heat (1995)", "Some Answer"]
    assert cat.df["title"].to_list() == ["The Matrix", "Heat", "Some Answer"]
    assert cat.df["year"].to_list() == [1999, 1995, None]
    assert cat.display("Heat (1995)") == "Heat (1995)"
    assert cat.display("Some Answer") == "Some Answer"
    assert cat.has_years and len(cat) == 3


def test_generic_csv_with_ids_aliases_popularity_and_extra_columns(tmp_path) -> None:
    path = _csv(
        tmp_path,
        "id,title,year,aliases,popularity,genre\n007,Dr. No,1962,Doctor No|  ,3.5,spy\n8,Heat,,,,crime\n",
    )
    cat = load_catalog(path)
    assert cat.df["item_id"].to_list() == ["007", "8"]  # strings, leading zeros kept
    assert cat.df["aliases"].to_list() == [["Doctor No"], []]
    assert cat.df["popularity"].to_list() == [3.5, None]
    assert cat.df["genre"].to_list() == ["spy", "crime"]
    assert cat.display("8") == "Heat"


def test_title_only_csv_splits_years(tmp_path) -> None:
    cat = load_catalog(_csv(tmp_path, "title\nFrozen  (2013)\nThe Mummy \n"))
    assert cat.df.select("title", "year").rows() == [("Frozen", 2013), ("The Mummy", None)]


def test_year_less_catalog(tmp_path) -> None:
    df = pl.DataFrame({"title": ["dog", "cat"], "aliases": [["puppy", "doggo"], []]})
    cat = Catalog.from_frame(df)
    assert not cat.has_years
    assert cat.df["item_id"].to_list() == ["dog", "cat"]


@pytest.mark.parametrize("ext", ["parquet", "json", "jsonl"])
def test_round_trip(tmp_path, ext: str) -> None:
    df = pl.DataFrame(
        {
            "item_id": ["a", "b"],
            "title": ["Heat", "Alien"],
            "year": [1995, None],
            "aliases": [["Heat!"], []],
            "popularity": [2.0, None],
        }
    )
    cat = Catalog.from_frame(df)
    path = tmp_path / f"c.{ext}"
    if ext == "parquet":
        cat.write_parquet(path)
    elif ext == "json":
        cat.df.write_json(path)
    else:
        cat.df.write_ndjson(path)
    assert_frame_equal(load_catalog(path).df, cat.df)


def test_entity2id(tmp_path) -> None:
    path = tmp_path / "entity2id.json"
    path.write_text(
        json.dumps(
            {"The Matrix (1999)": "tt0133093", "Heat (1995)": "tt0113277", "Matrix (1999)": "tt0133093"}
        )
    )
    cat = load_catalog(path)
    assert cat.df.select("item_id", "title", "year", "aliases").rows() == [
        ("tt0133093", "The Matrix", 1999, ["Matrix (1999)"]),
        ("tt0113277", "Heat", 1995, []),
    ]


def test_redial(tmp_path) -> None:
    path = _csv(
        tmp_path,
        "movieId,movieName,nbMentions\n1,Frozen  (2013),26\n2,Tinker Bell ,1\n3,Triangle (2009),2\n4,Triangle  (2009),5\n",
        name="movies_with_mentions.csv",
    )
    with pytest.warns(UserWarning, match="kept 2 rows"):
        cat = load_catalog(path)
    assert cat.df.select("item_id", "title", "year", "popularity").rows() == [
        ("1", "Frozen", 2013, 26.0),
        ("2", "Tinker Bell", None, 1.0),
        ("3", "Triangle", 2009, 2.0),
        ("4", "Triangle", 2009, 5.0),
    ]
    with pytest.raises(InputError) as err:
        load_catalog(path, on_duplicate="error")
    assert (err.value.row, err.value.field) == (4, "title")


def test_missing_title_column(tmp_path) -> None:
    path = _csv(tmp_path, "name,year\nHeat,1995\n")
    with pytest.raises(InputError, match="no 'title' column") as err:
        load_catalog(path)
    assert err.value.path == str(path) and err.value.field == "title"
    assert "columns found: name, year" in str(err.value)


def test_non_integer_year_names_row_and_field(tmp_path) -> None:
    path = _csv(tmp_path, "title,year\nHeat,1995\nAlien,19x9\n")
    with pytest.raises(InputError) as err:
        load_catalog(path)
    assert (err.value.path, err.value.row, err.value.field) == (str(path), 2, "year")
    assert "'19x9' is not an integer year" in str(err.value)
    assert str(path) in str(err.value) and "row 2" in str(err.value)


def test_float_years(tmp_path) -> None:
    ok = Catalog.from_frame(pl.DataFrame({"title": ["A", "B"], "year": [1999.0, None]}))
    assert ok.df["year"].to_list() == [1999, None]
    with pytest.raises(InputError) as err:
        Catalog.from_frame(pl.DataFrame({"title": ["A", "B"], "year": [1999.0, 1999.5]}))
    assert (err.value.row, err.value.field) == (2, "year")


@pytest.mark.parametrize("title", ["", "   "])
def test_empty_title(tmp_path, title: str) -> None:
    path = _csv(tmp_path, f'title,year\nHeat,1995\n"{title}",2000\n')
    with pytest.raises(InputError, match="empty title") as err:
        load_catalog(path)
    assert (err.value.row, err.value.field) == (2, "title")


def test_bad_popularity(tmp_path) -> None:
    with pytest.raises(InputError) as err:
        load_catalog(_csv(tmp_path, "title,popularity\nHeat,3\nAlien,many\n"))
    assert (err.value.row, err.value.field) == (2, "popularity")


def test_exact_duplicates_merge_with_warning_or_refuse(tmp_path) -> None:
    path = _csv(tmp_path, "title,year\nHeat,1995\nAlien,1979\nHeat,1995\n")
    with pytest.warns(UserWarning, match="merged 1 exact duplicate row"):
        cat = load_catalog(path)
    assert cat.df["item_id"].to_list() == ["Heat (1995)", "Alien (1979)"]
    with pytest.raises(InputError, match="duplicate row") as err:
        load_catalog(path, on_duplicate="error")
    assert (err.value.row, err.value.field) == (3, "title")


def test_conflicting_duplicates_are_errors(tmp_path) -> None:
    path = _csv(tmp_path, "item_id,title,year\na,Heat,1995\nb,Alien,1979\nc,Heat,1995\n")
    with pytest.raises(InputError, match="repeats row 1 with a different item_id") as err:
        load_catalog(path)
    assert (err.value.row, err.value.field) == (3, "title")
    with warnings.catch_warnings(record=True):
        kept = load_catalog(path, on_duplicate="keep")
    assert kept.df["item_id"].to_list() == ["a", "b", "c"]
    no_ids = _csv(tmp_path, "title,year,popularity\nHeat,1995,1\nHeat,1995,2\n", name="p.csv")
    with pytest.raises(InputError, match="different popularity"):
        load_catalog(no_ids, on_duplicate="keep")


def test_duplicate_ids(tmp_path) -> None:
    path = _csv(tmp_path, "item_id,title,year\na,Heat,1995\na,Alien,1979\n")
    with pytest.raises(InputError, match="also used by row 1") as err:
        load_catalog(path)
    assert (err.value.row, err.value.field) == (2, "item_id")


def test_catalog_constructor_checks_schema() -> None:
    with pytest.raises(InputError, match="column 'year' has type Int64, expected Int32"):
        Catalog(pl.DataFrame({"item_id": ["a"], "title": ["Heat"], "year": [1995]}))
    year = pl.Series("year", [1995], dtype=pl.Int32)
    with pytest.raises(InputError, match="lacks column 'aliases'"):
        Catalog(pl.DataFrame({"item_id": ["a"], "title": ["Heat"], "year": year, "popularity": [1.0]}))


def test_unknown_format_and_missing_file(tmp_path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_catalog(tmp_path / "nope.csv")
    path = _csv(tmp_path, "title\nHeat\n", name="c.txt")
    with pytest.raises(InputError, match="extension"):
        load_catalog(path)
    with pytest.raises(InputError, match="unknown catalog format"):
        load_catalog(_csv(tmp_path, "title\nHeat\n"), format="xml")  # type: ignore[arg-type]
