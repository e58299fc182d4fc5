"""eval.metrics: hand-computed cases (duplicates, seen, compaction, the four slot filters, MRR and hit,
|T| > k, empty lists), properties (hit >= recall, mrr <= hit, filters never lower a score) and a slow
reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval.metrics import (
    FILTERS,
    MAX_K,
    METRICS,
    apply_eligibility,
    check_filters,
    check_ks,
    check_metrics,
    discounts,
    eligibility,
    filter_for,
    filter_slots,
    hit_matrix,
    metrics_at_k,
    pad_lists,
    pair_keys,
)

L2 = 1 / math.log2(3)  # d_2
L3 = 1 / math.log2(4)  # d_3 = 0.5


def test_discounts_weight_one_at_rank_one_then_inverse_log():
    np.testing.assert_allclose(discounts(4), [1.0, L2, 0.5, 1 / math.log2(5)])


def test_recall_ndcg_precision_hit_by_hand():
    hits = np.array([[1, 0, 1], [0, 1, 0]], dtype=bool)
    out = metrics_at_k(hits, np.array([2, 1]), ks=[1, 3])
    np.testing.assert_allclose(out["recall@1"], [0.5, 0.0])
    np.testing.assert_allclose(out["recall@3"], [1.0, 1.0])
    np.testing.assert_allclose(out["precision@3"], [2 / 3, 1 / 3])
    np.testing.assert_allclose(out["hit@1"], [1.0, 0.0])
    # row 0: DCG = 1 + 0.5, IDCG over min(2, 3) = 2 slots = 1 + d_2; row 1: DCG = d_2, IDCG = 1
    np.testing.assert_allclose(out["ndcg@3"], [1.5 / (1 + L2), L2])
    # first hits: row 0 at rank 1, row 1 at rank 2 (outside k = 1)
    np.testing.assert_allclose(out["mrr@1"], [1.0, 0.0])
    np.testing.assert_allclose(out["mrr@3"], [1.0, 0.5])
    assert list(out) == [f"{m}@{k}" for m in METRICS for k in (1, 3)]  # the registry's order, then k


def test_mrr_and_hit_by_hand_with_several_targets():
    # |T| = 3; hits at ranks 3 and 4 of a 5-slot list; a second row with no hit; a third hit at rank 5
    hits = np.array([[0, 0, 1, 1, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 1]], dtype=bool)
    out = metrics_at_k(hits, np.array([3, 2, 1]), ks=[2, 3, 4, 5], metrics=["hit", "mrr", "recall"])
    np.testing.assert_allclose(out["hit@2"], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(out["hit@3"], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(out["mrr@2"], [0.0, 0.0, 0.0])
    # MRR takes the first hit only: 1/3, not (1/3 + 1/4) / 2 or 1/3 + 1/4
    np.testing.assert_allclose(out["mrr@3"], [1 / 3, 0.0, 0.0])
    np.testing.assert_allclose(out["mrr@5"], [1 / 3, 0.0, 0.2])
    # hit is 1 as soon as one of the three is found; recall counts them: 2/3 at k = 4
    np.testing.assert_allclose(out["hit@4"], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(out["recall@4"], [2 / 3, 0.0, 0.0])
    # one target (the CRS references' rows): hit@k == recall@k
    np.testing.assert_allclose(out["hit@5"][2], out["recall@5"][2])


# One list against T = {8}, request seen = {5}: [ungrounded, 5 (seen), 2, 2 (repeat), ungrounded, 8]
FILTER_IDS = np.array([[-1, 5, 2, 2, -1, 8]])
FILTER_SEEN = pair_keys(np.array([0]), np.array([5]), 10)
FILTER_TARGET = pair_keys(np.array([0]), np.array([8]), 10)
# Counted slots by hand (-1 scores 0 but keeps its rank), and the rank of 8 in them.
FILTER_SLOTS = {
    "drop_ooc_seen": ([2, 8, -1, -1, -1, -1], 2),  # ooc, seen and the repeat dropped
    "drop_ooc": ([-1, 2, -1, 8, -1, -1], 4),  # seen 5 and the repeat keep ranks 1 and 3
    "drop_seen": ([-1, 2, -1, 8, -1, -1], 4),  # the two ungrounded slots keep ranks 1 and 3
    "drop_none": ([-1, -1, 2, -1, -1, 8], 6),  # every slot keeps its rank
}


@pytest.mark.parametrize("name", list(FILTERS))
def test_four_slot_filters_by_hand(name):
    elig = eligibility(FILTER_IDS, np.array([0]), FILTER_SEEN, 10)
    np.testing.assert_array_equal(elig, [[0, 0, 1, 0, 0, 1]])
    want_slots, rank = FILTER_SLOTS[name]
    slots = filter_slots(FILTER_IDS, elig, FILTERS[name])
    np.testing.assert_array_equal(slots, [want_slots])
    out = metrics_at_k(hit_matrix(slots, np.array([0]), FILTER_TARGET, 10), np.array([1]), ks=[1, 2, 4, 6])
    for k in (1, 2, 4, 6):
        found = rank <= k
        assert out[f"hit@{k}"][0] == out[f"recall@{k}"][0] == float(found)
        assert out[f"mrr@{k}"][0] == pytest.approx(1 / rank if found else 0.0)
        assert out[f"ndcg@{k}"][0] == pytest.approx(1 / math.log2(rank + 1) if found else 0.0)
        assert out[f"precision@{k}"][0] == pytest.approx(float(found) / k)


def test_drop_ooc_and_drop_seen_differ_when_the_kinds_differ_in_number():
    # row 0: two ungrounded slots, then seen 5, then 8; row 1: seen 5, its repeat, one ungrounded, then 8
    ids = np.array([[-1, -1, 5, 8], [5, 5, -1, 8]])
    group = np.array([0, 0])
    elig = eligibility(ids, group, FILTER_SEEN, 10)
    ranks = {}
    for name, f in FILTERS.items():
        slots = filter_slots(ids, elig, f)
        ranks[name] = [int(np.argmax(row == 8)) + 1 for row in slots]
    # the rank of 8 is 1 + the number of slots before it that the filter keeps
    assert ranks == {
        "drop_ooc_seen": [1, 1],
        "drop_ooc": [2, 3],
        "drop_seen": [3, 2],
        "drop_none": [4, 4],
    }


def test_compact_switch_is_two_of_the_filters():
    assert filter_for(True) is FILTERS["drop_ooc_seen"] and filter_for(False) is FILTERS["drop_none"]
    elig = eligibility(FILTER_IDS, np.array([0]), FILTER_SEEN, 10)
    for compact in (True, False):
        np.testing.assert_array_equal(
            apply_eligibility(FILTER_IDS, elig, compact=compact),
            filter_slots(FILTER_IDS, elig, filter_for(compact)),
        )


def test_more_targets_than_k_ideal_dcg_uses_min_t_k():
    hits = np.array([[1, 1, 0, 0]], dtype=bool)
    out = metrics_at_k(hits, np.array([5]), ks=[2])
    assert out["recall@2"][0] == pytest.approx(2 / 5)
    assert out["ndcg@2"][0] == pytest.approx(1.0)  # both slots hit; IDCG over min(5, 2) = 2
    assert out["precision@2"][0] == pytest.approx(1.0)


def test_empty_list_scores_zero_and_short_list_pads_with_misses():
    out = metrics_at_k(np.zeros((1, 0), dtype=bool), np.array([3]), ks=[5])
    assert out["recall@5"][0] == 0.0 and out["ndcg@5"][0] == 0.0 and out["hit@5"][0] == 0.0
    out = metrics_at_k(np.array([[True]]), np.array([1]), ks=[10])
    assert out["precision@10"][0] == pytest.approx(0.1)  # k in the denominator even for a short list


def test_empty_target_is_nan_not_zero():
    out = metrics_at_k(np.array([[True, False]]), np.array([0]), ks=[2])
    assert all(np.isnan(v[0]) for v in out.values())


def test_pad_lists_ragged_to_dense():
    got = pad_lists(np.array([4, 5, 6, 7]), np.array([2, 0, 2]))
    np.testing.assert_array_equal(got, [[4, 5], [-1, -1], [6, 7]])
    np.testing.assert_array_equal(pad_lists(np.array([4, 5, 6]), np.array([3]), width=2), [[4, 5]])


def test_eligibility_drops_empty_seen_and_repeats():
    ids = np.array([[3, -1, 3, 9, 5, 9], [9, 9, 3, -1, -1, -1]])
    seen = pair_keys(np.array([0]), np.array([5]), 10)  # request 0 has seen item 5
    got = eligibility(ids, np.array([0, 1]), seen, 10)
    np.testing.assert_array_equal(got, [[1, 0, 0, 1, 0, 0], [1, 0, 1, 0, 0, 0]])


def test_eligibility_item_with_largest_code_is_not_confused_with_empty_slots():
    ids = np.array([[-1, 9, 9]])
    got = eligibility(ids, np.array([0]), np.empty(0, np.int64), 10)
    np.testing.assert_array_equal(got, [[0, 1, 0]])


def test_compaction_on_and_off():
    ids = np.array([[-1, 5, 2, 2, 8]])
    elig = np.array([[0, 0, 1, 0, 1]], dtype=bool)  # 5 seen, second 2 a repeat
    np.testing.assert_array_equal(apply_eligibility(ids, elig, compact=True), [[2, 8, -1, -1, -1]])
    np.testing.assert_array_equal(apply_eligibility(ids, elig, compact=False), [[-1, -1, 2, -1, 8]])
    # T = {8}: found at rank 2 compacted, rank 5 with positions kept
    for compact, rank in [(True, 2), (False, 5)]:
        slots = apply_eligibility(ids, elig, compact=compact)
        hits = hit_matrix(slots, np.array([0]), pair_keys(np.array([0]), np.array([8]), 10), 10)
        out = metrics_at_k(hits, np.array([1]), ks=[2, 5])
        assert out["recall@2"][0] == (1.0 if rank <= 2 else 0.0)
        assert out["ndcg@5"][0] == pytest.approx(1 / math.log2(rank + 1))


def test_hit_matrix_targets_per_row():
    slots = np.array([[1, 2, -1], [1, 2, -1]])
    keys = pair_keys(np.array([0, 1, 1]), np.array([2, 1, 7]), 10)
    np.testing.assert_array_equal(hit_matrix(slots, np.array([0, 1]), keys, 10), [[0, 1, 0], [1, 0, 0]])


def test_invalid_names_list_valid_ones():
    with pytest.raises(ValueError, match="valid: recall, ndcg, precision, hit, mrr"):
        check_metrics(["map"])
    assert check_metrics(["mrr", "hit", "mrr"]) == ("mrr", "hit")
    with pytest.raises(ValueError, match="from 1 to 50"):
        check_ks([0, 5])
    with pytest.raises(ValueError, match="from 1 to 50"):
        check_ks([5, MAX_K + 1])
    assert check_ks([20, 5, 5]) == (5, 20) and check_ks([MAX_K]) == (50,)
    with pytest.raises(ValueError, match="valid: drop_ooc_seen, drop_ooc, drop_seen, drop_none"):
        check_filters(["drop_all"])


def test_k_of_fifty_on_a_twenty_item_list():
    hits = np.zeros((1, 20), dtype=bool)
    hits[0, 19] = True
    out = metrics_at_k(hits, np.array([2]), ks=[20, 50])
    assert out["recall@50"][0] == out["recall@20"][0] == 0.5
    assert out["precision@50"][0] == pytest.approx(1 / 50)
    assert out["mrr@50"][0] == pytest.approx(1 / 20)


def _reference(lst, seen, target, k, drop_ooc, drop_seen):
    """Slow, literal definition from docs/metrics.md."""
    out, used = [], set()
    for x in lst:
        ooc = x is None
        mentioned = not ooc and (x in seen or x in used)
        if not ooc:
            used.add(x)
        if (ooc and drop_ooc) or (mentioned and drop_seen):
            continue
        out.append(None if ooc or mentioned else x)
    top = out[:k]
    hits = [x is not None and x in target for x in top]
    n = len(target)
    dcg = sum(1 / math.log2(i + 2) for i, h in enumerate(hits) if h)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(n, k)))
    first = next((i + 1 for i, h in enumerate(hits) if h), None)
    return {
        "recall": sum(hits) / n,
        "ndcg": dcg / idcg,
        "precision": sum(hits) / k,
        "hit": float(any(hits)),
        "mrr": 0.0 if first is None else 1 / first,
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", list(FILTERS))
def test_vectorised_pipeline_matches_slow_reference(seed, name):
    rng = np.random.default_rng(seed)
    n_items, n_lists = 12, 40
    lists = [
        [int(x) if x >= 0 else None for x in rng.integers(-2, n_items, rng.integers(0, 9))]
        for _ in range(n_lists)
    ]
    seens = [set(rng.choice(n_items, rng.integers(0, 3), replace=False).tolist()) for _ in range(n_lists)]
    targets = [set(rng.choice(n_items, rng.integers(1, 6), replace=False).tolist()) for _ in range(n_lists)]
    lengths = np.array([len(x) for x in lists])
    codes = np.array([-1 if x is None else x for lst in lists for x in lst], dtype=np.int64)
    ids = pad_lists(codes, lengths)
    group = np.arange(n_lists)
    seen_keys = pair_keys(
        np.array([i for i, s in enumerate(seens) for _ in s]),
        np.array([x for s in seens for x in s]),
        n_items,
    )
    target_keys = pair_keys(
        np.array([i for i, t in enumerate(targets) for _ in t]),
        np.array([x for t in targets for x in t]),
        n_items,
    )
    f = FILTERS[name]
    slots = filter_slots(ids, eligibility(ids, group, seen_keys, n_items), f)
    got = metrics_at_k(
        hit_matrix(slots, group, target_keys, n_items), np.array([len(t) for t in targets]), ks=[1, 3, 5]
    )
    for i in range(n_lists):
        for k in (1, 3, 5):
            ref = _reference(lists[i], seens[i], targets[i], k, f.drop_ooc, f.drop_seen)
            for m, v in ref.items():
                assert got[f"{m}@{k}"][i] == pytest.approx(v), (i, m, k)


N_ITEMS = 8
slot = st.integers(-1, N_ITEMS - 1)  # -1: ungrounded
case = st.tuples(
    st.lists(slot, max_size=12),  # the list
    st.sets(st.integers(0, N_ITEMS - 1), max_size=3),  # seen
    st.sets(st.integers(0, N_ITEMS - 1), min_size=1, max_size=5),  # targets
)


@settings(max_examples=150, deadline=None)
@given(st.lists(case, min_size=1, max_size=6))
def test_properties_hit_recall_mrr_and_filters(cases):
    """Per row and k: hit >= recall, mrr <= hit, hit/k <= mrr, ndcg <= hit, every metric non-decreasing in
    k except precision; dropping more slots never lowers recall, hit, mrr or ndcg (items only move up)."""
    lengths = np.array([len(c[0]) for c in cases])
    ids = pad_lists(np.array([x for c in cases for x in c[0]], dtype=np.int64), lengths, width=12)
    group = np.arange(len(cases))
    seen = pair_keys(
        np.array([i for i, c in enumerate(cases) for _ in c[1]], dtype=np.int64),
        np.array([x for c in cases for x in c[1]], dtype=np.int64),
        N_ITEMS,
    )
    target = pair_keys(
        np.array([i for i, c in enumerate(cases) for _ in c[2]], dtype=np.int64),
        np.array([x for c in cases for x in c[2]], dtype=np.int64),
        N_ITEMS,
    )
    n_t = np.array([len(c[2]) for c in cases])
    elig = eligibility(ids, group, seen, N_ITEMS)
    ks = list(range(1, 13))
    out = {
        name: metrics_at_k(hit_matrix(filter_slots(ids, elig, f), group, target, N_ITEMS), n_t, ks)
        for name, f in FILTERS.items()
    }
    eps = 1e-12
    for m in out.values():
        for k in ks:
            assert (m[f"hit@{k}"] >= m[f"recall@{k}"] - eps).all()
            assert (m[f"mrr@{k}"] <= m[f"hit@{k}"] + eps).all()
            assert (m[f"mrr@{k}"] >= m[f"hit@{k}"] / k - eps).all()
            assert (m[f"ndcg@{k}"] <= m[f"hit@{k}"] + eps).all()
        for name in ("recall", "hit", "mrr"):
            assert (np.diff(np.stack([m[f"{name}@{k}"] for k in ks]), axis=0) >= -eps).all()
    for more, less in [
        ("drop_ooc_seen", "drop_ooc"),
        ("drop_ooc_seen", "drop_seen"),
        ("drop_ooc", "drop_none"),
        ("drop_seen", "drop_none"),
    ]:
        for name in ("recall", "hit", "mrr", "ndcg"):
            for k in ks:
                assert (out[more][f"{name}@{k}"] >= out[less][f"{name}@{k}"] - eps).all(), (more, less, name)
