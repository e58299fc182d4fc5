"""eval.retrieval: the retrieval level (TF-IDF / BM25 nearest training prompts, similarity-weighted answers),
its choice on validation, and the strongest simple baseline, on hand-computed cases."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from eval.baselines import VIEWS, reference_levels, strongest_baseline
from eval.retrieval import (
    DEFAULT,
    RetrievalChoice,
    choose_retrieval,
    grid_markdown,
    grid_values,
    neighbour_rows,
    retrieval_levels,
    retrieval_lists,
    similarities,
)


def _frame(rows: list[tuple[str, str, list[str], list[list[str]]]]) -> pl.DataFrame:
    """(request_id, prompt, seen, responders) -> pooled rows (union in first-mention order, counts)."""
    out = []
    for rid, prompt, seen, responders in rows:
        union: list[str] = []
        for answers in responders:
            union += [a for a in answers if a not in union]
        counts = [sum(a in answers for answers in responders) for a in union]
        out.append(
            {
                "request_id": rid,
                "prompt": [{"role": "user", "content": prompt}],
                "seen": seen,
                "responders": responders,
                "union": union,
                "counts": counts,
            }
        )
    return pl.DataFrame(out)


# t1: x by 2 of 2 responders (share 1), y by 1 (0.5); t2: y 1/4, z 2/4, w 1/4; t3: q 1/1
TRAIN = _frame(
    [
        ("t1", "apple", [], [["x"], ["x", "y"]]),
        ("t2", "apple banana", [], [["y"], ["z"], ["z"], ["w"]]),
        ("t3", "cherry", [], [["q"]]),
    ]
)
# tfidf_word (smooth idf = ln((1 + 3) / (1 + df)) + 1, sublinear tf 1 for single words, L2 rows): "apple"
# has df 2, "banana", "cherry" and the pair "apple banana" df 1. The query "apple" is t1's unit vector;
# t2 = (a, c, c) over (apple, banana, apple banana), so cos(apple, t2) = a / sqrt(a^2 + 2 c^2); t3: 0
A, C = math.log(4 / 3) + 1, math.log(2) + 1
S2 = A / math.sqrt(A * A + 2 * C * C)


def test_tfidf_word_similarities_by_hand():
    queries = _frame([("r1", "apple", [], [["x"]]), ("r2", "cherry pie", [], [["q"]])])
    got = similarities(TRAIN, queries, "tfidf_word").toarray()
    # "pie" and "cherry pie" are not in the training vocabulary: r2 is t3's unit vector
    assert got.tolist()[0] == pytest.approx([1.0, S2, 0.0]) and got.tolist()[1] == pytest.approx([0, 0, 1.0])
    with pytest.raises(ValueError, match="unknown retrieval variant"):
        similarities(TRAIN, queries, "lsa")


def test_bm25_by_hand():
    # avgdl 4/3; idf(apple) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln 1.6; k1 1.5, b 0.75, tf 1:
    # t1 (length 1): 2.5 / (1 + 1.5 (0.25 + 0.75 * 3/4)); t2 (length 2): 2.5 / (1 + 1.5 (0.25 + 0.75 * 3/2))
    got = similarities(TRAIN, _frame([("r1", "apple", [], [])]), "bm25").toarray()
    idf = math.log(1.6)
    expected = [idf * 2.5 / (1 + 1.5 * (0.25 + 0.5625)), idf * 2.5 / (1 + 1.5 * (0.25 + 1.125)), 0.0]
    assert got[0] == pytest.approx(expected)


def test_aggregation_over_two_neighbours_by_hand():
    queries = _frame(
        [("r1", "apple", [], [["x"]]), ("r2", "apple", ["x"], [["y"]]), ("r3", "cherry pie", [], [])]
    )
    # r1, k = 2: t1 (sim 1) then t2 (S2): x 1; y 0.5 + 0.25 S2; z 0.5 S2; w 0.25 S2
    assert S2 * 0.5 < 0.5  # so y (> 0.5) comes before z
    got = retrieval_lists(TRAIN, queries, 3, variant="tfidf_word", neighbours=2)
    assert got[0] == ["x", "y", "z"]
    # r2 has seen x: dropped; r3: t3 is its only neighbour with a positive similarity
    assert got[1:] == [["y", "z", "w"], ["q"]]
    assert retrieval_lists(TRAIN, queries, 10, variant="tfidf_word", neighbours=2)[0] == ["x", "y", "z", "w"]
    # k = 1: t1 alone
    assert retrieval_lists(TRAIN, queries, 10, variant="tfidf_word", neighbours=1)[0] == ["x", "y"]
    found = neighbour_rows(TRAIN, queries, "tfidf_word", 3)
    assert [j for j, _ in found[0]] == [0, 1] and found[0][1][1] == pytest.approx(S2)


def test_a_training_request_is_not_its_own_neighbour():
    # t1 -> t2 (S2): z 0.5 S2, then w and y tie at 0.25 S2 (by item_id); t2 -> t1: x, y; t3 shares no word
    assert retrieval_lists(TRAIN, TRAIN, 5, variant="tfidf_word", neighbours=3) == [
        ["z", "w", "y"],
        ["x", "y"],
        [],
    ]
    assert retrieval_lists(TRAIN.head(0), TRAIN, 5) == [[], [], []]


def test_equal_similarities_go_to_the_lower_training_row(monkeypatch):
    import eval.retrieval as retrieval

    twins = pl.concat([TRAIN, _frame([("t4", "apple", [], [["v"]])])])  # t4 scores as t1 does
    query = _frame([("r1", "apple", [], [])])
    assert neighbour_rows(twins, query, "tfidf_word", 1)[0] == [(0, pytest.approx(1.0))]
    assert [j for j, _ in neighbour_rows(twins, query, "tfidf_word", 2)[0]] == [0, 3]
    # one request per block gives the same lists
    expected = retrieval_lists(twins, twins, 5, variant="tfidf_char", neighbours=3)
    monkeypatch.setattr(retrieval, "CHUNK_CELLS", 1)
    assert retrieval_lists(twins, twins, 5, variant="tfidf_char", neighbours=3) == expected


def test_the_validation_choice_picks_the_known_best():
    # v1 (responder names z): k = 1 lists [x, y] (recall 0), k = 2 lists [x, y, z] (recall 1) at K = 3
    valid = _frame([("v1", "apple", [], [["z"]])])
    grid = grid_values(TRAIN, valid, 3, variants=("tfidf_word",), neighbours=(1, 2))
    assert grid == [("tfidf_word", 1, 0.0), ("tfidf_word", 2, 1.0)]
    choice = choose_retrieval(TRAIN, valid, 3, variants=("tfidf_word",), neighbours=(1, 2))
    assert (choice.variant, choice.neighbours, choice.chosen_on) == ("tfidf_word", 2, "valid")
    assert choice.metric == "eval/recall@3/per_responder" and choice.n_valid == 1
    # a responder naming x: every setting finds it; ties go to the first in grid order
    tie = _frame([("v1", "apple", [], [["x"]])])
    got = choose_retrieval(TRAIN, tie, 3, variants=("tfidf_word", "tfidf_char"), neighbours=(1, 2))
    assert (got.variant, got.neighbours) == ("tfidf_word", 1)
    assert [g[2] for g in got.grid] == [1.0] * 4
    # no validation requests: the stated default, said so
    for none in (None, valid.head(0)):
        default = choose_retrieval(TRAIN, none, 3)
        assert (default.variant, default.neighbours, default.chosen_on, default.grid) == (*DEFAULT, None, ())
        assert "the default (not chosen on validation" in default.describe()
    assert (
        "chosen on the 1 valid requests by eval/recall@3/per_responder over 2 settings" in choice.describe()
    )


def test_retrieval_levels_match_reference_levels_and_name_the_strongest():
    valid = _frame([("v1", "apple", [], [["z"]])])
    test = _frame([("r1", "apple", [], [["x"], ["w"]]), ("r2", "cherry", [], [["q"], ["y"]])])
    got = retrieval_levels(TRAIN, valid, test, 3, variants=("tfidf_word",), neighbours=(1, 2))
    assert (got["choice"]["variant"], got["choice"]["neighbours"]) == ("tfidf_word", 2)
    assert got["choice"]["grid"] == [
        {"variant": "tfidf_word", "neighbours": 1, "value": 0.0},
        {"variant": "tfidf_word", "neighbours": 2, "value": 1.0},
    ]
    # r1 [x, y, z]: {x} 1, {w} 0; r2 [q]: {q} 1, {y} 0 -> 2 / 4 per responder; union: 1/2, 1/2
    assert got["levels"]["retrieval"]["per_responder"] == pytest.approx(0.5)
    assert got["levels"]["retrieval"]["union"] == pytest.approx(0.5)
    assert got["valid_levels"] == {"retrieval": {"per_responder": 1.0, "union": 1.0, "single_mention": 1.0}}
    json.dumps(got)
    catalog = pl.DataFrame({"item_id": list("qwxyz"), "popularity": [1.0, 2.0, 3.0, 4.0, 5.0]})
    choice = RetrievalChoice("tfidf_word", 2)
    merged = reference_levels(test, catalog, 3, train=TRAIN, retrieval=choice)
    # r1 and r2 are t1's and t3's twins (same prompt): the lookup comes last
    assert list(merged) == ["chance", "popularity", "nearest_request", "retrieval", "seen_request"]
    assert merged["retrieval"] == pytest.approx(got["levels"]["retrieval"], nan_ok=True)
    assert set(merged["retrieval"]) == set(VIEWS)
    assert "retrieval" not in reference_levels(test, catalog, 3, train=TRAIN)
    assert retrieval_levels(TRAIN.head(0), valid, test, 3)["levels"] == {}


def test_strongest_baseline_leaves_out_the_lookup_and_nan():
    levels = {
        "chance": {"per_responder": 0.01},
        "popularity": {"per_responder": 0.04},
        "nearest_request": {"per_responder": 0.04},
        "retrieval": {"per_responder": float("nan")},
        "seen_request": {"per_responder": 0.9},
    }
    assert strongest_baseline(levels) == "popularity"  # ties to the first listed
    levels["retrieval"]["per_responder"] = 0.07
    assert strongest_baseline(levels) == "retrieval"
    assert strongest_baseline({"a": {"union": 0.1}, "b": {"union": 0.2}}, view="union") == "b"
    with pytest.raises(ValueError, match="no non-oracle level"):
        strongest_baseline({"seen_request": {"per_responder": 1.0}})


def test_grid_markdown_bolds_the_choice():
    choice = RetrievalChoice(
        "bm25", 3, "valid", "eval/recall@10/per_responder", (("bm25", 1, 0.25), ("bm25", 3, 0.5)), 7
    )
    lines = grid_markdown(choice.as_dict())
    assert lines[0] == "Retrieval grid on the 7 valid requests (eval/recall@10/per_responder; bold: chosen):"
    assert lines[2:] == ["| variant | k=1 | k=3 |", "|---|---|---|", "| bm25 | 0.2500 | **0.5000** |"]
    assert grid_markdown(RetrievalChoice(*DEFAULT).as_dict()) == []


def test_eval_baselines_chooses_retrieval_on_the_valid_split(tmp_path, capsys):
    from catalog.match import Matcher
    from catalog.table import Catalog
    from data_prep.dataset import write_dataset
    from data_prep.pool import pool_threads
    from data_prep.schema import validate_threads
    from remark.cli.main import main
    from tests.eval.conftest import TITLES

    catalog = Catalog.from_frame(
        pl.DataFrame({"title": [t for t, _ in TITLES], "year": [y for _, y in TITLES]})
    )
    years = dict(TITLES)
    questions = {  # request -> (split, prompt, responders' titles)
        "a1": ("train", "Films about robots", [["The Matrix"], ["Moon"], ["Moon"]]),
        "a2": ("train", "Films about robots and space", [["Interstellar"], ["Arrival"]]),
        "a3": ("train", "Old classics", [["Contact"]]),
        "v1": ("valid", "Robots films", [["Moon"], ["Interstellar"]]),
        "s1": ("test", "Space robots", [["Arrival"], ["Moon"]]),
    }
    rows = [
        {
            "request_id": rid,
            "prompt": [{"role": "user", "content": prompt}],
            "responder_id": f"{rid}-u{j}",
            "title": t,
            "year": years[t],
            "seen": [],
            "split": split,
        }
        for rid, (split, prompt, responders) in questions.items()
        for j, titles in enumerate(responders)
        for t in titles
    ]
    matcher = Matcher(catalog)
    pooled = pool_threads(validate_threads(pl.DataFrame(rows)), matcher)
    meta = {"source": "test", "domain": "movie", "has_years": True, "instruction_included": False}
    data = tmp_path / "data"
    write_dataset(data, pooled, catalog, meta, grounding=matcher.settings)
    argv = ["eval", "baselines", "--data", str(data), "--k", "2", "--metrics", "recall", "--resamples", "200"]
    assert main([*argv, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    choice = got["retrieval"]
    assert choice["chosen_on"] == "valid" and choice["n_valid"] == 1
    assert choice["metric"] == "eval/recall@2/per_responder" and len(choice["grid"]) == 15
    best = max(g["value"] for g in choice["grid"])
    first = next(g for g in choice["grid"] if g["value"] == best)
    assert (choice["variant"], choice["neighbours"]) == (first["variant"], first["neighbours"])
    assert "retrieval" in got["levels"] and got["strongest_baseline"]["level"] in got["levels"]
    assert got["strongest_baseline"]["validation"]["retrieval"] == pytest.approx(best)
    assert any(n.startswith("retrieval: ") and "chosen on the 1 valid requests" in n for n in got["notes"])
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "| retrieval | recall@2 |" in text and "Retrieval grid on the 1 valid requests" in text
    assert "the strongest simple baseline on the valid requests" in text
    assert main([*argv, "--split", "valid", "--json"]) == 0
    assert "its value here is optimistic" in " ".join(json.loads(capsys.readouterr().out)["notes"])
