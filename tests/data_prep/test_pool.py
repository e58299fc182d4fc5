"""Pooling: a hand-built thread file -> the exact pooled table; splits; the per-responder expansion."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from data_prep.pool import (
    SplitSpec,
    assign_splits,
    expand_responders,
    hash_split,
    pool_threads,
    responder_view,
)
from data_prep.readers import read_threads
from data_prep.schema import REQUESTS_SCHEMA, RESPONDER_ROWS_SCHEMA, Report
from tests.data_prep.conftest import write_jsonl

SCIFI = "Sci-fi like Arrival?"
ROWS = [  # line numbers 1..10
    {"request_id": "q1", "prompt": SCIFI, "responder_id": "alice", "title": "Moon", "year": 2009,
     "seen": ["Arrival (2016)"], "split": "train"},
    {"request_id": "q1", "prompt": SCIFI, "responder_id": "alice", "title": "Primer", "year": 2004},
    {"request_id": "q1", "prompt": SCIFI, "responder_id": "bob", "title": "Matrix, The", "year": "1999"},
    {"request_id": "q1", "prompt": SCIFI, "responder_id": "bob", "title": "moon", "year": 2009},
    {"request_id": "q1", "prompt": SCIFI, "responder_id": "carol", "title": "Arrival", "year": 2016},
    {"request_id": "q1", "prompt": SCIFI, "responder_id": "dave", "title": "Unknown Film", "year": 2001},
    {"request_id": "q1", "prompt": SCIFI, "responder_id": "bob", "title": "Primer", "year": 2004},
    {"request_id": "q2", "prompt": [{"role": "user", "content": "Old classics?"}], "responder_id": "erin",
     "title": "Solaris", "year": 1972},
    {"request_id": "q2", "prompt": [{"role": "user", "content": "Old classics?"}], "responder_id": "frank",
     "title": "Solaris (1972)"},
    {"request_id": "q2", "prompt": [{"role": "user", "content": "Old classics?"}], "responder_id": "frank",
     "title": "Moon", "year": 2010},
]  # fmt: skip


@pytest.fixture
def threads(tmp_path):
    return read_threads(write_jsonl(tmp_path / "threads.jsonl", ROWS))


def test_hand_built_threads_pool_to_the_exact_table(threads, matcher):
    report = Report()
    pooled = pool_threads(threads, matcher, split=SplitSpec((("test", 1.0),)), report=report)
    expected = pl.DataFrame(
        {
            "request_id": ["q1", "q2"],
            "prompt": [[{"role": "user", "content": SCIFI}], [{"role": "user", "content": "Old classics?"}]],
            # carol only named the seen film and dave only an unknown one: neither is a responder
            "seen": [["m2"], []],
            "responders": [[["m3", "m4"], ["m1", "m3", "m4"]], [["m5"], ["m5", "m3"]]],
            "n_responders": [2, 2],
            # by count, then first mention: Moon (2, line 1), Primer (2, line 2), Matrix (1)
            "union": [["m3", "m4", "m1"], ["m5", "m3"]],
            "counts": [[2, 2, 1], [2, 1]],
            "ungrounded": [["Unknown Film (2001)"], []],
            # q1's split is given on its first row; q2 has none and the only fraction is test
            "split": ["train", "test"],
            "responder_ids": [["alice", "bob"], ["erin", "frank"]],
        },
        schema={**REQUESTS_SCHEMA, "responder_ids": pl.List(pl.String)},
    )
    assert_frame_equal(pooled, expected)
    assert report.notes["mentions_of_seen_items"] == 1
    assert report.notes["responders_without_items"] == 2
    assert not report.skipped


def test_expansion_gives_one_row_per_responder_with_the_request_fields(threads, matcher):
    pooled = pool_threads(threads, matcher)
    rows = expand_responders(pooled)
    assert rows.schema == pl.Schema(RESPONDER_ROWS_SCHEMA)
    assert rows.select("request_id", "responder_id", "responder_index", "items").rows() == [
        ("q1", "alice", 0, ["m3", "m4"]),
        ("q1", "bob", 1, ["m1", "m3", "m4"]),
        ("q2", "erin", 0, ["m5"]),
        ("q2", "frank", 1, ["m5", "m3"]),
    ]
    view = responder_view(pooled, rows)  # the request's fields joined on: Rank-GRPO's whole view
    assert view["union"].to_list()[1] == ["m3", "m4", "m1"] and view.height == rows.height
    assert view.columns == [*RESPONDER_ROWS_SCHEMA, *(c for c in REQUESTS_SCHEMA if c != "request_id")]
    # Without responder_ids (a requests.parquet), responders are named by position.
    anon = expand_responders(pooled.drop("responder_ids"))
    assert anon["responder_id"].to_list() == ["0", "1", "0", "1"]


def test_exact_mode_does_not_fold_titles(threads, catalog):
    from catalog.match import GroundingSettings, Matcher

    pooled = pool_threads(threads, Matcher(catalog, GroundingSettings(match_mode="exact")), report=Report())
    q1 = pooled.row(0, named=True)
    # "Matrix, The" and "moon" are not verbatim catalog titles under Rank-GRPO's matcher
    assert q1["union"] == ["m4", "m3"] and q1["counts"] == [2, 1]
    assert q1["ungrounded"] == ["Matrix, The (1999)", "moon (2009)", "Unknown Film (2001)"]


def test_exact_mode_seen_titles_without_a_year_name_every_item_so_titled(tmp_path):
    """Rank-GRPO skips a listed title equal to a seen title whatever its year: in exact mode a bare seen
    title names every catalog item with that title verbatim (not a case variant), and they leave the union."""
    import polars as pl

    from catalog.match import GroundingSettings, Matcher
    from catalog.table import Catalog

    catalog = Catalog.from_frame(
        pl.DataFrame(
            {
                "item_id": ["t96", "t97", "T97", "m", "a"],
                "title": ["Titanic", "Titanic", "TITANIC", "Moon", "Arrival"],
                "year": [1996, 1997, 1997, 2009, 2016],
            }
        )
    )
    rows = [
        {"request_id": "q", "prompt": "p", "responder_id": "r", "title": t, "year": y,
         "seen": ["Titanic", "Arrival (2016)", "Nope"]}
        for t, y in [("Titanic", 1997), ("TITANIC", 1997), ("Moon", 2009), ("Arrival", 2016)]
    ]  # fmt: skip
    threads = read_threads(write_jsonl(tmp_path / "t.jsonl", rows))
    exact = pool_threads(threads, Matcher(catalog, GroundingSettings(match_mode="exact"))).row(0, named=True)
    assert exact["seen"] == ["t96", "t97", "a"]  # a seen title with a year names its one item
    assert exact["union"] == ["T97", "m"]
    fuzzy = pool_threads(threads, Matcher(catalog)).row(0, named=True)  # other modes: one item per title
    assert len([i for i in fuzzy["seen"] if i in ("t96", "t97", "T97")]) == 1


def test_hash_split_is_stable_seeded_and_follows_fractions():
    ids = [f"req-{i}" for i in range(4000)]
    spec = SplitSpec((("train", 0.5), ("valid", 0.25), ("test", 0.25)), seed=7)
    a = hash_split(ids, spec)
    assert a == hash_split(ids, spec)
    assert a != hash_split(ids, SplitSpec(spec.fractions, seed=8))
    share = {s: a.count(s) / len(ids) for s in ("train", "valid", "test")}
    assert abs(share["train"] - 0.5) < 0.03 and abs(share["valid"] - 0.25) < 0.03
    # Pinned: u = BLAKE2b-64("0\x00q1") / 2**64 = 0.8943 (valid: 0.8 <= u < 0.9), q2 0.1613, q3 0.0780,
    # q4 0.1700 (train). The hash must not change across library versions: datasets keep their splits.
    assert hash_split(["q1", "q2", "q3", "q4"], SplitSpec()) == ["valid", "train", "train", "train"]
    assert hash_split(["q1"], SplitSpec((("train", 0.89), ("test", 0.11)))) == ["test"]


def _requests(ids, texts, splits):
    prompts = [[{"role": "user", "content": t}] for t in texts]
    return pl.DataFrame({"request_id": ids, "prompt": prompts, "split": splits})


def test_assign_splits_keeps_given_splits():
    df = _requests(["a", "b"], ["Old classics?", "Sci-fi like Arrival?"], ["valid", None])
    out = assign_splits(df, SplitSpec((("test", 1.0),)))
    assert out["split"].to_list() == ["valid", "test"]
    bare = df.drop("prompt")  # without grouping, no prompt is needed; with it, one is
    alone = SplitSpec((("test", 1.0),), near_duplicate_threshold=None)
    assert assign_splits(bare, alone)["split"].to_list() == ["valid", "test"]
    with pytest.raises(ValueError, match="needs a prompt column"):
        assign_splits(bare, SplitSpec((("test", 1.0),)))


def test_assign_splits_puts_near_duplicate_prompts_in_one_split():
    # Pinned hashes (SplitSpec() fractions, seed 0): q1 valid, q2 train, q3 train, q4 train.
    texts = ["Name a fruit.", "name fruits", "Name something you bring to the beach", "Old classics?"]
    df = _requests(["q2", "q1", "q3", "q4"], texts, [None] * 4)
    # q1 and q2 are one group: both take hash("q1") = valid; alone, q2 would be train
    assert assign_splits(df)["split"].to_list() == ["valid", "valid", "train", "train"]
    alone = SplitSpec(near_duplicate_threshold=None)
    assert assign_splits(df, alone)["split"].to_list() == ["train", "valid", "train", "train"]
    # a group with one given split takes it: q2 given test pulls q1 there, whatever q1's hash
    given = df.with_columns(pl.Series("split", ["test", None, None, None]))
    assert assign_splits(given)["split"].to_list() == ["test", "test", "train", "train"]
    # two given splits in a group: the others are hashed by their own smallest id (q1 -> valid)
    texts3 = ["Name a fruit.", "name fruits", "NAME A FRUIT!", "Old classics?"]
    mixed = _requests(["q2", "q1", "q3", "q4"], texts3, ["test", None, "train", None])
    assert assign_splits(mixed)["split"].to_list() == ["test", "valid", "train", "train"]


def test_split_spec_rejects_a_bad_near_duplicate_threshold():
    for bad in (0.0, 101.0):
        with pytest.raises(ValueError, match="near_duplicate_threshold"):
            SplitSpec(near_duplicate_threshold=bad)


def test_split_spec_rejects_bad_fractions():
    with pytest.raises(ValueError, match="sum to 1"):
        SplitSpec((("train", 0.5),))
    with pytest.raises(ValueError, match="split names"):
        SplitSpec((("holdout", 1.0),))


def test_conflicting_splits_within_a_request_are_reported(tmp_path, matcher):
    rows = [
        {
            "request_id": "q1",
            "prompt": "p",
            "responder_id": "a",
            "title": "Moon",
            "year": 2009,
            "split": "train",
        },
        {
            "request_id": "q1",
            "prompt": "p",
            "responder_id": "b",
            "title": "Primer",
            "year": 2004,
            "split": "test",
        },
        {"request_id": "q2", "prompt": "p2", "responder_id": "a", "title": "Primer", "year": 2004},
    ]
    threads = read_threads(write_jsonl(tmp_path / "t.jsonl", rows))
    with pytest.raises(
        Exception, match=r"t\.jsonl, row 1, field 'split': request 'q1' has rows in different"
    ):
        pool_threads(threads, matcher)
    report = Report(skip=True)
    pooled = pool_threads(threads, matcher, report=report)
    assert pooled["request_id"].to_list() == ["q2"]
    assert report.skipped["conflicting_split"] == 2


def test_combine_merges_differing_catalogs_and_unites_aliases():
    from catalog.table import Catalog
    from data_prep.readers import combine
    from data_prep.schema import Threads

    def part(rows):
        cat = Catalog.from_frame(pl.DataFrame(rows))
        meta = {"source": "t", "domain": "answer", "has_years": False, "instruction_included": False}
        return Threads(pl.DataFrame({"request_id": ["q"]}), cat, meta)

    a = part(
        {
            "item_id": ["dog", "cat"],
            "title": ["dog", "cat"],
            "aliases": [["pup"], []],
            "popularity": [2.0, 1.0],
        }
    )
    b = part({"item_id": ["dog"], "title": ["dog"], "aliases": [["hound"]], "popularity": [3.0]})
    merged = combine([a, b]).catalog.df.sort("item_id")
    assert merged["item_id"].to_list() == ["cat", "dog"]
    assert merged["aliases"].to_list() == [[], ["hound", "pup"]]
    assert merged["popularity"].to_list() == [1.0, 5.0]
