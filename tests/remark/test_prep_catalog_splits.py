"""``remark prep --catalog-splits``: the written catalog holds only the items the named splits' requests
name (popularity = their mentions there), while every request keeps the targets pooled against the whole
catalog; ProtoQA's answers are carried to ``answers.parquet``."""

from __future__ import annotations

import json

import polars as pl
import pytest

from catalog.table import Catalog
from data_prep.catalog_splits import catalog_of_splits
from data_prep.dataset import load_dataset
from data_prep.shipped import protoqa_file
from remark.cli.main import main


def prep(out, *extra) -> int:
    argv = ["prep", "protoqa", "--input", str(protoqa_file("crowdsourced")), "--items", "clusters",
            "--split-fractions", "train=0.5,test=0.5", "--out", str(out), *extra]  # fmt: skip
    return main(argv)


def test_catalog_of_the_training_split_only(tmp_path, capsys):
    assert prep(tmp_path / "all") == 0
    assert prep(tmp_path / "train", "--catalog-splits", "train") == 0
    whole, cut = load_dataset(tmp_path / "all"), load_dataset(tmp_path / "train")
    # the requests (targets, splits) are the same; only the catalog differs
    assert cut.requests.equals(whole.requests)
    train = cut.requests.filter(pl.col("split") == "train")
    named = train.select(pl.col("union").alias("item_id"), "counts").explode("item_id", "counts")
    mentions = named.group_by("item_id").agg(pl.col("counts").sum().cast(pl.Float64))
    assert set(cut.catalog.df["item_id"]) == set(mentions["item_id"])
    got = cut.catalog.df.join(mentions, on="item_id")
    assert (got["popularity"] == got["counts"]).all()
    assert len(cut.catalog) < len(whole.catalog)
    test_items = set(cut.requests.filter(pl.col("split") == "test")["union"].explode())
    assert test_items - set(cut.catalog.df["item_id"])  # test answers no training question names
    meta = json.loads((tmp_path / "train" / "meta.json").read_text())
    assert meta["catalog_splits"] == ["train"] and meta["catalog_items"] == len(cut.catalog)
    assert json.loads((tmp_path / "all" / "meta.json").read_text())["catalog_splits"] is None
    # the answers travel with the dataset, one row per request
    assert (
        cut.answers is not None
        and cut.answers["request_id"].to_list() == cut.requests["request_id"].to_list()
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--catalog-splits", "holdout"], "unknown split 'holdout'"),
        (["--split-fractions", "train=1", "--catalog-splits", "test"], "no request in split(s) ['test']"),
    ],
)
def test_bad_catalog_splits_are_refused(extra, message, tmp_path, capsys):
    argv = ["prep", "protoqa", "--input", str(protoqa_file("crowdsourced")), "--out", str(tmp_path / "d")]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert "field '--catalog-splits'" in err and message in err and "Traceback" not in err
    assert not (tmp_path / "d").exists()


def test_the_synthetic_source_refuses_it(tmp_path, capsys):
    assert main(["prep", "synthetic", "--out", str(tmp_path / "d"), "--catalog-splits", "train"]) == 2
    assert "--catalog-splits has no effect" in capsys.readouterr().err


def test_seen_items_of_the_splits_are_kept_with_no_mentions():
    catalog = Catalog(
        pl.DataFrame(
            {
                "item_id": ["a", "b", "c", "d"],
                "title": ["A", "B", "C", "D"],
                "year": [None, None, None, None],
                "aliases": [[], [], [], []],
                "popularity": [9.0, 9.0, 9.0, 9.0],
            },
            schema_overrides={"year": pl.Int32, "aliases": pl.List(pl.String)},
        )
    )
    requests = pl.DataFrame(
        {
            "split": ["train", "train", "test"],
            "union": [["b", "a"], ["b"], ["d"]],
            "counts": [[2, 1], [3], [5]],
            "seen": [["c"], [], []],
        },
        schema_overrides={"counts": pl.List(pl.UInt32)},
    )
    cut = catalog_of_splits(catalog, requests, ["train"])
    assert cut.df.select("item_id", "popularity").rows() == [("a", 1.0), ("b", 5.0), ("c", 0.0)]
