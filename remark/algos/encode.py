"""Grounded completion rows + request fields -> the padded tensors that the reward schemes take.

Rows are completion rows (R = B * G, groups of G consecutive rows, TRL's layout). Each row gets a
private integer code space: the request's union items first (codes ``0 .. U_r - 1``, in union order),
then every other id the row mentions (seen ids, slot ids, responder items) in first-seen order. All
per-code tables carry one extra *sentinel* column at index ``V`` (= padded code-space size) that is
always empty, so a slot with no id (code -1) gathers zeros and no reward function needs a branch.

This is the only place that touches strings; the rewards (``remark.algos.rewards``) are tensor
gathers and compares on what this module returns. Encoding costs one dictionary look-up per id: the part of a row's code space that its request fixes (union, responders, seen: the same for a
group's G rows) is built and checked once per run of rows with equal request columns, its tables once
per run and gathered for the run's rows (numpy arrays, which the returned tensors share); the ids a
row adds (slot ids, its own responder's ids) are looked up in its request's codes in one ``map`` per
run, and those new to the request are numbered in order of first appearance within their row by one
``np.unique`` over (row, id) pairs. The codes and tables are those of building every row on its own
(tests/remark/algos/test_encode_requests.py).

Departure from Rank-GRPO: it matches titles per row against the responder's ground truth with a
decrementing count per (casefolded title, year +-2); here grounding happens first (catalog ids,
docs/method.md#parsing-and-grounding) and a repeat of an earlier slot's id is never eligible. Under
Rank-GRPO's reward slots the scorer encodes the ids its consumption rule credits instead
(``catalog.published.published_credit``, distinct ids), which gives its hits exactly.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = ["EncodedRows", "encode_rows"]


@dataclass(frozen=True)
class EncodedRows:
    """Per-row tensors for the reward schemes (R rows, K slots, N responders, V codes + 1 sentinel).

    Attributes
    ----------
    item_RK : int64 (R, K)
        Row-local code of the catalog id at slot k; -1 when the slot has no id (unparsed or ungrounded
        line, or no line at all because the list is shorter than K).
    n_lines_R : int64 (R,)
        Number of rank lines the row's list had (can exceed K: overflow lines are not scored).
    seen_RV : bool (R, V + 1)
        Code v is an id already named in the request (``seen``): never rewarded.
    counts_RV : float32 (R, V + 1)
        c_v, how many responders named code v (0 outside the union and at the sentinel).
    member_RNV : bool (R, N, V + 1)
        Responder n of the row's request named code v; padded responders are all False.
    responder_mask_RN : bool (R, N)
        Responder n exists (``n < n_x``).
    n_responders_R : float32 (R,)
        n_x, the number of responders of the row's request (0 when unknown).
    drawn_RV : bool (R, V + 1) or None
        Items of the row's scored responder (the drawn one, or the row's own for per-responder rows);
        None when neither ``responder_index`` nor ``responder_items`` was given.
    index_RK : int64 (R, K)
        ``item_RK`` with -1 replaced by the sentinel column V: safe to ``gather`` any (R, V + 1) table.
    """

    item_RK: torch.Tensor
    n_lines_R: torch.Tensor
    seen_RV: torch.Tensor
    counts_RV: torch.Tensor
    member_RNV: torch.Tensor
    responder_mask_RN: torch.Tensor
    n_responders_R: torch.Tensor
    drawn_RV: torch.Tensor | None
    index_RK: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        index = torch.where(self.item_RK >= 0, self.item_RK, torch.full_like(self.item_RK, self.sentinel))
        object.__setattr__(self, "index_RK", index)

    @property
    def n_rows(self) -> int:
        return int(self.item_RK.shape[0])

    @property
    def k(self) -> int:
        return int(self.item_RK.shape[1])

    @property
    def sentinel(self) -> int:
        """Column index of the always-empty sentinel code (gathered for slots with no id)."""
        return int(self.seen_RV.shape[1]) - 1

    @property
    def has_responders(self) -> bool:
        return bool(self.member_RNV.shape[1] > 0)


def _check_len(name: str, seq: Sequence | None, n_rows: int) -> None:
    if seq is not None and len(seq) != n_rows:
        raise ValueError(
            f"{name} has {len(seq)} rows but slot_ids has {n_rows}: pass one entry per completion row"
        )


def encode_rows(
    slot_ids: Sequence[Sequence[Hashable | None]],
    *,
    k: int = 20,
    union: Sequence[Sequence[Hashable]] | None = None,
    counts: Sequence[Sequence[int]] | None = None,
    responders: Sequence[Sequence[Sequence[Hashable]]] | None = None,
    seen: Sequence[Sequence[Hashable]] | None = None,
    responder_index: Sequence[int] | None = None,
    responder_items: Sequence[Sequence[Hashable]] | None = None,
    max_responders: int | None = None,
    group_size: int | None = None,
    request_ids: Sequence[Hashable] | None = None,
) -> EncodedRows:
    """Encode R completion rows for the reward schemes.

    Parameters
    ----------
    slot_ids : R sequences
        Per row, the grounded catalog id of each rank line in order (None for an unparsed or
        ungrounded line). Any length: shorter than K pads with "no id", longer is overflow.
    k : int
        K, the number of scored slots.
    union, counts : R sequences, optional
        The request's distinct ids and c_i aligned with them (pooled ``union`` / ``counts`` columns).
        Derived from ``responders`` when omitted (``counts`` defaults to 1 when only ``union`` is given).
    responders : R sequences of n_x id lists, optional
        The request's responders (pooled ``responders`` column); needed by ``responder_rb``,
        ``marginal`` (n_x) and ``responder_index``. When given with ``counts``, the two must agree.
    seen : R sequences, optional
        Ids already named in the request; never rewarded.
    responder_index : R ints, optional
        The drawn responder of each row (``responder`` scheme); the same within a group
        (one per group: ``remark.scoring.scorer.hashed_responder_index``).
    responder_items : R sequences, optional
        The row's own responder's ids, for per-responder rows (Rank-GRPO's view). Exclusive with
        ``responder_index``.
    max_responders : int, optional
        Pad N to this (so that processes gather equal shapes); default: the largest n_x of these rows.
    group_size, request_ids : optional
        When ``group_size`` is given, R must be a multiple of it and each group of G consecutive rows
        must share its request id (when given) and its drawn responder.

    Returns
    -------
    EncodedRows
    """
    n_rows = len(slot_ids)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    for name, seq in [
        ("union", union),
        ("counts", counts),
        ("responders", responders),
        ("seen", seen),
        ("responder_index", responder_index),
        ("responder_items", responder_items),
        ("request_ids", request_ids),
    ]:
        _check_len(name, seq, n_rows)
    if responder_index is not None and responder_items is not None:
        raise ValueError(
            "pass responder_index (pooled rows) or responder_items (per-responder rows), not both"
        )
    if responder_index is not None and responders is None:
        raise ValueError("responder_index needs responders (the request's responder lists) to index into")
    if counts is not None and union is None:
        raise ValueError("counts were given without union: pass the union ids they are aligned with")
    if union is None and responders is None:
        raise ValueError("pass union (and counts) or responders: without them nothing can be rewarded")
    _check_groups(n_rows, group_size, request_ids, responder_index, responder_items)

    runs = _request_runs(n_rows, (union, counts, responders, seen))
    n_k = [min(len(slots), k) for slots in slot_ids]
    slot_start = np.cumsum([0, *n_k])
    # codes of the request columns' ids: the same for every row of a run (built and checked once)
    bases: list[_RequestCodes] = []
    drawn: list[list[int] | None] = [None] * n_rows
    for r0, r1 in runs:
        base = _RequestCodes.build(
            r0, *(None if col is None else col[r0] for col in (union, counts, responders, seen))
        )
        bases.append(base)
        if responder_index is not None:
            for r in range(r0, r1):
                drawn[r] = base.drawn(r, int(responder_index[r]))
    run_rows = np.array([r1 - r0 for r0, r1 in runs], dtype=np.int64)
    n_base_R = np.repeat(np.array([len(b.codes) for b in bases], dtype=np.int64), run_rows)
    # every id a row adds after its request's: slot ids (then, for per-responder rows, the row's own
    # responder's ids) in order; a base code where the request has the id, else -1 ("new to this row")
    seq, seq_row, seq_start, is_slot = _row_sequences(slot_ids, n_k, k, responder_items)
    code = np.empty(len(seq), dtype=np.int64)
    for (r0, r1), base in zip(runs, bases, strict=True):
        a, b = int(seq_start[r0]), int(seq_start[r1])
        code[a:b] = np.fromiter(map(base.codes.get, seq[a:b], itertools.repeat(-1)), np.int64, count=b - a)
    none_slot = is_slot & np.fromiter(map(operator.is_, seq, itertools.repeat(None)), bool, count=len(seq))
    new = np.flatnonzero((code < 0) & ~none_slot)
    n_new_R = np.zeros(n_rows, dtype=np.int64)
    if new.size:  # row-local codes n_base + 0, 1, ... in order of first appearance within the row
        new_items = [seq[i] for i in new.tolist()]
        ids = dict(zip(dict.fromkeys(new_items), itertools.count()))
        gid = np.fromiter(map(ids.__getitem__, new_items), np.int64, count=len(new_items))
        rows = seq_row[new]
        _, first, inverse = np.unique(rows * len(ids) + gid, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # distinct (row, id) pairs by first position
        pair_row = rows[first[order]]
        row_begin = np.searchsorted(pair_row, pair_row, side="left")
        local = np.empty(len(first), dtype=np.int64)
        local[order] = n_base_R[pair_row] + np.arange(len(first)) - row_begin
        code[new] = local[inverse.reshape(-1)]
        n_new_R = np.bincount(pair_row, minlength=n_rows)
    item = np.full((n_rows, k), -1, dtype=np.int64)
    slot_code = code[is_slot]
    slot_row = np.repeat(np.arange(n_rows), n_k)
    item[slot_row, np.arange(len(slot_row)) - slot_start[slot_row]] = np.where(
        none_slot[is_slot], -1, slot_code
    )
    if responder_items is not None:  # the row's own responder's ids: the tail of its sequence
        drawn_r, drawn_v = seq_row[~is_slot], code[~is_slot]
    elif responder_index is not None:
        lens = [len(d) for d in drawn]  # type: ignore[arg-type]
        drawn_r = np.repeat(np.arange(n_rows), lens)
        drawn_v = np.fromiter(itertools.chain.from_iterable(drawn), np.int64, count=sum(lens))  # type: ignore[arg-type]
    n_codes = n_base_R + n_new_R
    n_lines = [len(slots) for slots in slot_ids]
    n_resp = np.repeat(np.array([b.n_resp for b in bases], dtype=np.int64), run_rows).tolist()
    run_of_row = np.repeat(np.arange(len(runs)), run_rows)
    member_j, member_n, member_v = _per_run(bases, "member_n", "member_v")
    count_j, count_v, count_c = _per_run(bases, "count_v", "count_c")
    seen_j, seen_v = _per_run(bases, "seen_v")

    n_max = max(n_resp, default=0)
    if max_responders is not None:
        if max_responders < n_max:
            raise ValueError(
                f"max_responders={max_responders} is below the largest n_x in these rows ({n_max})"
            )
        n_max = max_responders
    width = int(n_codes.max(initial=0)) + 1  # + sentinel column
    # the request part of each table, one entry per run, then gathered for the run's rows (numpy: a
    # few small arrays, where torch's indexing costs more per call; the tensors share their memory)
    seen_RV = _bool_table((len(runs), width), seen_j, seen_v)[run_of_row]
    member_RNV = _bool_table((len(runs), n_max, width), member_j, member_n, member_v)[run_of_row]
    counts_RV = np.zeros((len(runs), width), dtype=np.float32)
    counts_RV[count_j, count_v] = count_c
    counts_RV = counts_RV[run_of_row]
    if not count_j and responders is not None and counts is None:
        counts_RV = member_RNV.sum(1, dtype=np.float32)
    if responders is not None and counts is not None:
        bad = np.flatnonzero((member_RNV.sum(1, dtype=np.float32) != counts_RV).any(1))
        if bad.size:
            r = int(bad[0])
            raise ValueError(
                f"row {r}: counts {list(counts[r])} disagree with the responders' lists (c_i must be the number "
                f"of responders naming union[i]); {bad.size} rows disagree"
            )
    resp_n = np.asarray(n_resp, dtype=np.int64)
    return EncodedRows(
        item_RK=torch.from_numpy(item),
        n_lines_R=torch.tensor(n_lines, dtype=torch.int64),
        seen_RV=torch.from_numpy(seen_RV),
        counts_RV=torch.from_numpy(counts_RV),
        member_RNV=torch.from_numpy(member_RNV),
        responder_mask_RN=torch.from_numpy(np.arange(n_max)[None, :] < resp_n[:, None]),
        n_responders_R=torch.from_numpy(resp_n.astype(np.float32)),
        drawn_RV=None
        if responder_index is None and responder_items is None
        else torch.from_numpy(_bool_table((n_rows, width), drawn_r, drawn_v)),
    )


def _request_runs(n_rows: int, columns: tuple) -> list[tuple[int, int]]:
    """[r0, r1) runs of consecutive rows whose request columns are equal (a group's G rows share theirs)."""
    cuts = [0]
    same = [True] * max(n_rows - 1, 0)
    for col in columns:
        if col is not None:
            same = [s and _same(a, b) for s, a, b in zip(same, col[1:], col[:-1])]
    cuts += [r + 1 for r, s in enumerate(same) if not s]
    return list(zip(cuts, [*cuts[1:], n_rows])) if n_rows else []


def _same(x: Any, y: Any) -> bool:
    """Two rows' column values are the same object or equal (then so are their codes)."""
    try:
        return x is y or bool(x == y)
    except (TypeError, ValueError):  # e.g. arrays: compared as different
        return False


def _row_sequences(
    slot_ids: Sequence[Sequence[Hashable | None]],
    n_k: list[int],
    k: int,
    responder_items: Sequence[Sequence[Hashable]] | None,
) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
    """The ids each row adds after its request's, end to end: its first K slot ids, then (per-responder
    rows) its own responder's ids. Returns (ids, row of each, start of each row (R + 1), is-a-slot)."""
    if responder_items is None:
        seq = list(itertools.chain.from_iterable(slots[:k] for slots in slot_ids))
        lens = np.asarray(n_k, dtype=np.int64)
        return seq, np.repeat(np.arange(len(n_k)), lens), np.cumsum([0, *n_k]), np.ones(len(seq), dtype=bool)
    seq, flags, lens_l = [], [], []
    for slots, own in zip(slot_ids, responder_items, strict=True):
        head = list(slots[:k])
        seq += head + list(own)
        flags += [True] * len(head) + [False] * len(own)
        lens_l.append(len(head) + len(own))
    lens = np.asarray(lens_l, dtype=np.int64)
    return seq, np.repeat(np.arange(len(lens)), lens), np.cumsum([0, *lens_l]), np.asarray(flags, dtype=bool)


def _per_run(bases: list[_RequestCodes], *fields: str) -> list[list[int]]:
    """(run, field...) index lists of a table that every row of a run takes from its request's codes."""
    parts: list[list[int]] = [[] for _ in range(len(fields) + 1)]
    for j, base in enumerate(bases):
        values = [getattr(base, f) for f in fields]
        parts[0] += [j] * len(values[0])
        for part, v in zip(parts[1:], values, strict=True):
            part += v
    return parts


@dataclass
class _RequestCodes:
    """The part of a row's code space that its request's columns fix (union, responders, seen), with the
    table entries they make; rows of one request copy it and add their slot ids."""

    codes: dict[Hashable, int]
    responders: Sequence[Sequence[Hashable]] | None
    n_resp: int
    member_n: list[int]
    member_v: list[int]
    count_v: list[int]
    count_c: list[int]
    seen_v: list[int]
    _drawn: dict[int, list[int]] = field(default_factory=dict)

    @classmethod
    def build(cls, r: int, union_r: Any, counts_r: Any, resp_r: Any, seen_r: Any) -> _RequestCodes:
        """Codes of row ``r``'s request columns, checked (errors name row ``r``)."""
        codes: dict[Hashable, int] = {}
        if union_r is not None:
            for item in union_r:
                codes.setdefault(item, len(codes))
            if len(codes) != len(union_r):
                raise ValueError(f"row {r}: union has repeated ids; it must list distinct ids")
        member_n: list[int] = []
        member_v: list[int] = []
        if resp_r is not None:
            for n, items in enumerate(resp_r):
                for item in items:
                    if item is None:
                        raise ValueError(f"row {r}: responder {n} has a None id; keep only grounded ids")
                    member_n.append(n)
                    member_v.append(codes.setdefault(item, len(codes)))
        if union_r is not None and len(codes) != len(union_r):
            raise ValueError(
                f"row {r}: a responder named an id that is not in the union; the union must hold every responder's ids"
            )
        n_union = len(codes)
        count_v: list[int] = []
        count_c: list[int] = []
        if counts_r is not None:
            if len(counts_r) != len(union_r):
                raise ValueError(f"row {r}: counts has {len(counts_r)} entries for {len(union_r)} union ids")
            for v, c in enumerate(counts_r):
                if c < 0:
                    raise ValueError(f"row {r}: negative count {c} for union id {union_r[v]!r}")
                count_v.append(v)
                count_c.append(int(c))
        elif resp_r is None:
            count_v, count_c = list(range(n_union)), [1] * n_union
        seen_v = [] if seen_r is None else [codes.setdefault(i, len(codes)) for i in seen_r if i is not None]
        n_resp = 0 if resp_r is None else len(resp_r)
        return cls(codes, resp_r, n_resp, member_n, member_v, count_v, count_c, seen_v)

    def drawn(self, r: int, i: int) -> list[int]:
        """Codes of responder ``i``'s items (row ``r``'s ``responder_index``; errors name row ``r``)."""
        got = self._drawn.get(i)
        if got is None:
            if not 0 <= i < self.n_resp:
                raise ValueError(f"row {r}: responder_index {i} is out of range for {self.n_resp} responders")
            got = self._drawn[i] = [self.codes[item] for item in self.responders[i]]  # type: ignore[index]
        return got


def _bool_table(shape: tuple[int, ...], *index: Sequence[int] | np.ndarray) -> np.ndarray:
    """bool ``shape``, True at the positions given by one index list per dimension."""
    out = np.zeros(shape, dtype=bool)
    out[tuple(np.asarray(ix, dtype=np.int64) for ix in index)] = True
    return out


def _check_groups(
    n_rows: int,
    group_size: int | None,
    request_ids: Sequence[Hashable] | None,
    responder_index: Sequence[int] | None,
    responder_items: Sequence[Sequence[Hashable]] | None,
) -> None:
    if group_size is None:
        return
    if group_size < 1 or n_rows % group_size:
        raise ValueError(
            f"{n_rows} rows do not split into groups of group_size={group_size} consecutive rows"
        )
    for name, seq in [("request_ids", request_ids), ("responder_index", responder_index)]:
        if seq is None:
            continue
        for start in range(0, n_rows, group_size):
            group = seq[start : start + group_size]
            if any(x != group[0] for x in group):
                raise ValueError(
                    f"rows {start}..{start + group_size - 1} form one group but have different {name}: "
                    f"{list(group)}; groups must be G consecutive rows of one request, scored against one responder"
                )
    if responder_items is not None:
        for start in range(0, n_rows, group_size):
            first = set(responder_items[start])
            if any(set(responder_items[i]) != first for i in range(start, start + group_size)):
                raise ValueError(
                    f"rows {start}..{start + group_size - 1} form one group but have different responder_items"
                )
