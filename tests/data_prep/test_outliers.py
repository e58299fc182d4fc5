"""Requests whose responder count is an outlier (``data_prep.outliers``), on hand-computed tables, and
what the rule flags in ProtoQA's shipped scraped dev file."""

from __future__ import annotations

import json

import polars as pl
import pytest

from data_prep.outliers import OUTLIER_SCHEMA, RULE, outlier_requests


def table(rows: list[tuple[str, str | None, list[int]]]) -> pl.DataFrame:
    """Requests ``(id, split, counts)`` where every responder names one item: n_x = sum_i c_i."""
    return pl.DataFrame(
        {
            "request_id": [r[0] for r in rows],
            "split": [r[1] for r in rows],
            "n_responders": [sum(r[2]) for r in rows],
            "counts": [r[2] for r in rows],
        },
        schema={
            "request_id": pl.String,
            "split": pl.String,
            "n_responders": pl.UInt32,
            "counts": pl.List(pl.UInt32),
        },
    )


def ids(frame: pl.DataFrame) -> list[str]:
    return frame["request_id"].to_list()


def test_equal_counts_flag_the_copied_cluster_count_and_nothing_ordinary():
    q4013 = [54] * 14 + [38] * 7 + [6] * 11 + [2] * 3  # 1094 mentions, 756 of them in the 54s: 69%
    rows = [
        ("all54", "a", [54] * 35),  # 35 clusters of exactly 54: 100%
        ("q4013", "a", q4013),
        ("ordinary", "a", [40, 30, 20, 10]),
        ("four", "a", [20, 20, 20, 20, 5]),  # 4 equal items: fewer than 5
        ("small", "a", [9] * 6 + [1]),  # 6 equal items of 9 < 10 mentions
        ("minor", "a", [10] * 5 + [60]),  # 5 x 10 = 50 of 110: 45% < 50%
        ("half", "a", [10] * 5 + [50]),  # 5 x 10 = 50 of 100: exactly 50%, flagged
        ("none", "a", []),
    ]
    # n = 1890, 1094, 100, 85, 55, 110, 100, 0: median 100, MAD 30, so the MAD rule flags n > 400 only
    got = outlier_requests(table(rows))
    assert sorted(ids(got)) == ["all54", "half", "q4013"]
    assert sorted(ids(got.filter(pl.col("equal_counts")))) == ["all54", "half", "q4013"]
    assert sorted(ids(got.filter(pl.col("responders")))) == ["all54", "q4013"]
    row = got.filter(pl.col("request_id") == "q4013").row(0, named=True)
    assert row["reason"].startswith("equal counts: 14 answers of exactly 54 mentions hold 69% of 1094")
    assert got.filter(pl.col("request_id") == "half")["reason"].item().startswith("equal counts: 5 answers")


def test_the_mad_rule_by_hand():
    # split a: n = 10, 11, 12, 13, 14, 33, 34; median 13; |n - 13| = 3, 2, 1, 0, 1, 20, 21 -> MAD 2;
    # threshold 13 + 10 x 2 = 33: 33 is not above it, 34 is
    a = [(f"a{n}", "a", [n]) for n in (10, 11, 12, 13, 14, 33, 34)]
    # split b: n = 5, 5, 5, 5, 6, 15, 16; median 5; |n - 5| = 0, 0, 0, 0, 1, 10, 11 -> MAD 0, floored at 1;
    # threshold 5 + 10 x 1 = 15: 16 only
    b = [(f"b{i}", "b", [n]) for i, n in enumerate((5, 5, 5, 5, 6, 15, 16))]
    got = outlier_requests(table(a + b))
    assert ids(got) == ["a34", "b6"]
    assert not got["equal_counts"].any() and got["responders"].all()
    r = got.row(0, named=True)
    assert r["reason"] == "responders: 34 > median 13.0 + 10 x MAD 2.0 = 33.0"
    assert r["weight_share"] == pytest.approx(34 / (10 + 11 + 12 + 13 + 14 + 33 + 34))
    r = got.row(1, named=True)
    assert r["reason"] == "responders: 16 > median 5.0 + 10 x MAD 0.0 (floored at 1) = 15.0"
    assert r["weight_share"] == pytest.approx(16 / 57) and r["split"] == "b"
    # the medians are per split: b's 16 among a's requests is ordinary
    assert ids(outlier_requests(table([*a[:5], ("x", "a", [16])]))) == []
    # a request both rules flag gets both reasons; no split column is one split
    both = outlier_requests(table([*a[:5], ("big", "a", [54] * 5)]).drop("split"))
    assert ids(both) == ["big"] and both["reason"].item().count("; ") == 1 and both["split"].item() is None


def test_nothing_flagged_and_empty_tables_keep_the_schema():
    assert outlier_requests(table([])).schema == pl.Schema(OUTLIER_SCHEMA)
    got = outlier_requests(table([("a", "test", [3, 2]), ("b", "test", [4, 1])]))
    assert got.is_empty() and got.schema == pl.Schema(OUTLIER_SCHEMA)
    assert "10 MAD" in RULE and "50%" in RULE


def test_what_the_rule_flags_in_the_shipped_scraped_file():
    """Pooled as the demo pools it (``remark.demo.stages.prepare_protoqa``), one split: seven questions,
    every one a source that gave each alias of an answer cluster the cluster's whole count."""
    from catalog.match import GroundingSettings, Matcher
    from data_prep.pool import SplitSpec, pool_threads
    from data_prep.readers import read_protoqa
    from data_prep.shipped import protoqa_file

    threads = read_protoqa(protoqa_file("scraped"), items="clusters")
    matcher = Matcher(threads.catalog, GroundingSettings(match_mode="normalized"))
    pooled = pool_threads(threads, matcher, split=SplitSpec((("train", 1.0),), seed=0))
    got = outlier_requests(pooled)
    flagged = {r["request_id"].removeprefix("dev-scraped_"): r for r in got.iter_rows(named=True)}
    assert list(flagged) == ["q4013", "q9323", "q7963", "q8023", "q1133", "q3473", "q5173"], json.dumps(
        flagged
    )
    assert [q for q, r in flagged.items() if r["equal_counts"]] == ["q4013", "q9323", "q1133"]
    assert all(r["responders"] for r in flagged.values())  # median 94, MAD 5: more than 144 responders
    assert flagged["q4013"]["n_responders"] == 1094
