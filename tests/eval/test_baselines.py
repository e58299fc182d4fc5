"""eval.baselines: the reference levels (chance, popularity, genre popularity), on a hand-computed case."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from eval.baselines import (
    VIEWS,
    baseline_levels,
    chance_recall,
    genre_lists,
    popularity_lists,
    reference_levels,
)
from eval.bootstrap import BootstrapConfig

# Items a..f, popularity 6..1; horror a c e, comedy b d f.
CATALOG = pl.DataFrame(
    {
        "item_id": list("abcdef"),
        "popularity": [6.0, 5.0, 4.0, 3.0, 2.0, 1.0],
        "genre": ["horror", "comedy"] * 3,
    }
)
REQUESTS = pl.DataFrame(
    {
        "request_id": ["r1", "r2"],
        "prompt": [
            [{"role": "user", "content": "Some HORROR please"}],
            [{"role": "user", "content": "any comedy?"}],
        ],
        "seen": [["a"], []],
        "responders": [[["c"], ["b", "e"]], [["d"]]],
        "union": [["c", "b", "e"], ["d"]],
        "counts": [[1, 1, 1], [1]],
    }
)


def test_chance_is_k_over_unseen_items_weighted_like_the_views():
    got = chance_recall(REQUESTS, n_items=6, k=2)
    # r1: 2 / (6 - 1) = 0.4 on 2 responder rows; r2: 2 / 6 on 1 row
    assert got["per_responder"] == pytest.approx((0.4 * 2 + 2 / 6) / 3)
    assert got["union"] == pytest.approx((0.4 + 2 / 6) / 2)
    assert got["single_mention"] == pytest.approx((0.4 + 2 / 6) / 2)


def test_lists_skip_seen_items_and_follow_popularity_and_the_named_genre():
    assert popularity_lists(REQUESTS, CATALOG, 2) == [["b", "c"], ["a", "b"]]
    assert genre_lists(REQUESTS, CATALOG, 2) == [["c", "e"], ["b", "d"]]
    assert genre_lists(REQUESTS, CATALOG.drop("genre"), 2) is None


def test_reference_levels_by_hand():
    got = reference_levels(REQUESTS, CATALOG, 2)
    # popularity: r1 [b, c]: u0 {c} 1, u1 {b, e} 0.5; r2 [a, b] vs {d}: 0
    assert got["popularity"]["per_responder"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert got["popularity"]["union"] == pytest.approx((2 / 3 + 0) / 2)
    # genre: r1 [c, e]: u0 1, u1 0.5; r2 [b, d]: 1
    assert got["genre_popularity"]["per_responder"] == pytest.approx((1 + 0.5 + 1) / 3)
    assert got["genre_popularity"]["union"] == pytest.approx((2 / 3 + 1) / 2)
    assert math.isclose(got["chance"]["union"], (0.4 + 2 / 6) / 2)
    assert "genre_popularity" not in reference_levels(REQUESTS, CATALOG.drop("genre"), 2)


def test_baseline_levels_score_every_metric_and_view_with_the_eval_code():
    views = ["per_responder", "union", "single_mention", "per_mention"]
    ci = BootstrapConfig(n_resamples=99, method="percentile")
    got = baseline_levels(REQUESTS, CATALOG, ks=[2, 1], metrics=["recall", "ndcg"], views=views, config=ci)
    ref = reference_levels(REQUESTS, CATALOG, 2)
    for level in ("chance", "popularity", "genre_popularity"):  # the demo's levels, at k = 2
        for view in ("per_responder", "union", "single_mention"):
            assert got[level][view]["recall@2"]["mean"] == pytest.approx(ref[level][view])
    # chance is recall only; per mention: r1's 3 mention rows 2 / 5 each, r2's one 2 / 6; k = 1 halves it
    assert set(got["chance"]["per_mention"]) == {"recall@1", "recall@2"}
    assert got["chance"]["per_mention"]["recall@2"]["mean"] == pytest.approx((3 * 0.4 + 2 / 6) / 4)
    assert got["chance"]["union"]["recall@1"]["mean"] == pytest.approx((0.2 + 1 / 6) / 2)
    # popularity ndcg@2: r1 [b, c]: u0 {c} at rank 2: 1 / log2(3); u1 {b, e}: b at rank 1, ideal 1 + 1 / log2(3)
    d2 = 1 / math.log2(3)
    expected = (d2 + 1 / (1 + d2) + 0) / 3
    assert got["popularity"]["per_responder"]["ndcg@2"]["mean"] == pytest.approx(expected)
    # popularity at k = 1 is the top of the k = 2 list: r1 [b]: u0 0, u1 1/2; r2 [a]: 0
    assert got["popularity"]["per_responder"]["recall@1"]["mean"] == pytest.approx(0.5 / 3)
    cell = got["popularity"]["per_responder"]["recall@2"]
    assert cell["ci_low"] <= cell["mean"] <= cell["ci_high"]
    # no popularity recorded, no genre column, no recall asked: those levels are left out
    bare = CATALOG.drop("genre").with_columns(pl.lit(None, dtype=pl.Float64).alias("popularity"))
    assert list(baseline_levels(REQUESTS, bare, ks=[2], config=ci)) == ["chance"]
    assert "chance" not in baseline_levels(REQUESTS, CATALOG, ks=[2], metrics=["ndcg"], config=ci)


def test_eval_baselines_prints_the_levels_of_a_dataset_split(tmp_path, capsys):
    from remark.cli.main import main
    from tests.eval.conftest import TITLES, write_tiny_dataset

    # popularity 8..1 in TITLES order; sci-fi: Arrival, Interstellar, Annihilation, Moon (every prompt says
    # "Sci-fi like ..."), the rest classic
    scifi = {"Arrival", "Interstellar", "Annihilation", "Moon"}
    columns = {
        "popularity": [float(8 - i) for i in range(len(TITLES))],
        "genre": ["sci-fi" if t in scifi else "classic" for t, _ in TITLES],
    }
    data = write_tiny_dataset(tmp_path / "data", columns)
    argv = ["eval", "baselines", "--data", str(data), "--k", "1", "2", "--metrics", "recall"]
    argv += ["--ci-method", "percentile", "--resamples", "200"]
    assert main([*argv, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["split"], got["n_requests"], got["n_items"]) == ("test", 4, 8)
    # no valid split: the retrieval level takes the stated default, and says so; no strongest baseline named
    assert got["notes"] == [
        "retrieval: tfidf_char with 3 neighbours, the default (not chosen on validation: no validation requests)"
    ]
    assert got["retrieval"]["chosen_on"] is None and got["retrieval"]["grid"] == []
    assert got["strongest_baseline"] is None
    levels = {
        name: {v: {m: c["mean"] for m, c in lv[v].items()} for v in VIEWS}
        for name, lv in got["levels"].items()
    }
    # chance: r1 and r4 have seen one of the 8 items (k / 7), r2 and r3 none (k / 8); responder rows 2 3 1 2
    assert levels["chance"]["per_responder"]["recall@1"] == pytest.approx((2 / 7 + 3 / 8 + 1 / 8 + 2 / 7) / 8)
    assert levels["chance"]["union"]["recall@2"] == pytest.approx((2 / 7 + 2 / 8 + 2 / 8 + 2 / 7) / 4)
    # popularity, every request: [The Matrix, Arrival] (r1's seen Contact and r4's seen Moon are further down)
    # rows at k = 1: r2's u0 {The Matrix} only; k = 2: r1 1/2 1/2, r2 1 0 0, r3 0, r4 1/2 0
    assert levels["popularity"]["per_responder"] == pytest.approx({"recall@1": 1 / 8, "recall@2": 2.5 / 8})
    assert levels["popularity"]["union"] == pytest.approx({"recall@1": 1 / 12, "recall@2": 1 / 4})
    # sci-fi by popularity: [Arrival, Interstellar]: k = 1: r1 1/2 1/2, r4 1/2 0; k = 2: r1 1 1/2, r4 1/2 1
    assert levels["genre_popularity"]["per_responder"] == pytest.approx(
        {"recall@1": 1.5 / 8, "recall@2": 3 / 8}
    )
    assert levels["genre_popularity"]["union"] == pytest.approx({"recall@1": 1 / 6, "recall@2": 1 / 3})
    # nearest_request: r5 (train, union [Moon]) is every test request's only training request; r4 has seen
    # Moon (an empty list); r1's u1 {Arrival, Moon}: 1/2, r1's union {Arrival, Interstellar, Moon}: 1/3
    assert levels["nearest_request"]["per_responder"] == pytest.approx(
        {"recall@1": 0.5 / 8, "recall@2": 0.5 / 8}
    )
    assert levels["nearest_request"]["union"] == pytest.approx({"recall@1": 1 / 12, "recall@2": 1 / 12})
    # retrieval: r5 is every test prompt's only neighbour ("Sci-fi like ..."): the same [Moon] lists
    assert levels["retrieval"]["per_responder"] == levels["nearest_request"]["per_responder"]
    assert "seen_request" not in levels and got["split_overlap"]["near_duplicate_prompt"] == 0
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("## Reference levels: split test, 4 requests, 8 catalog items")
    assert f"| popularity | recall@2 | {2.5 / 8:.4f} [" in text and "- chance: K random unseen" in text
    assert main(["eval", "baselines", "--data", str(data), "--split", "valid"]) == 2
    assert "no request in split 'valid'" in capsys.readouterr().err


# Training requests: t1's union by count is [banana, cherry, apple]; t2's [cherry, strawberry] (a tie:
# union order). Content words: t1 "fruit", t2 "fruit red", t3 "classic old".
TRAIN = pl.DataFrame(
    {
        "request_id": ["t1", "t2", "t3"],
        "prompt": [
            [{"role": "user", "content": c}] for c in ("Name a fruit", "Name a red fruit", "Old classics?")
        ],
        "seen": [[], [], []],
        "responders": [
            [["banana", "cherry", "apple"], ["banana", "cherry"], ["banana"]],
            [["cherry", "strawberry"]] * 2,
            [["solaris", "metropolis"]],
        ],
        "union": [["apple", "banana", "cherry"], ["cherry", "strawberry"], ["solaris", "metropolis"]],
        "counts": [[1, 3, 2], [2, 2], [1, 1]],
    }
)
# r1: t1's prompt normalized (score 100 to t1, 71 to t2); r2: no twin (76 to t3, 22 to t2, 9 to t1);
# r4: t2's content words reworded (100 to t2, 71 to t1)
HELD_OUT = pl.DataFrame(
    {
        "request_id": ["r1", "r2", "r4"],
        "prompt": [
            [{"role": "user", "content": c}]
            for c in ("name fruits", "Old classics, please", "Name a fruit that is red")
        ],
        "seen": [["banana"], [], []],
        "responders": [[["apple"], ["kiwi"]], [["metropolis"]], [["strawberry", "apple"]]],
        "union": [["apple", "kiwi"], ["metropolis"], ["strawberry", "apple"]],
        "counts": [[1, 1], [1], [1, 1]],
    }
)


def test_nearest_request_lists_by_hand():
    from eval.baselines import nearest_request_lists

    # r1: t1 without the seen banana, then t2's strawberry; r2: t3, then t2's cherry; r4: t2, then t1's banana
    assert nearest_request_lists(TRAIN, HELD_OUT, 3) == [
        ["cherry", "apple", "strawberry"],
        ["solaris", "metropolis", "cherry"],
        ["cherry", "strawberry", "banana"],
    ]
    assert nearest_request_lists(TRAIN, HELD_OUT, 1) == [["cherry"], ["solaris"], ["cherry"]]
    # a training request is not its own neighbour: t1 -> t2 (71), t2 -> t1 (71), t3 -> t2 (30 against 13)
    assert nearest_request_lists(TRAIN, TRAIN, 2) == [
        ["cherry", "strawberry"],
        ["banana", "cherry"],
        ["cherry", "strawberry"],
    ]
    assert nearest_request_lists(TRAIN.head(0), HELD_OUT, 2) == [[], [], []]


def test_train_popularity_lists_count_training_mentions_by_hand():
    from eval.baselines import train_popularity_lists

    # mentions: cherry 2 + 2 = 4, banana 3, strawberry 2, then apple, metropolis, solaris 1 each (by id)
    assert train_popularity_lists(TRAIN, HELD_OUT, 3) == [
        ["cherry", "strawberry", "apple"],  # r1 has seen banana
        ["cherry", "banana", "strawberry"],
        ["cherry", "banana", "strawberry"],
    ]
    assert train_popularity_lists(TRAIN, HELD_OUT, 6)[1] == ["cherry", "banana", "strawberry", "apple",
                                                              "metropolis", "solaris"]  # fmt: skip
    assert train_popularity_lists(TRAIN.head(0), HELD_OUT, 2) == [[], [], []]


def test_seen_request_lists_by_hand():
    from eval.baselines import seen_request_lists

    # r1's twin t1 (same normalized prompt), r4's t2 (same content words); r2 has none
    assert seen_request_lists(TRAIN, HELD_OUT, 3) == [["cherry", "apple"], [], ["cherry", "strawberry"]]
    assert seen_request_lists(TRAIN, HELD_OUT.slice(1, 1), 3) is None
    assert seen_request_lists(TRAIN, TRAIN, 3) is None  # nobody is their own twin; t1 / t2 score 71


def test_request_levels_score_with_the_eval_code():
    from eval.baselines import LEVELS

    catalog = pl.DataFrame(
        {
            "item_id": ["apple", "banana", "cherry", "kiwi", "strawberry", "solaris", "metropolis"],
            "popularity": [7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0],
        }
    )
    got = reference_levels(HELD_OUT, catalog, 3, train=TRAIN)
    # nearest, per responder: r1 u0 {apple} 1, u1 {kiwi} 0; r2 1; r4 {strawberry, apple} 1/2
    assert got["nearest_request"]["per_responder"] == pytest.approx((1 + 0 + 1 + 0.5) / 4)
    assert got["nearest_request"]["union"] == pytest.approx((0.5 + 1 + 0.5) / 3)
    # seen: r1 [cherry, apple] 1 and 0; r2 [] 0; r4 [cherry, strawberry] 1/2
    assert got["seen_request"]["per_responder"] == pytest.approx((1 + 0 + 0 + 0.5) / 4)
    assert got["seen_request"]["union"] == pytest.approx((0.5 + 0 + 0.5) / 3)
    assert "nearest_request" not in reference_levels(HELD_OUT, catalog, 3)
    ci = BootstrapConfig(n_resamples=99, method="percentile")
    levels = baseline_levels(HELD_OUT, catalog, ks=[3, 1], config=ci, train=TRAIN)
    assert levels["nearest_request"]["per_responder"]["recall@3"]["mean"] == pytest.approx(2.5 / 4)
    # k = 1 is the top of the k = 3 lists: [cherry], [solaris], [cherry]: 0 everywhere
    assert levels["nearest_request"]["per_responder"]["recall@1"]["mean"] == 0
    # training popularity: r1 [cherry, strawberry, apple] 1 and 0; r2 0; r4 [cherry, banana, strawberry] 1/2
    assert levels["train_popularity"]["per_responder"]["recall@3"]["mean"] == pytest.approx(1.5 / 4)
    assert levels["train_popularity"]["union"]["recall@3"]["mean"] == pytest.approx(1 / 3)
    assert "train_popularity" not in baseline_levels(HELD_OUT, catalog, ks=[3], config=ci)
    assert set(LEVELS) >= {"nearest_request", "seen_request"}
    without_twins = baseline_levels(HELD_OUT.slice(1, 1), catalog, ks=[3], config=ci, train=TRAIN)
    assert "nearest_request" in without_twins and "seen_request" not in without_twins


def test_eval_baselines_on_a_respondent_split_adds_the_lookup_and_warns(tmp_path, capsys):
    from data_prep.dataset import load_dataset
    from remark.cli.main import main
    from tests.eval.conftest import write_split_dataset

    data = write_split_dataset(tmp_path / "respondents", by="respondent")
    argv = ["eval", "baselines", "--data", str(data), "--k", "10", "--metrics", "recall"]
    argv += ["--ci-method", "percentile", "--resamples", "200"]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    got = json.loads(captured.out)
    overlap = got["split_overlap"]
    assert (overlap["exact_prompt"], overlap["near_duplicate_prompt"], got["train_split"]) == (4, 4, "train")
    assert captured.err.startswith("warning: 4 of 4 test requests are training requests")
    assert "seen_request: 4 of 4 requests are train requests" in " ".join(got["notes"])
    # seen_request lists each question's training union (K = 10 holds it whole): on the union view, the
    # share of the held-out union found in the training union, per request
    ds = load_dataset(data)
    train = dict(ds.requests.filter(pl.col("split") == "train").select("request_id", "union").iter_rows())
    test = ds.requests.filter(pl.col("split") == "test")
    expected = [
        len(set(u) & set(train[rid.removesuffix("#test")])) / len(u)
        for rid, u in test.select("request_id", "union").iter_rows()
    ]
    seen = got["levels"]["seen_request"]
    assert seen["union"]["recall@10"]["mean"] == pytest.approx(sum(expected) / len(expected))
    assert 0 < seen["union"]["recall@10"]["mean"] < 1
    # nearest_request starts with the same list (the twin scores 100) and pads it: never lower
    for view in VIEWS:
        assert got["levels"]["nearest_request"][view]["recall@10"]["mean"] >= seen[view]["recall@10"]["mean"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "| seen_request | recall@10 |" in text and "| nearest_request | recall@10 |" in text
    assert "Split overlap, test vs train: 4 test requests, 4 train requests" in text
    assert "\nwarning: 4 of 4 test requests are training requests" in text


def test_eval_baselines_on_a_request_split_has_no_lookup_and_no_warning(tmp_path, capsys):
    from remark.cli.main import main
    from tests.eval.conftest import write_split_dataset

    data = write_split_dataset(tmp_path / "requests", by="request")
    argv = ["eval", "baselines", "--data", str(data), "--k", "2", "--metrics", "recall", "--resamples", "200"]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    got = json.loads(captured.out)
    assert "seen_request" not in got["levels"] and captured.err == ""
    assert (got["split_overlap"]["near_duplicate_prompt"], got["split_overlap"]["warning"]) == (0, None)
    # q4 "Dreams and heists": its nearest training prompt by content words, then the next; q4's
    # responders name Inception and Interstellar, which no training request holds
    assert got["levels"]["nearest_request"]["per_responder"]["recall@2"]["mean"] == 0
    assert main([*argv, "--train-split", "valid"]) == 2
    err = capsys.readouterr().err
    assert "no request in split 'valid'" in err and "--train-split" in err
