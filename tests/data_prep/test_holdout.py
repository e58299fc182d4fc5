"""Responder hold-out on hand-built pooled rows: sides, re-pooled unions and counts, seeds, drops."""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest

from data_prep.holdout import POOLED_SCHEMA, holdout_responders
from data_prep.pool import expand_responders


def pooled_rows() -> pl.DataFrame:
    msg = [{"role": "user", "content": "q"}]
    rows = {
        "request_id": ["q1", "q2", "q3", "q4"],
        "prompt": [msg] * 4,
        "seen": [["s"], [], [], []],
        "responders": [
            [["a", "b"], ["a"]],  # 2 responders: one on each side
            [["a"], ["b"], ["c"]],  # 3: round(1.5) -> 2 held out (1 left to train)
            [["x"], ["x"], ["y"], ["x", "z"], ["y"], ["w"]],  # 6: 3 and 3
            [["only"]],  # 1 responder: cannot be split, dropped
        ],
        "n_responders": [2, 3, 6, 1],
        "union": [["a", "b"], ["a", "b", "c"], ["x", "y", "z", "w"], ["only"]],
        "counts": [[2, 1], [1, 1, 1], [3, 2, 1, 1], [1]],
        "ungrounded": [["raw?"], [], [], []],
        "split": ["train", "train", "valid", "train"],
        "responder_ids": [["r1", "r2"], ["r1", "r2", "r3"], ["p1", "p2", "p3", "p4", "p5", "p6"], ["z"]],
    }
    return pl.DataFrame(rows, schema=POOLED_SCHEMA)


def _by_responder(side: pl.DataFrame) -> dict[tuple[str, str], list[str]]:
    return {
        (r["request_id"], rid): items
        for r in side.iter_rows(named=True)
        for rid, items in zip(r["responder_ids"], r["responders"], strict=True)
    }


def test_sides_partition_every_request_and_keep_one_responder_each():
    pooled = pooled_rows()
    out = holdout_responders(pooled, fraction=0.5, seed=0)
    assert out.dropped == ["q4"]
    for side in (out.train, out.heldout):
        assert side.schema == POOLED_SCHEMA
        assert side["request_id"].to_list() == ["q1", "q2", "q3"]
        assert (side["n_responders"] >= 1).all()
        assert side["n_responders"].to_list() == side["responders"].list.len().to_list()
    assert out.heldout["n_responders"].to_list() == [1, 2, 3]
    assert out.train["n_responders"].to_list() == [1, 1, 3]
    # the two sides partition each request's responders, items unchanged
    train, held = _by_responder(out.train), _by_responder(out.heldout)
    assert not set(train) & set(held)
    original = _by_responder(pooled.filter(pl.col("request_id") != "q4"))
    assert {**train, **held} == original
    # carried columns
    for side in (out.train, out.heldout):
        assert side["seen"].to_list() == [["s"], [], []]
        assert side["ungrounded"].to_list() == [["raw?"], [], []]
        assert side["split"].to_list() == ["train", "train", "valid"]


def test_union_and_counts_are_recomputed_from_each_side():
    out = holdout_responders(pooled_rows(), fraction=0.5, seed=3)
    for side in (out.train, out.heldout):
        for r in side.iter_rows(named=True):
            c = Counter(x for items in r["responders"] for x in items)
            assert dict(zip(r["union"], r["counts"], strict=True)) == dict(c)
            assert r["counts"] == sorted(r["counts"], reverse=True)
            # ties keep first-mention order in responder order
            first = list(dict.fromkeys(x for items in r["responders"] for x in items))
            for i in range(len(r["union"]) - 1):
                if r["counts"][i] == r["counts"][i + 1]:
                    assert first.index(r["union"][i]) < first.index(r["union"][i + 1])


def test_hand_computed_side_of_one_request():
    """q3 with a fixed draw: the held-out side's union is exactly the counted items of its responders."""
    out = holdout_responders(pooled_rows(), fraction=0.5, seed=0)
    held = out.heldout.filter(pl.col("request_id") == "q3").row(0, named=True)
    items = dict(zip(["p1", "p2", "p3", "p4", "p5", "p6"], [["x"], ["x"], ["y"], ["x", "z"], ["y"], ["w"]]))
    expected = Counter(x for rid in held["responder_ids"] for x in items[rid])
    assert dict(zip(held["union"], held["counts"], strict=True)) == dict(expected)
    # responder order is the original order
    order = ["p1", "p2", "p3", "p4", "p5", "p6"]
    assert held["responder_ids"] == sorted(held["responder_ids"], key=order.index)


def test_seeded_and_fraction_respected():
    many = pl.DataFrame(
        {
            "request_id": [f"q{i}" for i in range(40)],
            "prompt": [[{"role": "user", "content": "q"}]] * 40,
            "seen": [[]] * 40,
            "responders": [[[f"i{j % 5}"] for j in range(10)]] * 40,
            "n_responders": [10] * 40,
            "union": [[f"i{j}" for j in range(5)]] * 40,
            "counts": [[2] * 5] * 40,
            "ungrounded": [[]] * 40,
            "split": ["train"] * 40,
        },
        schema=REQUESTS_ONLY,
    )
    a = holdout_responders(many, fraction=0.3, seed=1)
    b = holdout_responders(many, fraction=0.3, seed=1)
    c = holdout_responders(many, fraction=0.3, seed=2)
    assert a.heldout.equals(b.heldout) and a.train.equals(b.train)
    assert not a.heldout["responder_ids"].equals(c.heldout["responder_ids"])
    assert set(a.heldout["n_responders"].to_list()) == {3}
    assert set(a.train["n_responders"].to_list()) == {7}
    # without responder_ids, responders are named by their position
    assert all(x.isdigit() for ids in a.train["responder_ids"].to_list() for x in ids)
    # both sides expand to Rank-GRPO's per-responder view
    assert expand_responders(a.train).height == 40 * 7


def test_bad_fraction():
    with pytest.raises(ValueError, match="fraction"):
        holdout_responders(pooled_rows(), fraction=1.0)


REQUESTS_ONLY = {k: v for k, v in POOLED_SCHEMA.items() if k != "responder_ids"}
