"""``encode_rows`` builds a request's part of the code space once per run of rows with equal request
columns (issue 13) and copies it: the tables must be those of building every row on its own."""

from __future__ import annotations

import copy

import pytest
import torch

from remark.algos import encode_rows
from remark.algos.reference import random_rows

_TABLES = ("item_RK", "n_lines_R", "seen_RV", "counts_RV", "member_RNV", "responder_mask_RN", "drawn_RV")
_COLUMNS = ("union", "counts", "responders", "seen", "responder_index")


def _same(a, b) -> None:
    for name in _TABLES:
        assert torch.equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.parametrize("seed", range(6))
def test_shared_equal_and_rebuilt_request_columns_encode_alike(seed):
    rows = random_rows(seed, n_requests=5, group_size=4, k=6)
    shared = encode_rows(k=6, group_size=4, **rows)  # a group's rows hold the same column objects
    copies = {key: [copy.deepcopy(v) for v in vals] for key, vals in rows.items()}  # equal, not identical
    _same(shared, encode_rows(k=6, group_size=4, **copies))
    # interleaved requests: no row follows one of its own request, so every row builds its codes
    order = [g * 4 + i for i in range(4) for g in range(5)]
    mixed = encode_rows(k=6, **{key: [vals[r] for r in order] for key, vals in rows.items()})
    back = sorted(range(len(order)), key=order.__getitem__)
    for name in _TABLES:
        assert torch.equal(getattr(mixed, name)[back], getattr(shared, name)), name


def test_rows_of_one_request_with_different_drawn_responders():
    resp = [["a", "b"], ["c"]]
    cols = {"union": [["a", "b", "c"]] * 2, "counts": [[1, 1, 1]] * 2, "responders": [resp] * 2}
    enc = encode_rows([["c", "x"], ["a"]], k=2, seen=[[], []], responder_index=[1, 0], **cols)
    assert enc.drawn_RV[0, :3].tolist() == [False, False, True]
    assert enc.drawn_RV[1, :3].tolist() == [True, True, False]
    assert enc.item_RK.tolist() == [[2, 3], [0, -1]]


def test_a_bad_request_is_reported_at_its_first_row():
    rows = random_rows(0, n_requests=3, group_size=4, k=5)
    bad = ["i1", "i1"]
    union = rows["union"][:4] + [bad] * 4 + rows["union"][8:]
    counts = rows["counts"][:4] + [[1] * len(bad)] * 4 + rows["counts"][8:]
    with pytest.raises(ValueError, match=r"^row 4: union has repeated ids"):
        encode_rows(k=5, **{**rows, "union": union, "counts": counts})
    with pytest.raises(ValueError, match=r"^row 9: responder_index 7 is out of range"):
        encode_rows(
            k=5,
            **{**rows, "responder_index": [*rows["responder_index"][:9], 7, *rows["responder_index"][10:]]},
        )
