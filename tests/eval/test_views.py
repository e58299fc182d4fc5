"""eval.views: per-responder / union / single-mention scoring of id lists against pooled requests."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from eval.metrics import FILTERS
from eval.views import key_views, metric_key, score_lists, split_key, weighted_means, weights_for


def pooled(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={
            "request_id": pl.String,
            "seen": pl.List(pl.String),
            "responders": pl.List(pl.List(pl.String)),
            "union": pl.List(pl.String),
            "counts": pl.List(pl.UInt32),
        },
    )


REQ = pooled(
    [
        # x named by two responders, y and z by one each; s already seen
        {
            "request_id": "a",
            "seen": ["s"],
            "responders": [["x", "y"], ["x", "z"]],
            "union": ["x", "y", "z"],
            "counts": [2, 1, 1],
        },
        # second responder's only mention did not ground: no items, excluded from the per-responder view
        {"request_id": "b", "seen": [], "responders": [["p"], []], "union": ["p"], "counts": [1]},
        # every item named by both responders: no single-mention items
        {"request_id": "c", "seen": [], "responders": [["q"], ["q"]], "union": ["q"], "counts": [2]},
    ]
)


def test_hand_computed_views_with_compaction():
    lists = [["s", "z", None, "z", "x"], ["p"], ["w", "q"]]
    got = score_lists(REQ, lists, ks=[1, 2], metrics=["recall", "ndcg"])
    pr = got.per_request
    # a compacted: [z, x]. Responder 1 {x,y}: r@1 0, r@2 1/2; responder 2 {x,z}: r@1 1/2, r@2 1.
    assert pr["eval/recall@1/per_responder"].to_list() == pytest.approx([0.25, 1.0, 0.0])
    assert pr["eval/recall@2/per_responder"].to_list() == pytest.approx([0.75, 1.0, 1.0])
    assert pr["n_rows"].to_list() == [2, 1, 2]
    # union a: {x,y,z}: r@2 = 2/3; NDCG@2 a: hits at 1 and 2 over IDCG of 2 -> 1
    assert pr["eval/recall@2/union"].to_list() == pytest.approx([2 / 3, 1.0, 1.0])
    assert pr["eval/ndcg@2/union"].to_list() == pytest.approx([1.0, 1.0, (1 / math.log2(3)) / 1.0])
    # single-mention a: {y, z}; b: {p}; c excluded (null)
    assert pr["eval/recall@2/single_mention"].to_list() == pytest.approx([0.5, 1.0, None])
    means = got.means()
    # per-responder: ratio of sums over rows, (0.75*2 + 1*1 + 1*2) / 5
    assert means["eval/recall@2/per_responder"] == pytest.approx(4.5 / 5)
    assert means["eval/recall@2/union"] == pytest.approx((2 / 3 + 1 + 1) / 3)
    assert means["eval/recall@2/single_mention"] == pytest.approx(0.75)
    c = got.counts
    assert c["per_responder/n_excluded_rows"] == 1 and c["per_responder/n_rows"] == 5
    assert c["single_mention/n_excluded_requests"] == 1 and c["union/n_excluded_requests"] == 0
    assert (c["n_ungrounded_slots"], c["n_seen_slots"], c["n_repeat_slots"]) == (1, 1, 1)
    assert pr["list/distinct"].to_list() == [3.0, 1.0, 2.0]
    assert pr["list/eligible"].to_list() == [2.0, 1.0, 2.0]


def test_without_compaction_positions_are_kept():
    got = score_lists(
        REQ, [["s", "z", None, "z", "x"], ["p"], ["w", "q"]], ks=[2, 5], metrics=["recall"], compact=False
    )
    pr = got.per_request
    # a: slots [-, z, -, -, x]: union r@2 = 1/3, r@5 = 2/3
    assert pr["eval/recall@2/union"][0] == pytest.approx(1 / 3)
    assert pr["eval/recall@5/union"][0] == pytest.approx(2 / 3)
    assert got.settings["compact"] is False


A_LIST = [["s", "z", None, "z", "x"], ["p"], ["w", "q"]]
# Request a's counted slots by hand (s seen, None ungrounded, second z a repeat), per filter:
#   drop_ooc_seen [z, x]; drop_ooc [-, z, -, x]; drop_seen [z, -, x]; drop_none [-, z, -, -, x]
# Responder 1 {x, y} first hits x; responder 2 {x, z} first hits z; the union {x, y, z} first hits z.
A_BY_HAND = {
    # filter: (rank of x, rank of z)
    "drop_ooc_seen": (2, 1),
    "drop_ooc": (4, 2),
    "drop_seen": (3, 1),
    "drop_none": (5, 2),
}


def rr_k(rank: int, k: int) -> float:
    """Reciprocal rank within the top k (0 outside)."""
    return 1 / rank if rank <= k else 0.0


@pytest.mark.parametrize("name", list(FILTERS))
def test_four_filter_variants_mrr_and_hit_by_hand(name):
    ks = [1, 2, 3, 4, 5]
    got = score_lists(REQ, A_LIST, ks=ks, metrics=["hit", "mrr", "recall"], filters=list(FILTERS))
    row = got.per_request.row(0, named=True)
    x, z = A_BY_HAND[name]
    for k in ks:
        key = f"@{k}/per_responder/{name}"
        assert row["eval/mrr" + key] == pytest.approx((rr_k(x, k) + rr_k(z, k)) / 2), k
        assert row["eval/hit" + key] == pytest.approx(((x <= k) + (z <= k)) / 2), k
        assert row[f"eval/mrr@{k}/union/{name}"] == pytest.approx(rr_k(z, k)), k
        assert row[f"eval/hit@{k}/union/{name}"] == float(z <= k), k
        assert row[f"eval/recall@{k}/union/{name}"] == pytest.approx(((x <= k) + (z <= k)) / 3), k
        # single-mention a: {y, z}: only z can hit
        assert row[f"eval/mrr@{k}/single_mention/{name}"] == pytest.approx(rr_k(z, k)), k
    # requests b and c: b's p at rank 1, c's q at rank 2 (w is a catalog item nobody named) in every variant
    assert got.per_request[f"eval/mrr@1/per_responder/{name}"].to_list()[1:] == [1.0, 0.0]
    assert got.per_request[f"eval/mrr@2/per_responder/{name}"].to_list()[1:] == [1.0, 0.5]
    # overall per-responder MRR@2 weighs requests by rows (2, 1, 2)
    mrr2_a = (rr_k(x, 2) + rr_k(z, 2)) / 2
    assert got.means()[f"eval/mrr@2/per_responder/{name}"] == pytest.approx((2 * mrr2_a + 1 + 2 * 0.5) / 5)


def test_plain_keys_are_the_primary_filter_and_variants_come_after():
    lists = A_LIST
    both = score_lists(
        REQ, lists, ks=[2, 5], metrics=["recall", "mrr"], filters=["drop_none", "drop_ooc_seen"]
    )
    pr = both.per_request
    for m in ("eval/recall@2", "eval/mrr@5"):
        for v in ("per_responder", "union", "single_mention"):
            assert pr[f"{m}/{v}"].to_list() == pr[f"{m}/{v}/drop_ooc_seen"].to_list()
    off = score_lists(REQ, lists, ks=[2, 5], metrics=["recall", "mrr"], compact=False).per_request
    assert off["eval/mrr@5/per_responder"].to_list() == pr["eval/mrr@5/per_responder/drop_none"].to_list()
    assert key_views(both.keys) == [
        "per_responder",
        "union",
        "single_mention",
        "per_responder/drop_none",
        "union/drop_none",
        "single_mention/drop_none",
        "per_responder/drop_ooc_seen",
        "union/drop_ooc_seen",
        "single_mention/drop_ooc_seen",
    ]
    assert both.settings["filter"] == "drop_ooc_seen" and both.settings["filters"] == [
        "drop_none",
        "drop_ooc_seen",
    ]
    # a variant key has its view's weights, and the means agree with weighted_means
    assert weights_for(pr, "eval/mrr@5/per_responder/drop_none").tolist() == [2.0, 1.0, 2.0]
    assert weighted_means(pr, both.keys) == both.means()
    with pytest.raises(ValueError, match="valid: drop_ooc_seen, drop_ooc, drop_seen, drop_none"):
        score_lists(REQ, lists, filters=["compact"])


def test_sampled_lists_are_averaged_per_request_with_responders_as_weight():
    lists = [["x"], ["y"], ["p"], ["q"]]  # two samples for a, one each for b and c
    got = score_lists(REQ, lists, list_request=[0, 0, 1, 2], ks=[1], metrics=["recall"])
    pr = got.per_request
    # a: sample x -> responders 1/2 and 1/2; sample y -> 1/2 and 0: mean 3/8
    assert pr["eval/recall@1/per_responder"].to_list() == pytest.approx([3 / 8, 1.0, 1.0])
    assert pr["n_lists"].to_list() == [2, 1, 1]
    assert pr["n_rows"].to_list() == [2, 1, 2]  # responders, not responders x samples
    assert pr["eval/recall@1/union"][0] == pytest.approx(1 / 3)


def test_request_without_list_or_misaligned_input_is_an_error():
    with pytest.raises(ValueError, match="have no list"):
        score_lists(REQ, [["x"], ["p"]], list_request=[0, 1])
    with pytest.raises(ValueError, match="one entry per list"):
        score_lists(REQ, [["x"], ["p"]])
    with pytest.raises(ValueError, match="lacks column"):
        score_lists(REQ.drop("counts"), [["x"], ["p"], ["q"]])
    with pytest.raises(ValueError, match="valid: per_responder, union, single_mention"):
        score_lists(REQ, [["x"], ["p"], ["q"]], views=["micro"])


def test_keys_and_weights():
    assert split_key(metric_key("ndcg@5", "per_responder")) == ("ndcg@5", "per_responder")
    assert metric_key("mrr@10", "union", "drop_ooc") == "eval/mrr@10/union/drop_ooc"
    assert split_key("eval/mrr@10/union/drop_ooc") == ("mrr@10", "union/drop_ooc")
    for bad in (
        "train/loss",
        "eval/recall@5/union/compact",
        "eval/recall@5/micro",
        "eval/recall@5/union/x/y",
    ):
        with pytest.raises(ValueError, match="eval/<metric>@<k>/<view>"):
            split_key(bad)
    got = score_lists(REQ, [["x"], ["p"], ["q"]], ks=[1], metrics=["recall"])
    assert weights_for(got.per_request, "eval/recall@1/single_mention").tolist() == [1.0, 1.0, 0.0]
    assert weights_for(got.per_request, "eval/recall@1/per_responder").tolist() == [2.0, 1.0, 2.0]
    assert weighted_means(got.per_request, got.keys) == got.means()


def _slow_reference(requests: pl.DataFrame, lists, k: int):
    """Literal per-row loops: mean recall@k per responder row and per request on the union."""
    rows, unions = [], []
    for req, lst in zip(requests.iter_rows(named=True), lists):
        seen, used, top = set(req["seen"]), set(), []
        for x in lst:
            if x is not None and x not in seen and x not in used:
                top.append(x)
            if x is not None:
                used.add(x)
        top = set(top[:k])
        rows += [len(top & set(r)) / len(set(r)) for r in req["responders"] if r]
        unions.append(len(top & set(req["union"])) / len(req["union"]))
    return float(np.mean(rows)), float(np.mean(unions))


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_slow_reference_on_random_requests(seed):
    rng = np.random.default_rng(seed)
    items = [f"m{i}" for i in range(30)]
    rows, lists = [], []
    for r in range(60):
        responders = [
            list(rng.choice(items, rng.integers(1, 5), replace=False)) for _ in range(rng.integers(1, 6))
        ]
        union = sorted({x for resp in responders for x in resp})
        counts = [sum(x in resp for resp in responders) for x in union]
        seen = list(rng.choice(items, 2, replace=False))
        rows.append(
            {"request_id": f"r{r}", "seen": seen, "responders": responders, "union": union, "counts": counts}
        )
        lists.append([None if u < 0.1 else str(x) for x, u in zip(rng.choice(items, 12), rng.random(12))])
    req = pooled(rows)
    got = score_lists(req, lists, ks=[5], metrics=["recall"]).means()
    per_resp, union = _slow_reference(req, lists, 5)
    assert got["eval/recall@5/per_responder"] == pytest.approx(per_resp)
    assert got["eval/recall@5/union"] == pytest.approx(union)


def test_request_with_nothing_grounded_is_excluded_and_counted():
    req = pooled(
        [
            {"request_id": "a", "seen": [], "responders": [["x"]], "union": ["x"], "counts": [1]},
            # data_prep leaves union null when no mention grounded; responders then hold no items
            {"request_id": "z", "seen": [], "responders": [[]], "union": None, "counts": None},
        ]
    )
    got = score_lists(req, [["x"], ["x"]], ks=[1], metrics=["recall"])
    assert got.per_request["eval/recall@1/union"].to_list() == [1.0, None]
    assert got.per_request["n_rows"].to_list() == [1, 0]
    assert (
        got.counts["union/n_excluded_requests"] == 1 and got.counts["per_responder/n_excluded_requests"] == 1
    )
    assert got.means()["eval/recall@1/per_responder"] == 1.0


def test_per_row_table_holds_each_responder_row_by_hand():
    lists = [["s", "z", None, "z", "x"], ["p"], ["w", "q"]]
    got = score_lists(REQ, lists, ks=[1, 2], metrics=["recall", "mrr"], filters=["drop_none"])
    rows = got.per_row
    assert rows["request_id"].to_list() == ["a", "a", "b", "b", "c", "c"]
    assert rows["responder_index"].to_list() == [0, 1, 0, 1, 0, 1]
    assert rows["n_targets"].to_list() == [2, 2, 1, 0, 1, 1] and rows["n_lists"].to_list() == [1] * 6
    # a compacted [z, x]: {x,y} misses at 1, x at 2; {x,z} z at 1. b: {p} at 1, the second responder
    # has no grounded item (null). c [w, q]: q at 2 for both.
    assert rows["eval/recall@1/per_responder"].to_list() == [0.0, 0.5, 1.0, None, 0.0, 0.0]
    assert rows["eval/recall@2/per_responder"].to_list() == [0.5, 1.0, 1.0, None, 1.0, 1.0]
    assert rows["eval/mrr@2/per_responder"].to_list() == [0.5, 1.0, 1.0, None, 0.5, 0.5]
    # drop_none keeps [s, z, -, z, x]: z at rank 2 for {x,z}, nothing in the top 2 for {x,y}
    assert rows["eval/recall@2/per_responder/drop_none"].to_list() == [0.0, 0.5, 1.0, None, 1.0, 1.0]
    assert not any("union" in c or "single_mention" in c for c in rows.columns)
    # the mean over rows (nulls left out) is the view's value, for every per-responder key
    means = got.means()
    keys = [k for k in got.keys if "/per_responder" in k]
    assert len(keys) == 8 and set(keys) <= set(rows.columns)
    for key in keys:
        assert rows[key].mean() == pytest.approx(means[key]), key
    assert score_lists(REQ, lists, ks=[1], metrics=["recall"], views=["union"]).per_row is None


def test_per_row_table_of_sampled_lists_averages_each_responder_over_samples():
    lists = [["x"], ["y"], ["p"], ["q"]]  # two samples for a, one each for b and c
    got = score_lists(REQ, lists, list_request=[0, 0, 1, 2], ks=[1], metrics=["recall"])
    rows = got.per_row
    # a's {x,y}: 1/2 and 1/2; {x,z}: 1/2 and 0
    assert rows["eval/recall@1/per_responder"].to_list() == [0.5, 0.25, 1.0, None, 1.0, 1.0]
    assert rows["n_lists"].to_list() == [2, 2, 1, 1, 1, 1]
    assert rows["eval/recall@1/per_responder"].mean() == pytest.approx(
        got.means()["eval/recall@1/per_responder"]
    )
