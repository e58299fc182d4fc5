"""Time-based splits: the spec (Reddit-v2's periods, boundaries, errors), timestamps in the threads and
Reddit readers, request dates, bad input, and ``remark prep --split-by-time`` end to end."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import polars as pl
import pytest

from catalog.io.errors import InputError
from data_prep.dataset import load_dataset
from data_prep.pool import SplitSpec, pool_threads
from data_prep.readers import read_reddit, read_threads
from data_prep.schema import Report, validate_threads
from data_prep.timesplit import TimeSplit, assign_time_splits
from remark.cli.main import main
from tests.data_prep.conftest import write_catalog_csv, write_jsonl


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_reddit_v2_preset_is_train_to_october_valid_november_test_december():
    ts = TimeSplit.parse("reddit-v2")
    assert ts.spec == "train=..2022-10,valid=2022-11,test=2022-12"
    assert [(r.split, r.start, r.end) for r in ts.ranges] == [
        ("train", None, utc(2022, 11, 1)),
        ("valid", utc(2022, 11, 1), utc(2022, 12, 1)),
        ("test", utc(2022, 12, 1), utc(2023, 1, 1)),
    ]
    times = [
        utc(2019, 5, 1),
        utc(2022, 10, 31, 23, 59, 59),
        utc(2022, 11, 1),
        utc(2022, 11, 30, 23, 59, 59),
        utc(2022, 12, 1),
        utc(2022, 12, 31, 23, 59, 59),
        utc(2023, 1, 1),
    ]
    got = pl.DataFrame({"t": times}).select(ts.split_of(pl.col("t")))["literal"].to_list()
    assert got == ["train", "train", "valid", "valid", "test", "test", None]


def test_periods_by_year_day_and_open_ranges():
    ts = TimeSplit.parse(" train = 2020..2021-06 , valid=2021-07-01..2021-07-15, test=2021-08.. ")
    assert [(r.start, r.end) for r in ts.ranges] == [
        (utc(2020, 1, 1), utc(2021, 7, 1)),
        (utc(2021, 7, 1), utc(2021, 7, 16)),
        (utc(2021, 8, 1), None),
    ]
    assert ts.spec == "train=2020..2021-06,valid=2021-07-01..2021-07-15,test=2021-08.."
    assert TimeSplit.parse("test=2024-02-29").ranges[0].end == utc(2024, 3, 1)
    assert TimeSplit.parse("train=..2022-12").ranges[0].end == utc(2023, 1, 1)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("train=..2022-11,valid=2022-11", "overlap"),
        ("train=2022..,test=2023", "overlap"),
        ("train=2022,train=2023", "named twice"),
        ("holdout=2022", "unknown split 'holdout'"),
        ("train=2022-13", "not a date"),
        ("train=22-10", "YYYY, YYYY-MM or YYYY-MM-DD"),
        ("train=2023..2022", "ends before it starts"),
        ("train=..", "needs a start, an end or both"),
        ("train", "write SPLIT=PERIOD"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        TimeSplit.parse(spec)


def _threads(rows):
    base = {"prompt": "films like Moon?", "title": "Moon", "year": 2009}
    return validate_threads(pl.DataFrame([{**base, **r} for r in rows]))


def test_request_date_is_its_earliest_row_and_given_splits_are_kept():
    threads = _threads(
        [
            # q1's first comment is in October: train, although its second is in November
            {"request_id": "q1", "responder_id": "a", "timestamp": "2022-11-02T00:00:00Z"},
            {"request_id": "q1", "responder_id": "b", "timestamp": "1667170000"},  # 2022-10-30T22:46:40Z
            {"request_id": "q2", "responder_id": "a", "timestamp": "2022-12-31"},
            {"request_id": "q3", "responder_id": "a", "timestamp": "2022-11-15 08:00:00"},
            # a split given on a row wins over the time
            {"request_id": "q4", "responder_id": "a", "timestamp": "2022-12-05", "split": "train"},
        ]
    )
    assert threads.schema["timestamp"] == pl.Datetime("us", "UTC")
    report = Report()
    out = assign_time_splits(threads, TimeSplit.parse("reddit-v2"), report)
    assert out.select("request_id", "split").unique(maintain_order=True).rows() == [
        ("q1", "train"),
        ("q2", "test"),
        ("q3", "valid"),
        ("q4", "train"),
    ]
    assert report.notes["requests_split_by_time"] == 3 and out.columns == threads.columns


def test_requests_without_timestamp_or_outside_every_period_are_bad_input():
    rows = [
        {"request_id": "q1", "responder_id": "a", "timestamp": "2022-11-02"},
        {"request_id": "q2", "responder_id": "a", "timestamp": None},
        {"request_id": "q3", "responder_id": "a", "timestamp": "2023-01-04T12:00:00+00:00"},
        {"request_id": "q3", "responder_id": "b", "timestamp": "2023-02-01"},
    ]
    threads = _threads(rows).with_columns(
        pl.Series("row", [1, 2, 3, 4], dtype=pl.UInt32), pl.lit("t.jsonl").alias("file")
    )
    ts = TimeSplit.parse("reddit-v2")
    with pytest.raises(InputError, match="request 'q2' has no split and no timestamp") as err:
        assign_time_splits(threads, ts, Report())
    assert err.value.row == 2 and err.value.field == "timestamp"
    with pytest.raises(InputError, match=r"q3 \(dated 2023-01-04T12:00:00Z\) falls in no period") as err:
        assign_time_splits(threads.filter(pl.col("request_id") != "q2"), ts, Report())
    assert err.value.row == 3
    report = Report(skip=True)
    out = assign_time_splits(threads, ts, report)
    assert out["request_id"].to_list() == ["q1"] and out["split"].to_list() == ["valid"]
    assert report.skipped == {"no_timestamp": 1, "outside_time_splits": 2}


def test_unreadable_timestamps_are_reported_with_row_and_field():
    frame = pl.DataFrame(
        {
            "request_id": ["q1", "q2"],
            "prompt": ["p", "p"],
            "responder_id": ["a", "a"],
            "title": ["Moon", "Moon"],
            "timestamp": ["2022-11-01", "1667260800000"],  # milliseconds given as seconds: year 54803
            "row": pl.Series([1, 2], dtype=pl.UInt32),
        }
    )
    with pytest.raises(InputError, match="'1667260800000' is not a timestamp between 1970 and 2100") as err:
        validate_threads(frame, "t.jsonl")
    assert err.value.row == 2 and err.value.field == "timestamp" and "epoch seconds" in err.value.hint
    report = Report(skip=True)
    assert validate_threads(frame, "t.jsonl", report)["request_id"].to_list() == ["q1"]
    assert report.skipped == {"bad_timestamp": 1}


def test_threads_and_reddit_readers_carry_timestamps(tmp_path):
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {
                "request_id": "q1",
                "prompt": "p",
                "responder_id": "a",
                "title": "Moon (2009)",
                "timestamp": 1669852800,
            },
            {"request_id": "q2", "prompt": "p", "responder_id": "a", "title": "Primer (2004)"},
        ],
    )
    got = read_threads(path).frame["timestamp"].to_list()
    assert got == [utc(2022, 12, 1), None]
    rows = [
        {
            "prompt": [{"role": "user", "content": "x"}],
            "groundtruth_with_release_year": [["Moon", 2009]],
            "created_utc": 1667260800,
        },
        {
            "prompt": [{"role": "user", "content": "y"}],
            "groundtruth_with_release_year": [["Primer", "2004"]],
            "created_utc": "2022-12-24",
        },
    ]
    reddit = read_reddit(write_jsonl(tmp_path / "r.jsonl", rows)).frame
    assert reddit["timestamp"].to_list() == [utc(2022, 11, 1), utc(2022, 12, 24)]
    assert (
        "timestamp"
        not in read_reddit(
            write_jsonl(tmp_path / "r0.jsonl", [{**r, "created_utc": None} for r in rows])
        ).frame.columns
    )


def test_pool_threads_splits_by_time(matcher):
    threads = _threads(
        [
            {"request_id": "q1", "responder_id": "a", "timestamp": "2022-09-01"},
            {"request_id": "q2", "responder_id": "a", "timestamp": "2022-11-20"},
            {"request_id": "q3", "responder_id": "a", "timestamp": "2022-12-02"},
        ]
    )
    spec = SplitSpec(by_time=TimeSplit.parse("reddit-v2"))
    pooled = pool_threads(threads, matcher, split=spec)
    assert pooled.select("request_id", "split").rows() == [("q1", "train"), ("q2", "valid"), ("q3", "test")]


def test_prep_cli_split_by_time_end_to_end(tmp_path, capsys):
    months = {
        "q1": "2022-06-30T10:00:00Z",
        "q2": "2022-10-31T23:59:59Z",
        "q3": "2022-11-01T00:00:00Z",
        "q4": "2022-12-31",
    }
    rows = [
        {
            "request_id": rid,
            "prompt": f"like Moon? {rid}",
            "responder_id": who,
            "title": "Moon (2009)",
            "timestamp": t,
        }
        for rid, t in months.items()
        for who in ("a", "b")
    ]
    data, cat = write_jsonl(tmp_path / "t.jsonl", rows), write_catalog_csv(tmp_path / "cat.csv")
    argv = ["prep", "threads", "--input", str(data), "--catalog", str(cat), "--out", str(tmp_path / "ds")]
    assert main([*argv, "--split-by-time", "reddit-v2", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    ds = load_dataset(tmp_path / "ds")
    assert ds.requests.select("request_id", "split").rows() == [
        ("q1", "train"),
        ("q2", "train"),
        ("q3", "valid"),
        ("q4", "test"),
    ]
    assert ds.meta["split_by_time"] == "train=..2022-10,valid=2022-11,test=2022-12"
    assert ds.meta["split_fractions"] is None
    assert stats["prep"]["notes"]["requests_split_by_time"] == 4
    # a bad spec is a clear error (exit 2, the flag named, an example given)
    assert main([*argv, "--split-by-time", "train=..2022-11,valid=2022-11"]) == 2
    err = capsys.readouterr().err
    assert "field '--split-by-time'" in err and "overlap" in err and "train=..2022-10" in err
    # a request dated after December is named with its date (exit 2), or dropped and counted
    late = write_jsonl(
        tmp_path / "late.jsonl", [*rows, {**rows[0], "request_id": "q5", "timestamp": "2023-01-02"}]
    )
    argv[3] = str(late)
    assert main([*argv, "--split-by-time", "reddit-v2"]) == 2
    assert "q5 (dated 2023-01-02T00:00:00Z) falls in no period" in capsys.readouterr().err
    assert main([*argv, "--split-by-time", "reddit-v2", "--skip-bad-rows", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["prep"]["skipped"] == {"outside_time_splits": 1}
