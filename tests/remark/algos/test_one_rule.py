"""One rule, one place: the training reward and the evaluation count the same slots with the same weights.

``remark.algos.rewards.eligibility`` (torch, on encoded rows) and ``eval.metrics.eligibility`` (numpy, on
integer codes) are two implementations of one rule: a slot counts when it holds an item, the item was not
seen in the request, and no earlier slot of the list holds it. ``log_decay``'s discounts and NDCG's are
one formula, 1 / log2(j + 1). eval is the lower layer, so neither imports the other; these properties
tie them on random inputs.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from eval.metrics import discounts, pair_keys
from eval.metrics import eligibility as eval_eligibility
from remark.algos import encode_rows, log_decay
from remark.algos.rewards import _decay_weights, eligibility

ITEMS = [f"i{n}" for n in range(8)]
slot = st.one_of(st.none(), st.sampled_from(ITEMS))
request = st.tuples(
    st.lists(st.lists(slot, max_size=9), min_size=1, max_size=4),  # the request's lists
    st.lists(st.sampled_from(ITEMS), max_size=3),  # seen
    st.lists(st.sampled_from(ITEMS), min_size=1, max_size=4),  # one responder's items
)


@settings(max_examples=200, deadline=None)
@given(requests=st.lists(request, min_size=1, max_size=4), k=st.integers(1, 10))
def test_reward_and_metric_eligibility_agree(requests, k):
    slot_ids, seen, responders, group = [], [], [], []
    for b, (lists, seen_b, items) in enumerate(requests):
        for row in lists:
            slot_ids.append(row)
            seen.append(seen_b)
            responders.append([list(dict.fromkeys(items))])
            group.append(b)
    enc = encode_rows(slot_ids, k=k, responders=responders, seen=seen)
    want = eligibility(enc).numpy()

    code = {item: n for n, item in enumerate(ITEMS)}
    ids_LK = np.full((len(slot_ids), k), -1, dtype=np.int64)
    for r, row in enumerate(slot_ids):
        for j, item in enumerate(row[:k]):
            ids_LK[r, j] = -1 if item is None else code[item]
    seen_keys = np.array(
        [
            pair_keys(np.int64(b), np.int64(code[i]), len(ITEMS))
            for b, (_, s, _) in enumerate(requests)
            for i in s
        ],
        dtype=np.int64,
    )
    got = eval_eligibility(ids_LK, np.array(group), seen_keys, len(ITEMS))
    np.testing.assert_array_equal(got, want)


@settings(max_examples=50, deadline=None)
@given(k=st.integers(1, 60))
def test_log_decay_uses_the_ndcg_discounts(k):
    np.testing.assert_allclose(_decay_weights(k, torch.float64).numpy(), discounts(k), rtol=0, atol=1e-15)
    hits = torch.from_numpy(np.random.default_rng(k).integers(0, 2, size=(3, k)).astype(np.float64))
    want = np.flip(np.cumsum(np.flip(hits.numpy() * discounts(k), -1), -1), -1)
    np.testing.assert_allclose(log_decay(hits).numpy(), want, rtol=1e-12)
