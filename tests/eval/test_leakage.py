"""eval.leakage: split overlap on hand-built requests and on a respondent split."""

from __future__ import annotations

import io
import json

import polars as pl
import pytest

from data_prep.holdout import holdout_responders
from data_prep.schema import REQUESTS_SCHEMA
from eval.leakage import overlap_against_train, overlap_lines, split_overlap, warn


def requests_frame(rows: list[tuple[str, str, str, list[list[str]]]]) -> pl.DataFrame:
    """(request_id, split, prompt text, responders) -> pooled rows; union and counts from the responders."""
    out = []
    for rid, split, text, responders in rows:
        counts: dict[str, int] = {}
        for items in responders:
            for item in items:
                counts[item] = counts.get(item, 0) + 1
        union = sorted(counts, key=lambda i: -counts[i])  # stable: ties by first mention
        out.append(
            {
                "request_id": rid,
                "prompt": [{"role": "user", "content": text}],
                "responders": responders,
                "union": union,
                "counts": [counts[i] for i in union],
                "seen": [],
                "n_responders": len(responders),
                "ungrounded": [],
                "split": split,
            }
        )
    return pl.DataFrame(out).cast(REQUESTS_SCHEMA).select(*REQUESTS_SCHEMA)


REQUESTS = requests_frame(
    [
        ("t1", "train", "Name a fruit", [["apple", "banana"], ["apple", "cherry"], ["apple", "banana"]]),
        ("t2", "train", "Name something you bring to the beach", [["towel", "sunscreen"]]),
        ("s1", "test", "name fruits.", [["apple", "kiwi"], ["apple"]]),  # t1's prompt, normalized
        ("s2", "test", "Name something you bring to a picnic", [["towel"]]),  # no twin
        (
            "s3",
            "test",
            "Name something that you would bring to the beach!",
            [["sunscreen", "hat"]],
        ),  # t2 reworded
        ("v1", "valid", "Old classics?", [["solaris"]]),
    ]
)


def test_split_overlap_by_hand():
    got = split_overlap(REQUESTS)
    assert json.loads(json.dumps(got)) == got  # JSON-able
    # s1 exact, s3 near duplicate; mentions: s1 apple kiwi apple (2 in t1's union), s3 sunscreen hat (1)
    assert got == {
        "test_split": "test",
        "train_split": "train",
        "n_test_requests": 3,
        "n_train_requests": 2,
        "exact_prompt": 1,
        "near_duplicate_prompt": 2,
        "threshold": 85.0,
        "target_overlap": pytest.approx(3 / 5),
        "target_overlap_items": pytest.approx(2 / 4),  # s1 {apple, kiwi}: 1; s3 {sunscreen, hat}: 1
        "warning": "2 of 3 test requests are training requests (same or near-duplicate prompt): scores on "
        "them measure memorisation; split by request",
    }
    valid = split_overlap(REQUESTS, test_split="valid")
    assert (valid["near_duplicate_prompt"], valid["target_overlap"], valid["warning"]) == (0, None, None)
    # a higher threshold leaves the exact twin only: s1's mentions 2 of 3
    strict = split_overlap(REQUESTS, threshold=100)
    assert (strict["exact_prompt"], strict["near_duplicate_prompt"]) == (
        1,
        2,
    )  # s3's content words equal t2's
    other = split_overlap(REQUESTS.with_columns(pl.col("split").replace("train", "dev")), train_split="dev")
    assert other["warning"].startswith("2 of 3 test requests are dev requests")
    with pytest.raises(ValueError, match="both 'test'"):
        split_overlap(REQUESTS, train_split="test")


def test_no_training_requests_no_overlap():
    got = split_overlap(REQUESTS.filter(pl.col("split") != "train"))
    assert (got["n_train_requests"], got["near_duplicate_prompt"], got["warning"]) == (0, 0, None)
    assert overlap_lines(got) == ["Split overlap, test vs train: no train requests to compare"]
    assert overlap_against_train(REQUESTS.filter(pl.col("split") != "train"), "test") is None
    assert overlap_against_train(REQUESTS, "all") is None
    assert overlap_against_train(REQUESTS, "train") is None
    assert overlap_against_train(REQUESTS, "test") == split_overlap(REQUESTS)


def test_overlap_lines_and_warn():
    got = split_overlap(REQUESTS)
    lines = overlap_lines(got)
    assert lines[0] == (
        "Split overlap, test vs train: 3 test requests, 2 train requests; same prompt as a train request: 1; "
        "same or near-duplicate prompt (score >= 85, data_prep.request_split): 2"
    )
    assert (
        lines[1]
        == "  of those requests' target mentions, 60.0% name an answer of their train twins (50.0% of their distinct answers)"
    )
    assert lines[2] == f"warning: {got['warning']}"
    err = io.StringIO()
    assert warn(got, err) and err.getvalue() == f"warning: {got['warning']}\n"
    quiet = io.StringIO()
    assert not warn(split_overlap(REQUESTS, test_split="valid"), quiet) and quiet.getvalue() == ""
    assert not warn(None, quiet)


def test_a_respondent_split_is_found_through_its_prompts():
    pooled = requests_frame(
        [
            (f"q{i}", None, text, [["a", "b"], ["b", "c"], ["a"], ["d"]])
            for i, text in enumerate(["Name a fruit", "Name a color", "Name something red", "Old classics?"])
        ]
    )
    halves = holdout_responders(pooled, fraction=0.5, seed=0)
    frame = pl.concat(
        [
            halves.train.with_columns(split=pl.lit("train")),
            halves.heldout.with_columns(split=pl.lit("test"), request_id=pl.col("request_id") + "#test"),
        ],
        how="diagonal_relaxed",
    )
    got = split_overlap(frame)
    assert (got["exact_prompt"], got["near_duplicate_prompt"], got["n_test_requests"]) == (4, 4, 4)
    # the target overlap is the share of held-out mentions in the same question's training union
    test, train = halves.heldout, halves.train
    hits = total = 0
    for responders, union in zip(test["responders"].to_list(), train["union"].to_list(), strict=True):
        for items in responders:
            total += len(items)
            hits += sum(i in union for i in items)
    assert got["target_overlap"] == pytest.approx(hits / total)
    assert got["warning"].startswith("4 of 4 test requests are training requests")


def test_overlap_against_train_of_the_evaluated_rows():
    got = overlap_against_train(REQUESTS, "test", evaluated=REQUESTS.filter(pl.col("request_id") == "s1"))
    assert (got["n_test_requests"], got["exact_prompt"], got["target_overlap"]) == (
        1,
        1,
        pytest.approx(2 / 3),
    )
    assert got["warning"].startswith("1 of 1 test requests")
    assert overlap_against_train(REQUESTS.drop("prompt"), "test") is None  # a frame built for scoring alone
