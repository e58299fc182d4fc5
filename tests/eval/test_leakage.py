"""eval.leakage: split overlap on hand-built requests and on a respondent split, Unicode spellings of one
prompt, and the answer-overlap pairs listed for review (hand-built, brute force, ProtoQA's "spanish word"
questions)."""

from __future__ import annotations

import io
import itertools
import json
import unicodedata

import numpy as np
import polars as pl
import pytest

from data_prep.holdout import holdout_responders
from data_prep.schema import REQUESTS_SCHEMA
from eval.leakage import (
    ANSWER_JACCARD,
    ANSWER_MIN_SHARED,
    answer_pairs,
    overlap_against_train,
    overlap_lines,
    split_overlap,
    warn,
)


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
        "threshold": 84.5,
        "target_overlap": pytest.approx(3 / 5),
        "target_overlap_items": pytest.approx(2 / 4),  # s1 {apple, kiwi}: 1; s3 {sunscreen, hat}: 1
        "warning": "2 of 3 test requests are training requests (same or near-duplicate prompt): scores on "
        "them measure memorisation; split by request",
        "answer_overlap": {
            "jaccard": 0.5,
            "min_shared": 3,
            "n_test_requests": 0,
            "n_pairs": 0,
            "pairs": [],
            "regrouped": False,
        },
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
        "same or near-duplicate prompt (score >= 84.5, data_prep.request_split): 2"
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


def test_nfc_nfd_and_fullwidth_spellings_of_a_training_prompt_are_twins():
    nfc = unicodedata.normalize("NFC", "Name a café in Zürich")
    nfd = unicodedata.normalize("NFD", nfc)
    full = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in nfc)
    frame = requests_frame(
        [
            ("t1", "train", nfc, [["a", "b"]]),
            ("s1", "test", nfd, [["a"]]),
            ("s2", "test", full, [["b", "c"]]),
            ("s3", "test", "Old classics?", [["d"]]),
        ]
    )
    got = split_overlap(frame)
    assert (got["exact_prompt"], got["near_duplicate_prompt"]) == (2, 2)
    assert got["target_overlap"] == pytest.approx(2 / 3)


def _answers_frame(
    unions: dict[str, tuple[str, list[str]]], same: dict[str, str] | None = None
) -> pl.DataFrame:
    """request id -> (split, union): one responder naming the union, a prompt unique to the request
    (or, for the ids in ``same``, the prompt of the id it names)."""
    same = same or {}
    return requests_frame(
        [(rid, split, _prompt(same.get(rid, rid)), [items]) for rid, (split, items) in unions.items()]
    )


def _prompt(rid: str) -> str:
    """A prompt of 5 random words seeded by the id: no two are near duplicates."""
    import random

    letters = "abcdefghijklmnopqrstuvwxyz"
    rnd = random.Random(rid)
    return " ".join("".join(rnd.choices(letters, k=8)) for _ in range(5))


def test_answer_overlap_lists_the_pairs_for_review_by_hand():
    unions = {
        "t1": ("train", ["hola", "adios", "si", "uno", "gracias"]),
        "t2": ("train", ["dog", "cat", "pig"]),
        "t3": ("train", ["a", "b"]),
        "s1": ("test", ["hola", "adios", "si", "taco"]),  # 3 shared of 6: Jaccard 0.5
        "s2": ("test", ["dog", "cat", "cow", "horse", "sheep"]),  # 2 shared: too few
        "s3": ("test", ["a", "b"]),  # Jaccard 1, 2 shared: too few
        "s4": ("test", ["hola", "adios", "si", "uno", "gracias", "dog", "cat", "pig"]),  # t1 5/8, t2 3/8
    }
    frame = _answers_frame(unions)
    got = split_overlap(frame)["answer_overlap"]
    assert got == {
        "jaccard": ANSWER_JACCARD,
        "min_shared": ANSWER_MIN_SHARED,
        "n_test_requests": 2,
        "n_pairs": 2,
        "pairs": [
            {
                "test": "s4",
                "train": "t1",
                "jaccard": 0.625,
                "shared": 5,
                "test_prompt": _prompt("s4"),
                "train_prompt": _prompt("t1"),
            },
            {
                "test": "s1",
                "train": "t1",
                "jaccard": 0.5,
                "shared": 3,
                "test_prompt": _prompt("s1"),
                "train_prompt": _prompt("t1"),
            },
        ],
        "regrouped": False,
    }
    lines = overlap_lines(split_overlap(frame))
    assert lines[1] == (
        "  for review, not regrouped: 2 test requests share answers with a train request of another prompt "
        "(Jaccard of union items >= 0.5, >= 3 shared; 2 pairs), e.g."
    )
    assert lines[2] == f"    s4 ~ t1: Jaccard 0.62, 5 shared: {_prompt('s4')!r} / {_prompt('t1')!r}"
    # a prompt twin is counted as a twin, not listed again
    twinned = split_overlap(_answers_frame(unions, same={"s1": "t1"}))
    assert twinned["near_duplicate_prompt"] == 1
    assert [p["test"] for p in twinned["answer_overlap"]["pairs"]] == ["s4"]


def test_answer_overlap_equals_a_brute_force():
    rng = np.random.default_rng(0)
    items = [f"i{k}" for k in range(30)]
    p = 1 / np.arange(1, 31) ** 0.8
    p /= p.sum()
    unions = {
        f"{split[:2]}{n}": (split, sorted(set(rng.choice(items, size=rng.integers(1, 9), p=p).tolist())))
        for split in ("train", "test")
        for n in range(60)
    }
    frame = _answers_frame(unions)
    got = answer_pairs(frame.filter(pl.col("split") == "test"), frame.filter(pl.col("split") == "train"))
    want = []
    for (t, (_, a)), (c, (_, b)) in itertools.product(
        [(k, v) for k, v in unions.items() if v[0] == "test"],
        [(k, v) for k, v in unions.items() if v[0] == "train"],
    ):
        shared = len(set(a) & set(b))
        if shared >= ANSWER_MIN_SHARED and shared / len(set(a) | set(b)) >= ANSWER_JACCARD:
            want.append((t, c))
    assert got["n_pairs"] == len(want) > 5
    assert sorted((x["test"], x["train"]) for x in got["pairs"]) == sorted(want)


def test_answer_overlap_flags_protoqa_spanish_word_questions():
    """No string threshold joins them; their answers do (hola, adios, si, uno)."""
    from catalog.match import GroundingSettings, Matcher
    from data_prep.pool import SplitSpec, pool_threads
    from data_prep.readers import read_protoqa
    from data_prep.shipped import protoqa_file

    threads = read_protoqa(protoqa_file("scraped"), items="clusters")
    matcher = Matcher(threads.catalog, GroundingSettings(match_mode="normalized"))
    pooled = pool_threads(threads, matcher, split=SplitSpec((("train", 1.0),), near_duplicate_threshold=None))
    spanish = [
        "name one spanish word everyone knows.",
        "other than a type of food name a spanish word that most people know.",
    ]
    text = pl.col("prompt").list.first().struct.field("content")
    frame = pooled.filter(text.is_in(spanish)).with_columns(
        split=pl.when(text == spanish[0]).then(pl.lit("train")).otherwise(pl.lit("test"))
    )
    got = split_overlap(frame)
    assert got["near_duplicate_prompt"] == 0
    (pair,) = got["answer_overlap"]["pairs"]
    assert (pair["jaccard"], pair["shared"], pair["test_prompt"]) == (0.5, 4, spanish[1])
