"""``eval.generate.whole_prefill_batches``: prompt ranges that vLLM's scheduler admits whole (no chunked
prefill of a seeded request on CPU), on hand-computed cases and as properties."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from eval.generate import whole_prefill_batches


def test_hand_computed_ranges():
    # n = 2: costs 20, 20, 20, 60, 10 against a budget of 48 tokens and 8 sequences (4 prompts)
    assert whole_prefill_batches([10, 10, 10, 30, 5], n=2, budget=48, max_seqs=8) == [
        range(0, 2),  # 40 tokens; a third prompt would make 60
        range(2, 3),  # 20, then 30 x 2 = 60 would pass 48
        range(3, 4),  # 60 alone: over the budget, but nothing can be split off a single prompt
        range(4, 5),
    ]
    # the sequence limit: 4 samples each, at most 8 sequences = 2 prompts per range
    assert whole_prefill_batches([1] * 5, n=4, budget=10_000, max_seqs=8) == [
        range(0, 2),
        range(2, 4),
        range(4, 5),
    ]
    assert whole_prefill_batches([], n=2, budget=10, max_seqs=4) == []
    assert whole_prefill_batches([3, 3], n=1, budget=6, max_seqs=4) == [range(0, 2)]  # exactly the budget


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 50), max_size=30),
    n=st.integers(1, 6),
    budget=st.integers(1, 400),
    max_seqs=st.integers(1, 32),
)
def test_ranges_cover_in_order_and_respect_both_limits(lengths, n, budget, max_seqs):
    ranges = whole_prefill_batches(lengths, n, budget, max_seqs)
    assert [i for r in ranges for i in r] == list(range(len(lengths)))
    for r in ranges:
        if len(r) > 1:
            assert n * sum(lengths[i] for i in r) <= budget and n * len(r) <= max_seqs
    for a, b in itertools.pairwise(ranges):  # each range is as long as the limits allow
        grown = range(a.start, b.start + 1)
        assert n * sum(lengths[i] for i in grown) > budget or n * len(grown) > max_seqs
