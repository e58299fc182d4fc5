"""The embedded synthetic world: seeded, Reddit-like responder counts, mostly single-mention items."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from data_prep.synthetic import generate_world


def test_same_seed_same_world_and_different_seed_differs():
    a, b, c = generate_world(seed=3), generate_world(seed=3), generate_world(seed=4)
    assert_frame_equal(a.threads, b.threads)
    assert_frame_equal(a.catalog, b.catalog)
    assert not a.threads.equals(c.threads)


def test_reddit_like_shape():
    w = generate_world(n_requests=1000, seed=0)
    th = w.threads
    n_x = th.group_by("request_id").agg(pl.col("responder_id").n_unique())["responder_id"]
    assert 4.9 < n_x.mean() < 5.8  # Reddit-v2 test: ~5.35 responders per request
    assert n_x.min() == 1 and n_x.max() <= 40
    counts = th.group_by("request_id", "title", "year").agg(pl.col("responder_id").n_unique().alias("c"))
    assert (counts["c"] == 1).mean() > 0.6  # most union items are named by exactly one responder
    assert set(th["split"].unique()) == {"train", "valid", "test"}


def test_mentions_are_catalog_items_relevant_and_not_seen():
    w = generate_world(n_requests=50, seed=1)
    ids = set(w.catalog["item_id"])
    assert w.catalog["item_id"].n_unique() == w.catalog.height
    th = w.threads.with_columns(item_id=pl.format("{} ({})", "title", "year"))
    assert set(th["item_id"]) <= ids
    rel = dict(zip(w.relevant["request_id"], w.relevant["relevant"], strict=True))
    for row in th.iter_rows(named=True):
        assert row["item_id"] in rel[row["request_id"]]
        assert row["item_id"] not in row["seen"]
        assert set(row["seen"]) <= ids
    # A responder names each item at most once.
    assert th.select("request_id", "responder_id", "item_id").is_duplicated().sum() == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="split_fractions"):
        generate_world(split_fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="n_items"):
        generate_world(n_items=5)
