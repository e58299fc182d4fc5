"""``token_rank_index`` (texts joined without padding, filler checked only on tokens without a rank, by
``str.isspace`` or by a cumulative count) against the per-token loop ``remark.oracles.token_loops``, on
texts cut into arbitrary character runs (tokens)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.lists import parse_lists
from catalog.parse import parse_list
from remark.algos import tokens
from remark.algos.offsets import TokenOffsets
from remark.oracles.token_loops import loop_token_ranks as reference_token_rank_index

_pieces = st.sampled_from(
    [
        "1. Heat (1995)",
        "Alien",
        " - good",
        "\n",
        "\n\n",
        "  ",
        "\t",
        "\u3000",
        "\xa0",
        "Here are some:",
        "x",
        "é",
    ]
)
_text = st.lists(_pieces, max_size=40).map("".join)


def _offsets(texts: list[str], cuts: list[list[int]]) -> TokenOffsets:
    """Tokens = the runs between sorted cut points of each text (zero-length runs included)."""
    bounds = [sorted([0, len(t), *(c % (len(t) + 1) for c in cs)]) for t, cs in zip(texts, cuts, strict=True)]
    width = max((len(b) - 1 for b in bounds), default=0) + 1  # + one padding column
    start = np.zeros((len(texts), width), dtype=np.int64)
    end = np.zeros((len(texts), width), dtype=np.int64)
    for r, (t, b) in enumerate(zip(texts, bounds, strict=True)):
        start[r, :] = end[r, :] = len(t)
        start[r, : len(b) - 1], end[r, : len(b) - 1] = b[:-1], b[1:]
    return TokenOffsets(texts=texts, start_RT=start, end_RT=end, n_fallback=0)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(_text, min_size=1, max_size=4),
    cuts=st.lists(st.lists(st.integers(0, 400), max_size=60), min_size=4, max_size=4),
    k=st.integers(1, 4),
    python_checks=st.sampled_from([0, 4096]),
)
def test_token_ranks_equal_the_pre_change_code(texts, cuts, k, python_checks):
    offsets = _offsets(texts, cuts[: len(texts)])
    lines = [parse_list(t) for t in texts]
    want = reference_token_rank_index(lines, offsets, k=k)
    saved, tokens._PYTHON_CHECKS = tokens._PYTHON_CHECKS, python_checks  # str.isspace or the cumsum
    try:
        got = tokens.token_rank_index(lines, offsets, k=k)
        from_columns = tokens.token_rank_index(parse_lists(texts), offsets, k=k)  # the scorer's input
    finally:
        tokens._PYTHON_CHECKS = saved
    assert torch.equal(got, want)
    assert torch.equal(from_columns, want)


@pytest.mark.parametrize("python_checks", [0, 4096])
def test_blank_lines_and_indentation_are_filler(python_checks, monkeypatch):
    monkeypatch.setattr(tokens, "_PYTHON_CHECKS", python_checks)
    text = "Sure:\n\n  1. Heat (1995)\n\n2. Alien"
    offsets = _offsets([text], [list(range(1, len(text)))])  # one character per token
    got = tokens.token_rank_index([parse_list(text)], offsets, k=2)[0, : len(text)].tolist()
    assert got == reference_token_rank_index([parse_list(text)], offsets, k=2)[0, : len(text)].tolist()
    # the newline after the preamble, the blank line and the indentation: filler; "1. Heat (1995)" is rank 0
    assert got[5:9] == [tokens.FILLER] * 4 and got[9] == 0


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.lists(st.integers(0, 9), max_size=12), max_size=8),
    eos=st.lists(st.integers(0, 12), max_size=12),  # more than 8: np.isin
)
def test_first_end_index_equals_end_token_index(rows, eos):
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    flat = np.array([i for r in rows for i in r], dtype=np.int64)
    want = [next((t for t, i in enumerate(r) if i in eos), -1) for r in rows]
    assert tokens.first_end_index(flat, lengths, eos).tolist() == want
    if rows and eos:
        assert tokens.end_token_index(rows, eos).tolist() == want


def test_first_end_index_by_hand():
    rows = [[5, 2, 9, 2], [], [1, 1], [2], [7, 3, 2]]
    lengths = np.array([4, 0, 2, 1, 3])
    flat = np.array([5, 2, 9, 2, 1, 1, 2, 7, 3, 2])
    assert tokens.first_end_index(flat, lengths, [2]).tolist() == [1, -1, -1, 0, 2]
    assert tokens.first_end_index(flat, lengths, [9, 3]).tolist() == [2, -1, -1, -1, 1]
    assert tokens.first_end_index(flat, lengths, []).tolist() == [-1] * 5
    assert len(rows) == len(lengths)
