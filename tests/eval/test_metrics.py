"""eval.metrics: hand-computed cases (duplicates, seen, compaction, |T| > k, empty lists) and a slow reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eval.metrics import (
    apply_eligibility,
    check_ks,
    check_metrics,
    discounts,
    eligibility,
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
    assert list(out) == [f"{m}@{k}" for m in ("recall", "ndcg", "precision", "hit") for k in (1, 3)]


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
    with pytest.raises(ValueError, match="valid: recall, ndcg, precision, hit"):
        check_metrics(["mrr"])
    with pytest.raises(ValueError, match="positive"):
        check_ks([0, 5])
    assert check_ks([20, 5, 5]) == (5, 20)


def _reference(lst, seen, target, k, compact):
    """Slow, literal definition from design.md."""
    out, used = [], set()
    for x in lst:
        ok = x is not None and x not in seen and x not in used
        if x is not None:
            used.add(x)
        if ok or not compact:
            out.append(x if ok else None)
    top = out[:k]
    hits = [x is not None and x in target for x in top]
    n = len(target)
    dcg = sum(1 / math.log2(i + 2) for i, h in enumerate(hits) if h)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(n, k)))
    return {"recall": sum(hits) / n, "ndcg": dcg / idcg, "precision": sum(hits) / k, "hit": float(any(hits))}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("compact", [True, False])
def test_vectorised_pipeline_matches_slow_reference(seed, compact):
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
    slots = apply_eligibility(ids, eligibility(ids, group, seen_keys, n_items), compact=compact)
    got = metrics_at_k(
        hit_matrix(slots, group, target_keys, n_items), np.array([len(t) for t in targets]), ks=[1, 3, 5]
    )
    for i in range(n_lists):
        for k in (1, 3, 5):
            ref = _reference(lists[i], seens[i], targets[i], k, compact)
            for m, v in ref.items():
                assert got[f"{m}@{k}"][i] == pytest.approx(v), (i, m, k)
