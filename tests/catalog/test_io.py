"""atomic_write / atomic_dir leave the old output or the new one, never half; read_table by extension."""

from __future__ import annotations

import json

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from catalog import InputError, atomic_dir, atomic_write, read_table


def test_atomic_write_replaces_on_success(tmp_path) -> None:
    out = tmp_path / "sub" / "out.json"
    with atomic_write(out) as tmp:
        assert tmp.parent == out.parent and tmp != out
        tmp.write_text(json.dumps({"v": 1}))
    with atomic_write(out) as tmp:
        tmp.write_text(json.dumps({"v": 2}))
    assert json.loads(out.read_text()) == {"v": 2}
    assert sorted(p.name for p in out.parent.iterdir()) == ["out.json"]


def test_atomic_write_keeps_old_on_failure(tmp_path) -> None:
    out = tmp_path / "out.txt"
    out.write_text("old")

    def killed_write() -> None:
        with atomic_write(out) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        killed_write()
    assert out.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_atomic_dir_swaps_and_rolls_back(tmp_path) -> None:
    out = tmp_path / "ds"
    with atomic_dir(out) as tmp:
        (tmp / "a.txt").write_text("1")
    with atomic_dir(out) as tmp:
        (tmp / "b.txt").write_text("2")
    assert sorted(p.name for p in out.iterdir()) == [".remark-output.json", "b.txt"]

    def killed_dir() -> None:
        with atomic_dir(out) as tmp:
            (tmp / "c.txt").write_text("3")
            raise KeyError("killed")

    with pytest.raises(KeyError):
        killed_dir()
    assert sorted(p.name for p in out.iterdir()) == [".remark-output.json", "b.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


@pytest.mark.parametrize("ext", ["csv", "tsv", "parquet", "json", "jsonl"])
def test_read_table_formats(tmp_path, ext: str) -> None:
    df = pl.DataFrame({"title": ["Heat", "Alien"], "year": [1995, 1979]})
    path = tmp_path / f"t.{ext}"
    {
        "csv": lambda: df.write_csv(path),
        "tsv": lambda: df.write_csv(path, separator="\t"),
        "parquet": lambda: df.write_parquet(path),
        "json": lambda: df.write_json(path),
        "jsonl": lambda: df.write_ndjson(path),
    }[ext]()
    assert_frame_equal(read_table(path), df, check_dtypes=False)
    assert read_table(path, infer_schema=False)["title"].to_list() == ["Heat", "Alien"]


def test_read_table_errors(tmp_path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read_table(tmp_path / "nope.csv")
    odd = tmp_path / "t.xlsx"
    odd.write_text("x")
    with pytest.raises(InputError, match="extension") as err:
        read_table(odd)
    assert err.value.path == str(odd)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="cannot read as json"):
        read_table(bad)
