"""Readers on hand-written rows in each source's real shape: Reddit (Rank-GRPO), ProtoQA, ReDial, threads."""

from __future__ import annotations

import polars as pl
import pytest

from data_prep.pool import pool_threads
from data_prep.readers import combine, read_protoqa, read_reddit, read_redial, read_source, read_threads
from data_prep.readers.reddit import request_ids_from_prompts
from data_prep.schema import THREADS_SCHEMA, Report
from tests.data_prep.conftest import write_jsonl

INSTR = "Pretend you are a movie recommender system. Give 20 recommendations.\n\n"
ARRIVAL_REQ = [{"role": "user", "content": INSTR + "[Request] Mind-bending sci-fi like Arrival, no action."}]
COZY_REQ = [{"role": "user", "content": INSTR + "Cozy mysteries for a rainy day?"}]
REDDIT_ROWS = [
    {"prompt": ARRIVAL_REQ, "completion": "Moon (2009)\nPrimer (2004)", "seen_titles": ["Arrival"],
     "groundtruth_with_release_year": [["Moon", 2009], ["Primer", "2004"]]},
    {"prompt": COZY_REQ, "completion": "Solaris (1972)", "seen_titles": [],
     "groundtruth_with_release_year": [["Solaris", 1972]]},
    {"prompt": ARRIVAL_REQ, "completion": "The Matrix (1999)", "seen_titles": ["Arrival"],
     "groundtruth_with_release_year": [["The Matrix", "1999"], ["Moon", 2009], ["Moon", "2009"]]},
]  # fmt: skip


def test_reddit_rows_with_one_prompt_are_one_request(tmp_path, matcher):
    report = Report()
    th = read_reddit(write_jsonl(tmp_path / "test.jsonl", REDDIT_ROWS), report=report)
    assert th.meta == {"source": "reddit", "domain": "movie", "has_years": True, "instruction_included": True}
    f = th.frame
    assert f.select("request_id", "responder_id", "title", "year", "row").rows() == [
        (f["request_id"][0], "r1", "Moon", 2009, 1),
        (f["request_id"][0], "r1", "Primer", 2004, 1),
        (f["request_id"][2], "r1", "Solaris", 1972, 2),
        (f["request_id"][0], "r2", "The Matrix", 1999, 3),
        (f["request_id"][0], "r2", "Moon", 2009, 3),
    ]
    assert f["request_id"][0] != f["request_id"][2] and f["request_id"][0].startswith("rq-")
    assert f["seen"].to_list()[0] == ["Arrival"]
    assert report.notes["duplicate_titles_within_responder"] == 1  # Moon twice in row 3
    pooled = pool_threads(th, matcher)
    first = pooled.row(0, named=True)
    assert first["prompt"] == ARRIVAL_REQ and first["seen"] == ["m2"]
    assert first["responders"] == [["m3", "m4"], ["m1", "m3"]]
    assert first["union"] == ["m3", "m4", "m1"] and first["counts"] == [2, 1, 1]


def test_reddit_parquet_and_jsonl_read_the_same(tmp_path):
    jsonl = read_reddit(write_jsonl(tmp_path / "a.jsonl", REDDIT_ROWS)).frame
    # Parquet as HF datasets would write it: years as strings inside [title, year] lists.
    pq = tmp_path / "a.parquet"
    pl.DataFrame(
        {
            "prompt": [r["prompt"] for r in REDDIT_ROWS],
            "seen_titles": [r["seen_titles"] for r in REDDIT_ROWS],
            "groundtruth_with_release_year": [
                [[t, str(y)] for t, y in r["groundtruth_with_release_year"]] for r in REDDIT_ROWS
            ],
        }
    ).write_parquet(pq)
    from_pq = read_reddit(pq).frame
    assert from_pq.drop("file").equals(jsonl.drop("file"))


def test_request_ids_are_stable_hashes_of_the_prompt():
    ids = request_ids_from_prompts(pl.Series("prompt", [ARRIVAL_REQ, COZY_REQ, ARRIVAL_REQ]))
    assert ids[0] == ids[2] != ids[1]
    # BLAKE2b-64 of the canonical JSON, pinned: ids must survive library upgrades.
    import hashlib
    import json

    text = json.dumps(COZY_REQ, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert ids[1] == "rq-" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def test_reddit_books_source_sets_the_domain(tmp_path):
    th = read_source("reddit-books", write_jsonl(tmp_path / "b.jsonl", REDDIT_ROWS[:1]))
    assert th.meta["domain"] == "book" and th.meta["source"] == "reddit-books"


PROTOQA = [
    {"metadata": {"id": "q1", "source": "umass-crowdsource"},
     "question": {"original": "Name a pet.", "normalized": "name a pet."},
     "answers": {"raw": {"Dog": 2, "puppy": 1, "cat": 1, "?": 1},
                 "clusters": {"q1.0": {"count": 3, "answers": ["dog", "puppy"]},
                              "q1.1": {"count": 1, "answers": ["cat"]}}},
     "num": {"answers": 5, "clusters": 2}},
    {"metadata": {"id": "q2", "source": "umass-crowdsource"},
     "question": {"original": "Name something that barks.", "normalized": "name something that barks."},
     "answers": {"raw": {"dog": 1, "seal": 2},
                 "clusters": {"q2.0": {"count": 1, "answers": ["dog"]},
                              "q2.1": {"count": 2, "answers": ["seal", "sea lion"]}}},
     "num": {"answers": 3, "clusters": 2}},
]  # fmt: skip


def test_protoqa_raw_items_one_respondent_per_count(tmp_path):
    from catalog.match import Matcher

    th = read_protoqa(write_jsonl(tmp_path / "p.jsonl", PROTOQA), items="raw")
    f = th.frame
    assert f.filter(pl.col("request_id") == "q1")["responder_id"].to_list() == ["a1", "a2", "a3", "a4", "a5"]
    assert f["title"].to_list() == ["dog", "dog", "puppy", "cat", "?", "dog", "seal", "seal"]
    assert f["prompt"][0].to_list() == [{"role": "user", "content": "name a pet."}]
    assert th.meta["domain"] == "answer" and th.meta["has_years"] is False
    cat = th.catalog.df.sort("item_id")
    assert cat["item_id"].to_list() == ["cat", "dog", "puppy", "seal"]
    assert cat["popularity"].to_list() == [1.0, 3.0, 1.0, 2.0]  # respondents over the whole file
    pooled = pool_threads(th, Matcher(th.catalog))
    q1 = pooled.row(0, named=True)
    assert q1["n_responders"] == 4  # "?" grounds to nothing: kept in ungrounded, not a responder
    assert q1["union"] == ["dog", "puppy", "cat"] and q1["counts"] == [2, 1, 1]
    assert q1["ungrounded"] == ["?"]


def test_protoqa_clusters_map_raw_answers_within_their_question(tmp_path):
    from catalog.match import Matcher

    th = read_protoqa(write_jsonl(tmp_path / "p.jsonl", PROTOQA), items="clusters")
    # "puppy" is in q1's dog cluster -> item "dog"; q2's "seal" cluster has alias "sea lion".
    assert th.frame["title"].to_list() == ["dog", "dog", "dog", "cat", "?", "dog", "seal", "seal"]
    cat = th.catalog.df.sort("item_id")
    assert cat.select("item_id", "aliases").rows() == [
        ("cat", []),
        ("dog", ["puppy"]),
        ("seal", ["sea lion"]),
    ]
    pooled = pool_threads(th, Matcher(th.catalog))
    assert pooled["union"].to_list() == [["dog", "cat"], ["seal", "dog"]]
    assert pooled["counts"].to_list() == [[3, 1], [2, 1]]


def test_protoqa_alias_claimed_by_two_items_is_left_out(tmp_path):
    rows = [
        {"metadata": {"id": "a"}, "question": {"normalized": "x?"},
         "answers": {"clusters": {"a.0": {"count": 2, "answers": ["car", "wheels"]}}}},
        {"metadata": {"id": "b"}, "question": {"normalized": "y?"},
         "answers": {"clusters": {"b.0": {"count": 1, "answers": ["bike", "wheels"]}}}},
    ]  # fmt: skip
    th = read_protoqa(write_jsonl(tmp_path / "s.jsonl", rows), items="clusters")
    assert th.meta["ambiguous_aliases"] == 1
    assert th.catalog.df.sort("item_id")["aliases"].to_list() == [[], []]
    # Without raw answers the clusters are expanded: n_x = sum of cluster counts.
    assert th.frame.group_by("request_id").len().sort("request_id")["len"].to_list() == [2, 1]


REDIAL = {
    "conversationId": "20001", "initiatorWorkerId": 1, "respondentWorkerId": 2,
    "movieMentions": {"10": "The Matrix (1999)", "20": "Moon  (2009)", "30": "Primer (2004)", "40": "Arrival (2016)"},
    "initiatorQuestions": {}, "respondentQuestions": {},
    "messages": [
        {"senderWorkerId": 2, "text": "Hi! What do you like?", "messageId": 1},
        {"senderWorkerId": 1, "text": "I loved @40", "messageId": 2},
        {"senderWorkerId": 1, "text": "and @10 too", "messageId": 3},
        {"senderWorkerId": 2, "text": "Try @20 or @30", "messageId": 4},
        {"senderWorkerId": 1, "text": "Seen @30 already, and @40 again", "messageId": 5},
    ],
}  # fmt: skip


def test_redial_single_responder_items_and_seen_by_first_mention(tmp_path):
    rows = [
        REDIAL,
        {
            **REDIAL,
            "conversationId": "2",
            "messages": [{"senderWorkerId": 2, "text": "Watch @20", "messageId": 9}],
        },
        {
            **REDIAL,
            "conversationId": "3",
            "messages": [{"senderWorkerId": 1, "text": "Hi @40", "messageId": 9}],
        },
    ]
    th = read_redial(write_jsonl(tmp_path / "test_data.jsonl", rows))
    f = th.frame
    assert f.select("request_id", "responder_id", "title", "year").rows() == [
        ("20001", "2", "Moon", 2009),
        ("20001", "2", "Primer", 2004),
    ]
    assert f["seen"].to_list()[0] == ["Arrival (2016)", "The Matrix (1999)"]
    assert f["prompt"].to_list()[0] == [
        {"role": "assistant", "content": "Hi! What do you like?"},
        {"role": "user", "content": "I loved Arrival (2016)\nand The Matrix (1999) too"},
    ]
    assert th.meta["dropped"] == {"no_recommendation": 1, "no_request_before_recommendation": 1}
    # No movies_with_mentions.csv beside it: the catalog comes from movieMentions, ids = movie ids.
    from catalog.match import Matcher

    pooled = pool_threads(th, Matcher(th.catalog))
    assert pooled.row(0, named=True)["union"] == ["20", "30"]
    assert pooled.row(0, named=True)["seen"] == ["40", "10"]
    assert pooled["n_responders"].to_list() == [1]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_generic_threads_in_three_formats(tmp_path, fmt):
    df = pl.DataFrame(
        {
            "request_id": ["x", "x", "y"],
            "prompt": ["films like Moon", "films like Moon", "old classics"],
            "responder_id": ["a", "b", "a"],
            "title": ["Primer", "The Matrix (1999)", "Solaris"],
            "year": ["2004", "", "1972"],
            "seen": ['["Moon (2009)"]', "Moon (2009)", ""],
            "split": ["train", "Train", "val"],
        }
    )
    path = tmp_path / f"t.{fmt}"
    {"jsonl": df.write_ndjson, "csv": df.write_csv, "parquet": df.write_parquet}[fmt](path)
    th = read_threads(path)
    f = th.frame
    assert {k: f.schema[k] for k in THREADS_SCHEMA} == THREADS_SCHEMA
    assert f.select("title", "year", "split").rows() == [
        ("Primer", 2004, "train"),
        ("The Matrix", 1999, "train"),  # the year is split off the title
        ("Solaris", 1972, "valid"),
    ]
    assert f["seen"].to_list() == [["Moon (2009)"], ["Moon (2009)"], []]
    assert f["prompt"].to_list()[2] == [{"role": "user", "content": "old classics"}]
    assert f["row"].to_list() == ([2, 3, 4] if fmt == "csv" else [1, 2, 3])


def test_combine_sets_splits_per_input(tmp_path):
    a = read_reddit(write_jsonl(tmp_path / "a.jsonl", REDDIT_ROWS[:1]))
    b = read_reddit(write_jsonl(tmp_path / "b.jsonl", REDDIT_ROWS[1:2]))
    both = combine([a, b], splits=["train", "test"])
    assert both.frame["split"].to_list() == ["train", "train", "test"]
    assert both.frame["file"].to_list()[-1].endswith("b.jsonl")


def test_every_source_has_its_reader():
    from data_prep.readers import DATA_SOURCES, READERS

    assert set(READERS) == set(DATA_SOURCES), (
        f"sources without a reader: {sorted(set(DATA_SOURCES) - set(READERS))}; "
        f"readers of no source: {sorted(set(READERS) - set(DATA_SOURCES))}"
    )


def test_a_source_without_a_reader_is_an_error_not_a_threads_file(tmp_path, monkeypatch):
    from data_prep.readers import DATA_SOURCES

    monkeypatch.setitem(DATA_SOURCES, "newsource", ("movie", "a source whose reader was not written"))
    path = write_jsonl(
        tmp_path / "t.jsonl", [{"request_id": "r", "prompt": "p", "responder_id": "a", "title": "X"}]
    )
    with pytest.raises(NotImplementedError, match=r"source 'newsource' .* has no reader"):
        read_source("newsource", path)
