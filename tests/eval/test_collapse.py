"""List collapse and popularity (``eval.collapse``): every metric by hand on small cases (K = 3), the
properties that always hold, the warning rule, docs/metrics.md's table, and the ``eval score``, ``eval
compare`` outputs on the tiny dataset."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from eval.collapse import (
    COLLAPSE_METRICS,
    COLLAPSE_REGISTRY,
    collapse_report,
    collapse_table_markdown,
    collapse_warning,
    compare_lines,
    distinct_tuples,
    train_counts_from_requests,
)
from remark.cli.main import main

REPO = Path(__file__).resolve().parents[2]
CI = ["--ci-method", "percentile", "--resamples", "50"]
#: p_a = 0.6, p_b = 0.2, p_d = 0.2; sum p^2 = 0.44; the H = 3 most named: a, then b and d (tie, by id)
TRAIN = {"a": 6, "b": 2, "d": 2}


def test_a_constant_list_model_by_hand():
    lists = [["a", "b", "c"]] * 4
    targets = [["a"], ["c", "e"], [], ["b", "a"]]
    r = collapse_report(lists, k=3, n_items=10, train_counts=TRAIN, targets=targets)
    assert r["coverage"] == pytest.approx(3 / 10)
    assert r["distinct_per_list"] == 1.0 and r["repeat_share"] == 0.0
    assert r["same_list_share"] == 1.0
    # counts a, b, c = 4 each, 7 items at 0: ranks 8, 9, 10 of N = 10: (5 + 7 + 9) * 4 / (10 * 12)
    assert r["gini"] == pytest.approx(84 / 120)
    assert r["entropy"] == pytest.approx(math.log(3))
    assert r["avg_popularity"] == pytest.approx((0.6 + 0.2 + 0.0) / 3)
    assert r["popularity_lift"] == pytest.approx((0.8 / 3) / 0.44, abs=1e-6)
    assert r["train_mean_share"] == pytest.approx(0.44)
    # hits: a (r0), c (r1), a and b (r3); head {a, b, d}: a, a, b
    assert (r["n_hits"], r["head_size"]) == (4, 3)
    assert r["head_hit_share"] == pytest.approx(3 / 4)
    assert r["n_distinct_items"] == 3 and r["max_coverage"] == 1.0
    assert r["warning"] is not None and "same_list_share" in r["warning"]
    assert "no more than one list of K = 3" in r["warning"]  # rule (c): 3 items, min(10, 12) >= 9


def test_repeats_ungrounded_slots_and_an_empty_list_by_hand():
    lists = [["a", "a", "b", "c"], [None, "c", "c", "c"], [], ["d", None, "e", "d"]]
    r = collapse_report(lists, k=3, n_items=5)
    # windows: (a, a, b), (c, c, c), (), (d, e, d); c beyond the first window is not read
    assert (r["n_slots"], r["n_ungrounded_slots"], r["n_window_slots"], r["n_slots_beyond_k"]) == (
        12,
        2,
        9,
        1,
    )
    assert r["distinct_per_list"] == pytest.approx((2 + 1 + 0 + 2) / 4 / 3)
    assert r["repeat_share"] == pytest.approx((1 / 3 + 2 / 3 + 1 / 3) / 3)  # the empty list left out
    assert r["coverage"] == 1.0
    assert r["same_list_share"] == pytest.approx(1 / 4)
    # counts a2 b1 c3 d2 e1, sorted 1 1 2 2 3, ranks 1..5: (-4 - 2 + 0 + 4 + 12) / (5 * 9)
    assert r["gini"] == pytest.approx(10 / 45)
    q = np.array([2, 1, 3, 2, 1]) / 9
    assert r["entropy"] == pytest.approx(-(q * np.log(q)).sum())
    assert r["avg_popularity"] is None and r["popularity_lift"] is None and r["head_hit_share"] is None
    assert r["warning"] is None


def test_empty_and_ungrounded_lists_have_no_item_figures():
    r = collapse_report([[], [None, None]], k=3, n_items=5, train_counts=TRAIN, targets=[["a"], ["b"]])
    assert (r["coverage"], r["distinct_per_list"], r["same_list_share"]) == (0.0, 0.0, 0.0)
    assert r["repeat_share"] is None and r["gini"] is None and r["entropy"] is None
    assert r["avg_popularity"] is None and r["head_hit_share"] is None and r["n_hits"] == 0
    assert r["n_ungrounded_slots"] == 2 and r["warning"] is None
    none = collapse_report([], k=3, n_items=5)
    assert none["n_lists"] == 0 and none["distinct_per_list"] is None and none["warning"] is None


def test_sampled_lists_are_scored_against_their_requests_targets():
    # two requests, two samples each; the second sample of request 0 equals request 1's lists
    lists = [["a", "b", "c"], ["d", "e", "f"], ["d", "e", "f"], ["d", "e", "f"]]
    r = collapse_report(
        lists, k=3, n_items=20, train_counts=TRAIN, targets=[["a", "d"], ["f"]], list_request=[0, 0, 1, 1]
    )
    assert r["n_lists"] == 4 and r["n_requests"] == 2
    assert r["same_list_share"] == pytest.approx(3 / 4)  # over all lists
    # hits: a (list 0), d (list 1), f (lists 2, 3); head {a, b, d}: a, d
    assert r["n_hits"] == 4 and r["head_hit_share"] == pytest.approx(2 / 4)
    with pytest.raises(ValueError, match="list_request"):
        collapse_report(lists, k=3, n_items=20, targets=[["a"], ["f"]], list_request=[0, 1])


def test_distinct_tuples_keep_first_occurrences_in_order():
    ids = np.array([[2, 2, 0], [0, 2, 2], [-1, -1, -1]])
    np.testing.assert_array_equal(distinct_tuples(ids), [[2, 0, -1], [0, 2, -1], [-1, -1, -1]])


def test_properties_on_random_lists():
    rng = np.random.default_rng(0)
    items = [f"i{j:02d}" for j in range(12)]
    train = {f"i{j:02d}": int(rng.integers(0, 5)) for j in range(12)}
    for _ in range(50):
        lists = [
            [None if rng.random() < 0.2 else items[int(rng.integers(12))] for _ in range(rng.integers(0, 6))]
            for _ in range(int(rng.integers(1, 6)))
        ]
        r = collapse_report(lists, k=3, n_items=12, train_counts=train, targets=[items[:4]] * len(lists))
        assert 0.0 <= r["coverage"] <= r["max_coverage"] <= 1.0
        assert 0.0 <= r["distinct_per_list"] <= 1.0 and 0.0 <= r["same_list_share"] <= 1.0
        if r["gini"] is not None:
            assert 0.0 <= r["gini"] <= 11 / 12 + 1e-9
            assert 0.0 <= r["entropy"] <= math.log(min(12, r["n_window_slots"])) + 1e-9
            assert 0.0 <= r["repeat_share"] <= 2 / 3 + 1e-9
            assert 0.0 <= r["avg_popularity"] <= 1.0
        assert r["head_hit_share"] is None or 0.0 <= r["head_hit_share"] <= 1.0


def test_gini_is_zero_for_uniform_counts_and_maximal_for_one_item():
    uniform = collapse_report([["a", "b"], ["c", "d"]], k=3, n_items=4)
    assert uniform["gini"] == 0.0 and uniform["entropy"] == pytest.approx(math.log(4))
    one = collapse_report([["a", "a"], ["a"]], k=3, n_items=5)
    assert one["gini"] == pytest.approx(4 / 5) and one["entropy"] == 0.0
    with pytest.raises(ValueError, match="more than n_items"):
        collapse_report([["a", "b", "c"]], k=3, n_items=2)


@pytest.mark.parametrize(
    ("lists", "n_items", "reason"),
    [
        ([["a", "a", "a"], ["b", "b", "b"], ["c", "c", "c"], ["d", "d", "d"]], 10, "repeat_share"),
        ([["a", "b", "c"], ["a", "b", "c"], ["d", "e", "f"], ["g", "h", "i"]], 20, "same_list_share"),
        ([["a", "b"], ["b", "a"], ["a", "c"], ["c", "b"], ["b", "c"]], 10, "3 distinct items in all"),
    ],
)
def test_each_rule_of_the_warning_fires_alone(lists, n_items, reason):
    r = collapse_report(lists, k=3, n_items=n_items)
    assert r["warning"] is not None and reason in r["warning"] and r["warning"].count("; ") == 0


def test_a_diverse_model_a_single_list_short_lists_and_a_small_catalog_do_not_warn():
    diverse = [["a", "b", "c"], ["d", "e", "f"], ["g", "h", "i"], ["j", "a", "e"]]
    assert collapse_report(diverse, k=3, n_items=20, train_counts=TRAIN)["warning"] is None
    assert collapse_report([["a", "b", "c"]], k=3, n_items=20)["warning"] is None  # one list
    short = [["a"], ["b"], ["c"], ["d"]]  # 1 distinct item per list of K = 20: short, not collapsed
    assert collapse_report(short, k=20, n_items=100)["warning"] is None
    # 8 items cannot hold three lists of K = 20: rule (c) needs min(N, S) >= 3 K
    small = [["a", "b"], ["c", "d"], ["a", "e"]]
    assert collapse_report(small, k=20, n_items=8)["warning"] is None
    assert collapse_warning({"k": 3, "n_lists": 0, "n_distinct_items": 0}) is None


def test_the_registry_and_the_report_agree_and_are_json():
    assert len(set(COLLAPSE_METRICS)) == len(COLLAPSE_REGISTRY)
    for m in COLLAPSE_REGISTRY:
        doc = m.function.__doc__ or ""
        assert "->" in doc and ("(L, K)" in doc or "(V,)" in doc), m.name  # formula and shapes
        assert m.formula and m.note
    r = collapse_report([["a", "b"], ["a", None]], k=3, n_items=4, train_counts={"a": 1}, targets=[["a"], []])
    assert list(r)[-len(COLLAPSE_METRICS) - 1 : -1] == list(COLLAPSE_METRICS)
    assert json.loads(json.dumps(r, allow_nan=False)) == r


def test_inputs_may_be_polars_series_and_counts_come_from_the_train_split():
    requests = pl.DataFrame(
        {
            "split": ["train", "train", "test"],
            "union": [["a", "b"], ["a"], ["c"]],
            "counts": [[2, 1], [3], [9]],
        }
    )
    assert train_counts_from_requests(requests) == {"a": 5, "b": 1}
    lists = pl.Series([["a", "b"], ["b", None]], dtype=pl.List(pl.String))
    r = collapse_report(lists, k=2, n_items=3, train_counts=train_counts_from_requests(requests))
    assert r["avg_popularity"] == pytest.approx((5 / 6 + 1 / 6 + 1 / 6) / 3)
    assert r["popularity_lift"] == pytest.approx((7 / 18) / (25 / 36 + 1 / 36), abs=1e-6)


def test_docs_metrics_md_holds_the_registrys_table():
    text = (REPO / "docs" / "metrics.md").read_text()
    block = re.search(r"<!-- collapse:start[^>]*-->\n(.*?)\n<!-- collapse:end -->", text, re.S)
    assert block is not None, "docs/metrics.md lost its collapse:start / collapse:end markers"
    assert block.group(1) == collapse_table_markdown()


def test_compare_lines_put_the_sides_next_to_each_other():
    a = collapse_report([["a", "b", "c"]] * 3, k=3, n_items=20)
    b = collapse_report([["a", "b", "c"], ["d", "e", "f"], ["g", "h", "i"]], k=3, n_items=20)
    lines = compare_lines({"A": a, "B": b, "C": None})
    assert "| same_list_share | 1.0000 | 0.3333 | - |" in lines
    assert [x for x in lines if x.startswith("warning:")] == [f"warning: A: {a['warning']}"]
    assert any(x.startswith("C: no collapse figures") for x in lines)


# -- the command line, on the tiny dataset (tests/eval/conftest.py) ------------------------------------
PREDS = [
    {"request_id": "r1", "recommendations": ["Contact (1997)", "Arrival (2016)", "Moon (2009)"]},
    {"request_id": "r2", "recommendations": ["Inception (2010)"]},
    {"request_id": "r3", "recommendations": []},
    {"request_id": "r4", "recommendations": ["1. Interstellar (2014)", "- Arrival (2016)"]},
]
SAME = ["Arrival (2016)", "Moon (2009)", "Inception (2010)"]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_score_records_the_collapse_block_and_warns(tiny_dataset, tmp_path, capsys):
    preds = _write(tmp_path / "p.jsonl", PREDS)
    base = ["eval", "score", "--data", str(tiny_dataset), "--metrics", "recall", *CI]
    argv = [*base, "--k", "1", "2", "--predictions", str(preds)]
    assert main([*argv, "--json", "--out", str(tmp_path / "a")]) == 0
    captured = capsys.readouterr()
    c = json.loads(captured.out)["collapse"]
    # windows (K = 2): (Contact, Arrival), (Inception), (), (Interstellar, Arrival); train: Moon named once
    assert (c["k"], c["n_items"], c["n_lists"], c["n_distinct_items"]) == (2, 8, 4, 4)
    assert c["coverage"] == 0.5 and c["distinct_per_list"] == pytest.approx(5 / 8)
    assert c["same_list_share"] == 0.25 and c["n_slots_beyond_k"] == 1
    assert c["avg_popularity"] == 0.0 and c["popularity_lift"] == 0.0
    assert c["n_hits"] == 4 and c["head_size"] == 1 and c["head_hit_share"] == 0.0
    assert c["popularity_source"] == "training responders of split 'train' (1 requests, 1 mentions)"
    assert c["warning"] is None and "collapse" not in captured.err
    assert json.loads((tmp_path / "a" / "metrics.json").read_text())["collapse"] == c
    assert "| same_list_share | 0.2500 |" in (tmp_path / "a" / "report.md").read_text()

    same = _write(
        tmp_path / "same.jsonl", [{"request_id": f"r{i}", "recommendations": SAME} for i in range(1, 5)]
    )
    argv = [*base, "--k", "1", "3", "--predictions", str(same)]
    assert main([*argv, "--json", "--out", str(tmp_path / "b")]) == 0
    captured = capsys.readouterr()
    c = json.loads(captured.out)["collapse"]
    assert c["same_list_share"] == 1.0 and c["avg_popularity"] == pytest.approx(1 / 3)
    assert c["popularity_lift"] == pytest.approx(1 / 3)  # Moon is every training mention: sum p^2 = 1
    assert captured.err.startswith(
        "warning: the lists collapse: 100% of the 4 lists are one and the same list"
    )
    assert main(argv) == 0  # markdown: the warning on stdout, after the figures
    out = capsys.readouterr().out
    assert "List collapse (eval.collapse" in out and f"warning: {c['warning']}" in out

    # compare: both sides' figures side by side, a warning for the collapsed side
    cmp = [
        "eval",
        "compare",
        str(tmp_path / "a"),
        str(tmp_path / "b"),
        "--k",
        "1",
        "--metrics",
        "recall",
        *CI,
    ]
    assert main([*cmp, "--json"]) == 0
    captured = capsys.readouterr()
    got = json.loads(captured.out)["collapse"]
    assert got["a"]["same_list_share"] == 0.25 and got["b"]["same_list_share"] == 1.0
    assert "warning: B (b): the lists collapse" in captured.err and "A (a): the lists" not in captured.err
    assert main(cmp) == 0
    out = capsys.readouterr().out
    assert "| same_list_share | 0.2500 | 1.0000 |" in out and "warning: B (b): the lists collapse" in out
