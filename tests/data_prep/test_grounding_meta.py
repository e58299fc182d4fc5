"""The dataset's grounding record: `remark prep` writes it, every command that reads a dataset uses it,
and a missing or bad record is a clear error."""

from __future__ import annotations

import json

import pytest

from catalog.io.errors import InputError
from catalog.match import GroundingSettings, Matcher
from catalog.table import Catalog
from data_prep.dataset import dataset_grounding, load_dataset
from data_prep.pool import pool_threads
from data_prep.schema import Threads
from data_prep.synthetic import build_dataset, generate_world
from remark.cli.main import main
from tests.data_prep.conftest import write_catalog_csv, write_jsonl
from tests.data_prep.test_pool import ROWS


@pytest.fixture
def inputs(tmp_path):
    return write_jsonl(tmp_path / "threads.jsonl", ROWS), write_catalog_csv(tmp_path / "cat.csv")


def prep(inputs, out, *flags):
    data, cat = inputs
    argv = ["prep", "threads", "--input", str(data), "--catalog", str(cat), "--out", str(out)]
    return main([*argv, "--split-fractions", "test=1.0", *flags])


def q2_union(out) -> list[str]:
    ds = load_dataset(out)
    return ds.requests.filter(ds.requests["request_id"] == "q2")["union"].to_list()[0]


def test_prep_records_its_grounding_and_grounds_with_it(tmp_path, inputs, capsys):
    assert prep(inputs, tmp_path / "default") == 0
    meta = json.loads((tmp_path / "default" / "meta.json").read_text())
    assert meta["grounding"] == GroundingSettings().to_dict()
    # frank's "Moon" (2010) is one year off Moon (2009): grounded with year_tolerance 2, not with 0
    assert q2_union(tmp_path / "default") == ["m5", "m3"]
    flags = ["--year-tolerance", "0", "--match-threshold", "85", "--match-scorer", "WRatio"]
    assert prep(inputs, tmp_path / "strict", *flags) == 0
    ds = load_dataset(tmp_path / "strict")
    assert ds.grounding == GroundingSettings(year_tolerance=0, match_threshold=85, match_scorer="WRatio")
    assert q2_union(tmp_path / "strict") == ["m5"]
    capsys.readouterr()
    assert prep(inputs, tmp_path / "bad", "--year-tolerance", "-1") == 2
    err = capsys.readouterr().err
    assert "argument --year-tolerance: '-1' is out of range: must be >= 0" in err and "Traceback" not in err
    assert not (tmp_path / "bad").exists()


def test_a_dataset_without_its_grounding_record_is_refused(tmp_path, inputs, capsys):
    out = tmp_path / "ds"
    assert prep(inputs, out) == 0
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["grounding"]
    meta_path.write_text(json.dumps({**meta, "match": "exact", "year_tolerance": 1}))
    with pytest.raises(InputError) as err:
        load_dataset(out)
    assert (err.value.path, err.value.field) == (str(meta_path), "grounding")
    assert "re-run remark prep" in str(err.value)
    with pytest.raises(InputError, match="field 'grounding': missing"):
        dataset_grounding({"match_mode": "normalized"})
    preds = write_jsonl(tmp_path / "p.jsonl", [{"request_id": "q1", "recommendations": ["Moon (2009)"]}])
    capsys.readouterr()
    argv = ["eval", "score", "--data", str(out), "--predictions", str(preds), "--split", "all", "--k", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{meta_path}, field 'grounding'" in err and "Traceback" not in err and len(err.splitlines()) == 1
    meta_path.write_text(
        json.dumps({**meta, "grounding": {**GroundingSettings().to_dict(), "year_tolerance": -2}})
    )
    with pytest.raises(InputError) as err:
        load_dataset(out)
    assert err.value.path == str(meta_path) and err.value.field == "grounding.year_tolerance"


def test_a_table_with_columns_of_another_layout_is_refused(tmp_path, inputs):
    """responder_rows.parquet holds each responder's own list and the request id: a file that carries the
    request's fields too is not this layout, and is refused rather than trimmed."""
    import polars as pl

    out = tmp_path / "ds"
    assert prep(inputs, out) == 0
    rows_path = out / "responder_rows.parquet"
    rows = pl.read_parquet(rows_path)
    rows.with_columns(pl.lit("x").alias("prompt")).write_parquet(rows_path)
    with pytest.raises(InputError) as err:
        load_dataset(out)
    assert (err.value.path, err.value.field) == (str(rows_path), "prompt")
    assert "unexpected column(s) prompt" in str(err.value) and "re-run remark prep" in str(err.value)
    rows.write_parquet(rows_path)
    assert load_dataset(out).responder_rows.columns == rows.columns


def test_ground_and_diagnose_take_the_dataset_grounding(tmp_path, inputs, capsys):
    out = tmp_path / "strict"
    assert prep(inputs, out, "--year-tolerance", "0") == 0
    titles = tmp_path / "titles.txt"
    titles.write_text("Moon (2010)\nMoon (2009)\n")
    capsys.readouterr()
    assert main(["ground", "--data", str(out), "--json", str(titles)]) == 0
    captured = capsys.readouterr()
    assert [json.loads(x)["item_id"] for x in captured.out.splitlines()] == [None, "m3"]
    assert captured.err == ""
    assert main(["ground", "--data", str(out), "--json", "--year-tolerance", "1", str(titles)]) == 0
    captured = capsys.readouterr()
    assert [json.loads(x)["item_id"] for x in captured.out.splitlines()] == ["m3", "m3"]
    assert "year_tolerance=1 (dataset: 0), set by command-line flags" in captured.err
    # diagnose grounds --lists completions with the dataset's settings too
    lists = write_jsonl(
        tmp_path / "lists.jsonl",
        [
            {"request_id": "q1", "completions": ["Moon (2010)", "Moon (2009)"]},
            {"request_id": "q2", "completions": ["Moon (2010)", "Solaris (1972)"]},
        ],
    )
    argv = ["diagnose", str(out), "--lists", str(lists), "--group-size", "2", "--k", "1", "--json"]
    assert main(argv) == 0
    strict = json.loads(capsys.readouterr().out)
    assert main([*argv, "--year-tolerance", "2"]) == 0
    loose = json.loads(capsys.readouterr().out)
    # q1's union holds Moon (2009): "Moon (2010)" is a hit only with tolerance 2; q2's holds Solaris only
    assert strict["schemes"]["union"]["mean_reward"] == pytest.approx(2 / 4)
    assert loose["schemes"]["union"]["mean_reward"] == pytest.approx(3 / 4)
    assert strict["notes"]["grounding"].startswith("match_mode=fuzzy, year_tolerance=0")


def test_synthetic_threads_pool_alike_in_every_mode_and_record_fuzzy(tmp_path):
    world = generate_world(n_requests=200, n_items=48, seed=0)
    catalog = Catalog.from_frame(world.catalog)
    threads = Threads(world.threads, catalog, dict(world.meta))
    pooled = {
        m: pool_threads(threads, Matcher(catalog, GroundingSettings(match_mode=m)))
        for m in ("exact", "fuzzy")
    }
    assert pooled["exact"].equals(pooled["fuzzy"])
    ds = build_dataset(tmp_path / "syn", n_requests=200, n_items=48, seed=0)
    assert load_dataset(tmp_path / "syn").grounding == ds.grounding == GroundingSettings()
