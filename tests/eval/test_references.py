"""Our views against literal re-statements of the reference evaluators (docs/metrics.md, "How this
compares with the references"): Rank-GRPO's per-(request, responder) rows, He et al.'s (CIKM'23) and
CRSLab's one-item rows under the four filters, and the documented departures (repeats, short lists)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from eval.metrics import FILTERS
from eval.views import score_lists, weighted_means
from tests.eval.test_views import REQ, pooled

# The filter names against He et al.'s (filtered, exclude_seen) settings.
HE_SETTINGS = {
    "drop_ooc_seen": (True, True),
    "drop_ooc": (True, False),
    "drop_seen": (False, True),
    "drop_none": (False, False),
}


def he_et_al_rows(pred, prev, gt_list, k, filtered, exclude_seen):
    """One request-responder sample in the way of He et al.'s evaluate(): the predictions filtered (out of
    catalog = None here), then each ground-truth item is its own row scored against the same list."""
    if filtered:
        pred = [p for p in pred if p is not None]
    if exclude_seen:
        pred = [p for p in pred if p not in prev]
    top = pred[:k]
    rows = []
    for gt in gt_list:
        rank = top.index(gt) + 1 if gt in top else None
        rows.append(
            {
                "recall": float(rank is not None),
                "ndcg": 1 / math.log2(rank + 1) if rank else 0.0,
                "mrr": 1 / rank if rank else 0.0,
            }
        )
    return rows


def rank_grpo_row(pred, seen, gt, k):
    """Rank-GRPO's evaluate_direct_match / recall_at_k / ndcg_at_k on one (request, responder) row."""
    recs = [p for p in pred if p not in seen]  # remove_seen
    recs = [p for p in recs if p is not None]  # remove_gt_catalog
    hits = [0] * len(recs)
    for g in gt:  # each ground-truth item marks its first match
        for i, r in enumerate(recs):
            if r == g:
                hits[i] = 1
                break
    if not hits:
        return 0.0, 0.0

    def dcg(h):
        kk = min(k, len(h))
        return h[0] + sum(h[i] / math.log2(i + 2) for i in range(1, kk))

    ideal = [1 if i < len(gt) else 0 for i in range(len(hits))]
    return sum(hits[:k]) / len(gt), dcg(hits) / dcg(ideal)


def random_requests(seed, *, repeats: bool):
    rng = np.random.default_rng(seed)
    items = [f"m{i}" for i in range(25)]
    rows, lists = [], []
    for r in range(40):
        seen = list(rng.choice(items, 2, replace=False))
        pool = [x for x in items if x not in seen]
        responders = [
            list(rng.choice(pool, rng.integers(1, 5), replace=False)) for _ in range(rng.integers(1, 5))
        ]
        union = list(dict.fromkeys(x for resp in responders for x in resp))
        counts = [sum(x in resp for resp in responders) for x in union]
        rows.append(
            {"request_id": f"r{r}", "seen": seen, "responders": responders, "union": union, "counts": counts}
        )
        drawn = rng.choice(items, 14, replace=repeats)
        lists.append([None if u < 0.15 else str(x) for x, u in zip(drawn, rng.random(14))])
    return pooled(rows), lists


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", list(FILTERS))
def test_per_mention_equals_he_et_al_rows_under_each_filter(seed, name):
    req, lists = random_requests(seed, repeats=False)
    ks = [1, 5, 10, 20]
    got = score_lists(
        req, lists, ks=ks, metrics=["recall", "hit", "ndcg", "mrr"], views=["per_mention"], filters=[name]
    )
    means = weighted_means(got.per_request, got.keys)
    filtered, exclude_seen = HE_SETTINGS[name]
    for k in ks:
        rows = [
            row
            for r, lst in zip(req.iter_rows(named=True), lists)
            for resp in r["responders"]
            for row in he_et_al_rows(lst, set(r["seen"]), resp, k, filtered, exclude_seen)
        ]
        for metric in ("recall", "ndcg", "mrr"):
            want = float(np.mean([row[metric] for row in rows]))
            assert means[f"eval/{metric}@{k}/per_mention/{name}"] == pytest.approx(want), (metric, k)
        # one target per row: hit = recall
        assert means[f"eval/hit@{k}/per_mention/{name}"] == pytest.approx(
            means[f"eval/recall@{k}/per_mention/{name}"]
        )
    assert got.counts["per_mention/n_rows"] == sum(len(x) for r in req["responders"].to_list() for x in r)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_responder_equals_rank_grpo_rows_where_the_definitions_meet(seed):
    req, lists = random_requests(seed, repeats=False)
    ks = [5, 10, 20]
    got = score_lists(req, lists, ks=ks, metrics=["recall", "ndcg"], views=["per_responder"])
    means = weighted_means(got.per_request, got.keys)
    for k in ks:
        rows = [
            rank_grpo_row(lst, set(r["seen"]), resp, k)
            for r, lst in zip(req.iter_rows(named=True), lists)
            for resp in r["responders"]
        ]
        assert means[f"eval/recall@{k}/per_responder"] == pytest.approx(float(np.mean([x[0] for x in rows])))


@pytest.mark.parametrize("seed", [0, 1])
def test_ndcg_equals_rank_grpo_unless_the_filtered_list_is_shorter_than_min_t_k(seed):
    """One responder per request, so each request's value is its row's. Rank-GRPO's ideal DCG uses the
    filtered list's length; ours uses min(|T|, k) slots: equal when the list is long enough, lower when not."""
    req, lists = random_requests(seed, repeats=False)
    req = req.with_columns(pl.col("responders").list.head(1)).with_columns(
        pl.col("responders").list.first().alias("union"),
        pl.col("responders").list.first().list.eval(pl.lit(1, pl.UInt32)).alias("counts"),
    )
    k = 10
    ours = score_lists(req, lists, ks=[k], metrics=["ndcg"], views=["per_responder"]).per_request
    n_short = 0
    for r, lst, mine in zip(req.iter_rows(named=True), lists, ours[f"eval/ndcg@{k}/per_responder"]):
        target = r["responders"][0]
        theirs = rank_grpo_row(lst, set(r["seen"]), target, k)[1]
        kept = [x for x in lst if x is not None and x not in set(r["seen"])]
        if len(kept) >= min(len(target), k):
            assert mine == pytest.approx(theirs)
        else:
            n_short += 1
            assert mine <= theirs + 1e-12
    assert n_short < len(lists)


def test_rank_grpo_departures_by_hand():
    # request a: seen s, responders {x, y} and {x, z}
    # 1. a repeat: Rank-GRPO keeps "z" twice (the second scores 0 but holds rank 2); we drop it
    got = score_lists(
        REQ, [["z", "z", "x"], ["p"], ["q"]], ks=[2], metrics=["recall"], views=["per_responder"]
    )
    ours = got.per_request["eval/recall@2/per_responder"][0]
    theirs = np.mean([rank_grpo_row(["z", "z", "x"], {"s"}, t, 2)[0] for t in (["x", "y"], ["x", "z"])])
    assert (ours, theirs) == (pytest.approx((1 / 2 + 2 / 2) / 2), pytest.approx((0 + 1 / 2) / 2))
    # 2. a short list: one item left after filtering, |T| = 2, k = 5. Rank-GRPO's ideal DCG has one slot
    # (NDCG 1 for responder {x, y}); ours has min(|T|, k) = 2 slots: 1 / (1 + 1/log2(3))
    got = score_lists(
        REQ, [["s", None, "x"], ["p"], ["q"]], ks=[5], metrics=["ndcg"], views=["per_responder"]
    )
    ours = got.per_request["eval/ndcg@5/per_responder"][0]
    assert rank_grpo_row(["s", None, "x"], {"s"}, ["x", "y"], 5)[1] == pytest.approx(1.0)
    assert ours == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_per_mention_by_hand_and_its_weights():
    # a: [z, x] compacted; mentions (x, y), (x, z): x rank 2, y missing, x rank 2, z rank 1
    got = score_lists(
        REQ,
        [["s", "z", None, "z", "x"], ["p"], ["w", "q"]],
        ks=[2],
        metrics=["recall", "mrr"],
        views=["per_mention"],
    )
    pr = got.per_request
    assert pr["n_mentions"].to_list() == [4, 1, 2]
    assert pr["eval/recall@2/per_mention"].to_list() == pytest.approx([3 / 4, 1.0, 1.0])
    assert pr["eval/mrr@2/per_mention"].to_list() == pytest.approx([(0.5 + 0 + 0.5 + 1) / 4, 1.0, 0.5])
    # overall: rows weighted, (2 + 1 + 1) / 7 for MRR
    assert got.means()["eval/mrr@2/per_mention"] == pytest.approx((2.0 + 1.0 + 1.0) / 7)
    assert "n_mentions" not in score_lists(REQ, [["x"], ["p"], ["q"]], ks=[1]).per_request.columns


def test_sampled_lists_per_mention_average_over_lists():
    got = score_lists(
        REQ,
        [["x"], ["z"], ["p"], ["q"]],
        list_request=[0, 0, 1, 2],
        ks=[1],
        metrics=["recall"],
        views=["per_mention"],
    )
    # a: list x hits 2 of 4 mentions, list z 1 of 4: mean 3/8; n_mentions counts mentions, not lists
    assert got.per_request["eval/recall@1/per_mention"].to_list() == pytest.approx([3 / 8, 1.0, 1.0])
    assert got.per_request["n_mentions"].to_list() == [4, 1, 2]
    assert isinstance(got.per_request, pl.DataFrame)
