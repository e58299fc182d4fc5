"""eval.protoqa_match: ProtoQA's per-question matching against the official evaluator's cases, by hand,
against the catalog metric on the same lists, and its place in ``eval.run.evaluate_model``'s outputs."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from catalog.match import GroundingSettings, Matcher
from data_prep.dataset import load_dataset, write_dataset
from data_prep.pool import pool_threads
from data_prep.readers import read_protoqa
from data_prep.schema import ANSWERS_SCHEMA
from data_prep.shipped import protoqa_file
from eval.bootstrap import BootstrapConfig
from eval.protoqa import max_answers_at_k, read_protoqa_clusters, read_protoqa_predictions
from eval.protoqa_match import (
    WEIGHT,
    answer_groups,
    protoqa_block,
    protoqa_compare,
    score_protoqa,
)
from eval.score import ground_lists
from eval.views import score_lists

CI = BootstrapConfig(method="percentile", n_resamples=200)


def answers(**questions) -> pl.DataFrame:
    """``answers(q1=([(count, [strings]), ...], {raw: count}), ...)`` as ``ANSWERS_SCHEMA`` rows."""
    rows = [
        {
            "request_id": q,
            "clusters": [{"count": c, "answers": list(s)} for c, s in clusters],
            "raw": [{"answer": a, "count": n} for a, n in (raw or {}).items()],
        }
        for q, (clusters, raw) in questions.items()
    ]
    return pl.DataFrame(rows, schema=ANSWERS_SCHEMA)


def one(preds, clusters, k, key="per_responder", raw=None) -> float:
    """The per-question value of one list for one question at cut-off k."""
    scores = score_protoqa(["q"], [preds], answers(q=(clusters, raw)), ks=[k])
    name = f"protoqa/max_answers@{k}" if key == "max_answers" else f"protoqa/recall@{k}/{key}"
    return scores.per_request[name][0]


# -- the official evaluator's own cases ----------------------------------------------------------------
# Expected values from iesl/protoqa-evaluator tests/test_evaluator.py (commit 860dfd2, Apache-2.0; the
# fixture files are in ../shared/data/protoqa-evaluator-fixtures). Exact-match methods only:
# fast_money = Max Answers@1; set_intersection = union recall at the list's length (no cut, one per
# cluster); family_feud (max_incorrect=n) = per-responder recall up to the n-th unmatched line, the
# oracle being every cluster: our metric at K = that line's position + 1 when every respondent is in a
# cluster (the fixtures have cluster counts only).
SETS = {
    "10_60_30": [(10, ["10"]), (60, ["60"]), (30, ["30"])],
    "apple_bananna_carrot": [(10, ["apple"]), (60, ["bananna"]), (30, ["carrot"])],
    "12_27_48": [(12, ["12"]), (27, ["27"]), (48, ["48"])],
    "looks_smell": [(2, ["smell"]), (5, ["face"])],
    "space": [(1, ["moon"]), (2, ["earth", "planet"]), (2, ["sun", "star"]), (3, ["comet", "meteor", "asteroid"])],
    "produce": [(5, ["apple", "banana", "fruit", "fruits"]), (3, ["broccoli", "vegetable"])],
}  # fmt: skip
OFFICIAL = [
    ("exact", ["60", "30", "10"], "10_60_30", {"family_feud": 1.0, "fast_money": 1.0, "set_intersection": 1.0}),
    ("exact_less_than_100", ["48", "27", "12"], "12_27_48",
     {"family_feud": 1.0, "fast_money": 1.0, "set_intersection": 1.0}),
    ("no_match", ["a", "b", "c", "d", "e"], "10_60_30",
     {"family_feud": 0.0, "fast_money": 0.0, "set_intersection": 0.0}),
    ("scale_to_max", ["30", "a", "b"], "10_60_30",
     {"family_feud": 0.3, "fast_money": 0.5, "set_intersection": 1 / 3}),
    ("wrong_order", ["10", "30", "60"], "10_60_30",
     {"family_feud": 1.0, "fast_money": 1 / 6, "set_intersection": 1.0}),
    ("no_double_counting", ["60", "60", "60"], "10_60_30",
     {"family_feud": 0.6, "fast_money": 1.0, "set_intersection": 1 / 3}),
    ("three_wrong", ["30", "X", "X", "10", "X", "60"], "10_60_30",
     {"family_feud": 0.4, "fast_money": 0.5, "set_intersection": 1.0}),
    ("three_wrong_right_away", ["X", "X", "X", "10", "X", "60"], "10_60_30",
     {"family_feud": 0.0, "fast_money": 0.0, "family_feud_5_incorrect": 0.7, "set_intersection": 2 / 3}),
    ("two_wrong", ["30", "X", "10", "X", "60"], "10_60_30",
     {"family_feud": 1.0, "family_feud_2_incorrect": 0.4, "set_intersection": 1.0}),
    ("many_repeats_should_not_penalize", ["30", "30", "30", "30", "30", "30", "60"], "10_60_30",
     {"family_feud": 0.9, "family_feud_2_incorrect": 0.9, "family_feud_5_incorrect": 0.9,
      "set_intersection": 2 / 3}),
    ("sloppy_input_answers", ["an Apple", "X", "the Banannnaa"], "apple_bananna_carrot",
     {"family_feud": 0.0, "set_intersection": 0.0}),
    ("non_exact_match_answers", ["odor", "looks"], "looks_smell", {"family_feud": 0.0, "set_intersection": 0.0}),
    ("crowd_exact_match", ["fruit", "vegetable"], "produce",
     {"family_feud": 1.0, "fast_money": 1.0, "set_intersection": 1.0}),
    ("crowd_misspelling", ["aaple", "brocoli"], "produce",
     {"family_feud": 0.0, "fast_money": 0.0, "set_intersection": 0.0}),
    ("crowd_single_element_category", ["moon"], "space",
     {"family_feud": 1 / 8, "fast_money": 1 / 3, "set_intersection": 1 / 4}),
    ("crowd_no_category_label_points", ["space rock"], "space",
     {"family_feud": 0.0, "fast_money": 0.0, "set_intersection": 0.0}),
    ("crowd_multiple_possible_assignments", ["broccoli/banana", "an apple"], "produce",
     {"family_feud": 0.0, "fast_money": 0.0, "set_intersection": 0.0}),
    ("crowd_no_double_points_for_surface_forms", ["apple", "banana", "fruit", "fruits"], "produce",
     {"family_feud": 5 / 8, "fast_money": 1.0, "set_intersection": 1 / 2}),
    ("crowd_no_double_points_for_partial_matches", ["apple", "aapple", "appple", "apples"], "produce",
     {"family_feud": 5 / 8, "fast_money": 1.0, "set_intersection": 1 / 2}),
    ("crowd_no_match", ["a", "b", "c", "d", "e"], "space",
     {"family_feud": 0.0, "fast_money": 0.0, "set_intersection": 0.0}),
]  # fmt: skip
CASES = [
    (f"{name}][{method}", preds, SETS[s], method, v)
    for name, preds, s, d in OFFICIAL
    for method, v in d.items()
]


def family_feud_cut(preds, clusters, max_incorrect: int) -> int:
    """Lines the evaluator's ``limit_total_wrong`` keeps: up to and with the n-th line matching no cluster."""
    strings = {s for _, ss in clusters for s in ss}
    wrong = 0
    for i, p in enumerate(preds):
        wrong += p.lower()[:50].strip() not in strings
        if wrong >= max_incorrect:
            return i + 1
    return len(preds)


@pytest.mark.parametrize(
    ("name", "preds", "clusters", "method", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_equals_the_official_evaluators_cases(name, preds, clusters, method, expected):
    if method == "fast_money":
        assert one(preds, clusters, 1, "max_answers") == pytest.approx(expected)
    elif method == "set_intersection":
        assert one(preds, clusters, len(preds), "union") == pytest.approx(expected)
    else:
        n = {"family_feud": 3, "family_feud_2_incorrect": 2, "family_feud_5_incorrect": 5}[method]
        assert one(preds, clusters, family_feud_cut(preds, clusters, n)) == pytest.approx(expected)


def read_fixture(path) -> pl.DataFrame:
    """The evaluator's old fixture format (``answers-cleaned``: {answer: count} or [{count, answers}])."""
    rows = {}
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        cleaned = obj["answers-cleaned"]
        clusters = (
            [(c["count"], c["answers"]) for c in cleaned]
            if isinstance(cleaned, list)
            else [(n, [a]) for a, n in cleaned.items()]
        )
        rows[obj["questionid"]] = (clusters, None)
    return answers(**rows)


@pytest.mark.data
def test_equals_the_official_evaluator_on_its_fixture_files(data_dir):
    fixtures = data_dir / "protoqa-evaluator-fixtures"
    stub = read_fixture(fixtures / "data_stub.jsonl")
    # test_evaluate_single_question: family_feud, q0 -> 38/99 (two unmatched lines: no cut)
    got = score_protoqa(["q0"], [["umbrella", "hat", "towel"]], stub, ks=[3]).per_request
    assert got["protoqa/recall@3/per_responder"][0] == pytest.approx(0.3838383838383838)
    # test_evaluate_multiple_questions: set_intersection over five questions
    preds = {
        "q0": ["umbrella", "sunscreen", "towel", "sun glasses"],
        "q1": ["bed", "shower", "bathroom"],
        "q2": ["baby crying"],
        "q3": ["10"],
        "q4": ["40"],
    }
    got = score_protoqa(list(preds), list(preds.values()), stub, ks=[4]).per_request
    assert got["protoqa/recall@4/union"].to_list() == pytest.approx([2 / 6, 2 / 7, 0, 1 / 7, 1 / 5])
    # test_crowdsource_eval_on_jsonl: set_intersection on the crowdsourced stub
    crowd = read_fixture(fixtures / "crowdsource_data_stub.jsonl")
    lists = [["star", "galaxy", "dark matter"], ["apple", "broccoli", "asparagus", "orange"]]
    got = score_protoqa(["r1q1", "r1q2"], lists, crowd, ks=[4]).per_request
    assert got["protoqa/recall@4/union"].to_list() == pytest.approx([0.25, 1.0])


def test_max_answers_equals_eval_protoqa_on_the_shipped_dev_questions():
    """Max Answers@k over the 52 crowdsourced dev questions equals ``eval.protoqa.max_answers_at_k`` (the
    evaluator's exact match re-implemented), for lists drawn from other questions' answers and their own."""
    path = protoqa_file("crowdsourced")
    clusters = read_protoqa_clusters(path)
    table = read_protoqa(path, items="raw").answers
    rng = np.random.default_rng(0)
    pool = [s for cl in clusters.values() for _, ss in cl for s in ss]
    ids = sorted(clusters)
    lists = [
        [str(x) for x in rng.choice(pool + [s for _, ss in clusters[q] for s in ss] * 3, size=12)]
        for q in ids
    ]
    got = score_protoqa(ids, lists, table, ks=[1, 3, 5, 10]).per_request
    for k in (1, 3, 5, 10):
        want = [max_answers_at_k(lst, clusters[q], k) for q, lst in zip(ids, lists, strict=True)]
        assert got[f"protoqa/max_answers@{k}"].to_list() == pytest.approx(want)


@pytest.mark.data
def test_max_answers_of_the_human_predictions_equals_eval_protoqa(data_dir):
    dev = data_dir / "protoqa" / "dev"
    clusters = read_protoqa_clusters(dev / "dev.crowdsourced.jsonl")
    preds = read_protoqa_predictions(dev / "dev.predictions.human.jsonl")
    table = read_protoqa(dev / "dev.crowdsourced.jsonl").answers
    ids = sorted(clusters)
    got = score_protoqa(ids, [preds.get(q, []) for q in ids], table, ks=[1, 3, 5, 10]).per_request
    for k in (1, 3, 5, 10):
        want = [max_answers_at_k(preds.get(q, []), clusters[q], k) for q in ids]
        assert got[f"protoqa/max_answers@{k}"].to_list() == pytest.approx(want)


# -- by hand -------------------------------------------------------------------------------------------
def test_car_and_cars_and_an_alias_of_two_questions_are_credited_per_question(tmp_path):
    """q1's cluster lists "car" and "cars", but "cars" is also q2's item, so the global catalog keeps it as
    q2's item only; "shore" is in a cluster of each question, so the catalog drops it as an alias. Per
    question both are credited to their own question's cluster; the catalog metric credits neither for q1."""
    lines = [
        {"metadata": {"id": "q1"}, "question": {"normalized": "name a way to get to the coast"},
         "answers": {"raw": {"car": 6, "cars": 2, "shore": 1, "bus": 1},
                     "clusters": {"q1.0": {"count": 8, "answers": ["car", "cars"]},
                                  "q1.1": {"count": 1, "answers": ["coast", "shore"]},
                                  "q1.2": {"count": 1, "answers": ["bus"]}}}},
        {"metadata": {"id": "q2"}, "question": {"normalized": "name something at the beach"},
         "answers": {"raw": {"sand": 7, "shore": 2, "cars": 1},
                     "clusters": {"q2.0": {"count": 7, "answers": ["sand"]},
                                  "q2.1": {"count": 2, "answers": ["sea", "shore"]},
                                  "q2.2": {"count": 1, "answers": ["cars", "trucks"]}}}},
    ]  # fmt: skip
    src = tmp_path / "qa.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    threads = read_protoqa(src, items="clusters")
    assert threads.meta["ambiguous_aliases"] == 1  # "shore": claimed by q1's "coast" and q2's "sea"
    threads.frame = threads.frame.with_columns(pl.lit("test").alias("split"))
    matcher = Matcher(threads.catalog, GroundingSettings(match_mode="exact"))
    ds = write_dataset(
        tmp_path / "ds",
        pool_threads(threads, matcher),
        threads.catalog,
        threads.meta,
        grounding=matcher.settings,
        answers=threads.answers,
    )
    ds = load_dataset(ds.path)
    assert ds.answers is not None and ds.answers["request_id"].to_list() == ["q1", "q2"]
    lists = [["cars", "shore"], ["shore", "cars"]]
    catalog = score_lists(ds.requests, ground_lists(lists, matcher), ks=[2], metrics=["recall"]).per_request
    per_q = score_protoqa(ds.requests["request_id"], lists, ds.answers, ks=[1, 2]).per_request
    # catalog: "cars" is q2's item, "shore" grounds to nothing: q1 0, q2 only its "cars" respondent
    assert catalog["eval/recall@2/per_responder"].to_list() == pytest.approx([0.0, 0.1])
    assert per_q["protoqa/recall@1/per_responder"].to_list() == pytest.approx([0.8, 0.2])
    assert per_q["protoqa/recall@2/per_responder"].to_list() == pytest.approx([0.9, 0.3])
    assert per_q["protoqa/recall@2/union"].to_list() == pytest.approx([2 / 3, 2 / 3])
    # the responders are the pooled ones: R_q equals the catalog view's n_rows
    assert per_q[WEIGHT].to_list() == catalog["n_rows"].to_list() == [10, 10]


def test_a_list_never_scores_another_questions_answers():
    table = answers(a=([(5, ["dog"]), (5, ["cat"])], None), b=([(9, ["car"]), (1, ["bike"])], None))
    got = score_protoqa(["a", "b"], [["car", "bike"], ["dog", "cat"]], table, ks=[2]).per_request
    assert got["protoqa/recall@2/per_responder"].to_list() == [0.0, 0.0]
    assert got["protoqa/max_answers@2"].to_list() == [0.0, 0.0]
    swapped = score_protoqa(["a", "b"], [["dog", "cat"], ["car", "bike"]], table, ks=[2]).per_request
    assert swapped["protoqa/recall@2/per_responder"].to_list() == [1.0, 1.0]


def test_positions_kept_one_credit_per_cluster_and_the_best_assignment():
    clusters = [(5, ["car", "cars"]), (3, ["x"]), (2, ["x", "y"])]
    # "Cars " is preprocessed to "cars"; "car" then repeats the cluster; an empty line keeps its rank
    assert one([" Cars ", "car", None, "bus"], clusters, 2) == pytest.approx(0.5)
    assert one([None, "car"], clusters, 1) == 0.0
    # "x" is in two clusters: alone it takes the larger, with "y" after it both are credited
    assert one(["x"], clusters, 1) == pytest.approx(0.3)
    assert one(["x", "y"], clusters, 2) == pytest.approx(0.5)
    assert one(["y", "x"], clusters, 2, "union") == pytest.approx(2 / 3)
    # Max Answers@2: oracle 5 + 3
    assert one(["x", "y", "car"], clusters, 2, "max_answers") == pytest.approx(5 / 8)


def test_responders_follow_data_prep_unclustered_answers_and_question_marks():
    """With raw answers, respondents go to the first cluster listing their text; a raw answer in no
    cluster is a group of its own; "?" is no responder (it grounds to nothing in data_prep)."""
    raw = {"car": 3, "Cars": 1, "broken socks": 2, "?": 4}
    groups = answer_groups(answers(q=([(4, ["car", "cars"])], raw)))
    assert groups.select("group", "cluster", "key", "responders").rows() == [
        (0, True, "car", 4),
        (0, True, "cars", 4),
        (1, False, "broken socks", 2),
    ]
    clusters = [(4, ["car", "cars"])]
    assert one(["broken socks"], clusters, 1, raw=raw) == pytest.approx(2 / 6)
    assert one(["broken socks"], clusters, 1, "max_answers", raw=raw) == 0.0  # the evaluator: clusters only


def test_samples_average_per_request_and_missing_answers_are_null_and_counted():
    table = answers(a=([(6, ["dog"]), (4, ["cat"])], None))
    got = score_protoqa(["a", "b"], [["dog"], ["cat"], ["dog"]], table, list_request=[0, 0, 1], ks=[1])
    assert got.per_request["protoqa/recall@1/per_responder"].to_list() == [pytest.approx(0.5), None]
    assert got.per_request["protoqa/n_lists"].to_list() == [2, 1]
    assert got.counts["n_requests_without_answers"] == 1
    block = protoqa_block(got, CI)
    assert block["per_responder"]["recall@1"]["mean"] == pytest.approx(0.5)
    assert set(block) >= {"matching", "per_responder", "union", "max_answers", "counts"}


def test_per_responder_mean_weights_requests_by_their_responders_and_pairs_runs():
    table = answers(a=([(9, ["dog"]), (1, ["cat"])], None), b=([(1, ["x"]), (1, ["y"])], None))
    one_run = score_protoqa(["a", "b"], [["dog"], ["x"]], table, ks=[1]).per_request
    other = score_protoqa(["a", "b"], [["cat"], ["q"]], table, ks=[1]).per_request
    mean = protoqa_block(
        SimpleNamespace(per_request=one_run, keys=("protoqa/recall@1/per_responder",), counts={})
    )
    assert mean["per_responder"]["recall@1"]["mean"] == pytest.approx((9 + 1) / 12)
    diff = protoqa_compare(one_run, other, ["protoqa/recall@1/per_responder", "protoqa/recall@1/union"], CI)
    assert diff["protoqa/recall@1/per_responder"]["mean"] == pytest.approx(10 / 12 - 1 / 12)
    assert diff["protoqa/recall@1/union"]["mean"] == pytest.approx(0.5 - 0.25)


def test_shipped_crowdsourced_responders_equal_the_pooled_responders(tmp_path):
    """On the 52 crowdsourced dev questions pooled with raw items, R_q is n_rows of every question (exact
    pooling would leave out respondents whose string folds to another one's item, e.g. "mac & cheese")."""
    threads = read_protoqa(protoqa_file("crowdsourced"), items="raw")
    threads.frame = threads.frame.with_columns(pl.lit("test").alias("split"))
    matcher = Matcher(threads.catalog, GroundingSettings(match_mode="normalized"))  # the demo's pooling
    pooled = pool_threads(threads, matcher)
    scored = score_lists(pooled, [[] for _ in range(pooled.height)], ks=[1], metrics=["recall"]).per_request
    per_q = score_protoqa(pooled["request_id"], [[] for _ in range(pooled.height)], threads.answers, ks=[1])
    assert per_q.per_request[WEIGHT].to_list() == scored["n_rows"].to_list()


def test_evaluate_model_writes_the_protoqa_block_and_columns(tmp_path, monkeypatch):
    import eval.run as run

    src = protoqa_file("crowdsourced")
    threads = read_protoqa(src, items="clusters")
    threads.frame = threads.frame.with_columns(pl.lit("test").alias("split"))
    matcher = Matcher(threads.catalog, GroundingSettings(match_mode="normalized"))
    pooled = pool_threads(threads, matcher)
    write_dataset(tmp_path / "ds", pooled, threads.catalog, threads.meta, grounding=GroundingSettings(),
                  answers=threads.answers)  # fmt: skip
    old = tmp_path / "old"  # a dataset prepared before answers were carried
    write_dataset(old, pooled, threads.catalog, threads.meta, grounding=GroundingSettings())
    clusters = read_protoqa_clusters(src)
    ids = pooled["request_id"].to_list()
    completions = [
        "\n".join(f"{i + 1}. {s}" for i, s in enumerate(["cars", clusters[q][0][1][0], "zzz"])) for q in ids
    ]
    fake = SimpleNamespace(greedy=completions, samples=[[c, "1. zzz"] for c in completions], engine="fake")
    monkeypatch.setattr(run, "generate_lists", lambda *a, **k: fake)
    model = tmp_path / "model"
    model.mkdir()
    gen = run.GenerationConfig(k=3, num_samples=2)
    result = run.evaluate_model(
        model, tmp_path / "ds", tmp_path / "out", ks=[1, 3], generation=gen, config=CI
    )
    block = result["protoqa"]
    assert block["n_requests"] == 52 and block["counts"]["n_requests_without_answers"] == 0
    # the evaluator on the run's predictions.jsonl (its parsed lines: "sports." is written "sports")
    preds = [json.loads(x) for x in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
    want = np.mean([max_answers_at_k(p["recommendations"], clusters[p["request_id"]], 3) for p in preds])
    assert block["max_answers"]["max_answers@3"]["mean"] == pytest.approx(want)
    assert result["sampled"]["protoqa"]["max_answers"]["max_answers@3"]["mean"] == pytest.approx(want / 2)
    table = pl.read_parquet(tmp_path / "out" / "per_request.parquet")
    assert {
        "protoqa/recall@3/per_responder",
        "protoqa/recall@3/union",
        "protoqa/max_answers@3",
        WEIGHT,
    } <= set(table.columns)
    assert "eval/recall@3/per_responder" in table.columns  # the catalog figure stays as it was
    assert (
        "protoqa/max_answers@1" in pl.read_parquet(tmp_path / "out" / "per_request_sampled.parquet").columns
    )
    assert "Matched per question" in (tmp_path / "out" / "report.md").read_text()
    # an older dataset: no block, no columns, the rest as before
    result = run.evaluate_model(model, old, tmp_path / "out_old", ks=[1, 3], generation=gen, config=CI)
    assert "protoqa" not in result
    assert not any(
        c.startswith("protoqa/")
        for c in pl.read_parquet(tmp_path / "out_old" / "per_request.parquet").columns
    )
