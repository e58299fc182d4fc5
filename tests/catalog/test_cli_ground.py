"""`remark ground`: titles or lists in, one JSON object (or table row) per line out."""

from __future__ import annotations

import io
import json

import pytest

from remark.cli.main import main


@pytest.fixture
def catalog_csv(tmp_path):
    path = tmp_path / "cat.csv"
    path.write_text("title,year\nThe Matrix,1999\nArrival,2016\nHeat,1995\n", encoding="utf-8")
    return path


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_titles_from_file_json(tmp_path, catalog_csv, capsys) -> None:
    src = tmp_path / "in.txt"
    src.write_text(
        "Matrix, The (1999)\n**1. Arrival (2016)** - a linguist\nNothing Here (2001)\n\n", encoding="utf-8"
    )
    assert main(["ground", "--catalog", str(catalog_csv), "--json", str(src)]) == 0
    rows = _json_lines(capsys.readouterr().out)
    assert [r["input"] for r in rows] == [
        "Matrix, The (1999)",
        "**1. Arrival (2016)** - a linguist",
        "Nothing Here (2001)",
        "",
    ]
    assert [r["item_id"] for r in rows] == ["The Matrix (1999)", "Arrival (2016)", None, None]
    assert {k: rows[0][k] for k in ("title", "year", "rule", "score")} == {
        "title": "The Matrix",
        "year": 1999,
        "rule": "exact",
        "score": 100.0,
    }
    assert rows[0]["detail"]
    assert rows[2]["rule"] == "none" and rows[2]["title"] is None


def test_stdin_lists_and_exact_mode(catalog_csv, capsys, monkeypatch) -> None:
    completion = "Here you go:\n\n1. The Matrix (1999)\n2. the matrix (1999)\n3. ???\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(completion))
    assert main(["ground", "--catalog", str(catalog_csv), "--lists", "--match-mode", "exact", "--json"]) == 0
    rows = _json_lines(capsys.readouterr().out)
    assert [(r["rank"], r["item_id"], r["rule"]) for r in rows] == [
        (0, "The Matrix (1999)", "exact"),
        (1, None, "none"),  # exact mode is case sensitive, as Rank-GRPO
        (2, None, "none"),
    ]
    assert all(completion[r["start"] : r["end"]] == r["input"] for r in rows)


def test_jsonl_lists_and_table_output(tmp_path, catalog_csv, capsys) -> None:
    src = tmp_path / "c.jsonl"
    src.write_text(
        json.dumps("1. Heat (1995)") + "\n" + json.dumps({"completion": "- Arrival (2016)\n- Heat"}) + "\n"
    )
    assert main(["ground", "--catalog", str(catalog_csv), "--lists", str(src)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "input\titem_id\trule\tscore"
    assert out[1:] == [
        "1. Heat (1995)\tHeat (1995)\texact\t100.0",
        "- Arrival (2016)\tArrival (2016)\texact\t100.0",
        "- Heat\tHeat (1995)\texact\t100.0",
    ]


def test_bad_input_exits_2_without_traceback(tmp_path, catalog_csv, capsys) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("title,year\nHeat,nineteen\n")
    assert main(["ground", "--catalog", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "row 1" in err and "field 'year'" in err and "Traceback" not in err
    assert main(["ground", "--catalog", str(catalog_csv), str(tmp_path / "missing.txt")]) == 2
    assert "input file not found" in capsys.readouterr().err
    assert main(["ground", "--catalog", str(catalog_csv), "--match-threshold", "150", str(bad)]) == 2
    assert (
        "argument --match-threshold: '150' is out of range: must be >= 0 and <= 100"
        in capsys.readouterr().err
    )
    jl = tmp_path / "x.jsonl"
    jl.write_text('"ok"\n{"text": 1}\n')
    assert main(["ground", "--catalog", str(catalog_csv), "--lists", str(jl)]) == 2
    assert "row 2" in capsys.readouterr().err
