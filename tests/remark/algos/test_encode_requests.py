"""``encode_rows`` builds a request's part of the code space once per run of rows with equal request
columns and copies it: the tables must be those of building every row on its own."""

from __future__ import annotations

import copy

import pytest
import torch

from remark.algos import encode_rows
from remark.oracles.rank_loops import random_rows

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


# ---- the vectorised encoding against a per-row statement of the code space ----------------------------
def _per_row(slot_ids, *, k, union, counts, responders, seen, responder_index=None, responder_items=None):
    """Each row on its own, as the module docstring states it: union ids first, then responders' and seen
    ids, slot ids and the row's own responder's ids in first-seen order; tables from those codes."""
    R = len(slot_ids)
    rows = []
    for r in range(R):
        codes: dict = {}
        for i in union[r]:
            codes.setdefault(i, len(codes))
        for items in responders[r]:
            for i in items:
                codes.setdefault(i, len(codes))
        for i in seen[r]:
            codes.setdefault(i, len(codes))
        item = [-1] * k
        for j, i in enumerate(slot_ids[r][:k]):
            if i is not None:
                item[j] = codes.setdefault(i, len(codes))
        if responder_items is not None:
            drawn = [codes.setdefault(i, len(codes)) for i in responder_items[r]]
        else:
            drawn = [codes[i] for i in responders[r][responder_index[r]]]
        rows.append((codes, item, drawn))
    V = max(len(c) for c, _, _ in rows) + 1
    N = max(len(responders[r]) for r in range(R))
    out = {
        "item_RK": torch.tensor([item for _, item, _ in rows]),
        "n_lines_R": torch.tensor([len(s) for s in slot_ids]),
        "seen_RV": torch.zeros(R, V, dtype=torch.bool),
        "counts_RV": torch.zeros(R, V),
        "member_RNV": torch.zeros(R, N, V, dtype=torch.bool),
        "drawn_RV": torch.zeros(R, V, dtype=torch.bool),
    }
    for r, (codes, _, drawn) in enumerate(rows):
        for i in seen[r]:
            out["seen_RV"][r, codes[i]] = True
        for i, c in zip(union[r], counts[r], strict=True):
            out["counts_RV"][r, codes[i]] = c
        for n, items in enumerate(responders[r]):
            for i in items:
                out["member_RNV"][r, n, codes[i]] = True
        out["drawn_RV"][r, drawn] = True
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("own", [False, True])
def test_the_codes_and_tables_are_those_of_each_row_on_its_own(seed, own):
    rows = random_rows(seed, n_requests=6, group_size=3, k=5)
    slot_ids = rows.pop("slot_ids")
    if own:  # per-responder rows: the row's own responder's ids, some of them new to its request
        rows.pop("responder_index")
        rows["responder_items"] = [[*r[0], f"own{i % 4}"] for i, r in enumerate(rows["responders"])]
        enc = encode_rows(slot_ids, k=5, **rows)
    else:
        enc = encode_rows(slot_ids, k=5, group_size=3, **rows)
    want = _per_row(slot_ids, k=5, **rows)
    for name, table in want.items():
        assert torch.equal(getattr(enc, name), table.to(getattr(enc, name).dtype)), name
