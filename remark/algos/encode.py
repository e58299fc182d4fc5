"""Grounded completion rows + request fields -> the padded tensors that the reward schemes take.

Rows are completion rows (R = B * G, groups of G consecutive rows, TRL's layout). Each row gets a
private integer code space: the request's union items first (codes ``0 .. U_r - 1``, in union order),
then every other id the row mentions (seen ids, slot ids, responder items) in first-seen order. All
per-code tables carry one extra *sentinel* column at index ``V`` (= padded code-space size) that is
always empty, so a slot with no id (code -1) gathers zeros and no reward function needs a branch.

This is the only place that touches strings; the rewards (``remark.algos.rewards``) are tensor
gathers and compares on what this module returns. Encoding costs one dictionary look-up per id; the
part of a row's code space that its request fixes (union, responders, seen: the same for a group's G
rows) is built and checked once per run of rows with equal request columns and copied to each row,
which then adds its slot ids (issue 13; the same codes and tables as building every row on its own,
tests/algos/test_encode_requests.py).

Departure from Rank-GRPO: it matched titles per row against the responder's ground truth with a
decrementing count; here grounding happens first (catalog ids, docs/method.md#parsing-and-grounding) and
a repeat of an earlier slot's id is never eligible, which is the same rule stated on ids.
"""

from __future__ import annotations

import itertools
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
        (one per group: ``remark.scoring.hashed_responder_index``).
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

    item_RK = [[-1] * k for _ in range(n_rows)]
    n_lines: list[int] = []
    n_resp: list[int] = []
    n_codes: list[int] = []
    # index lists of the tables (row, [responder,] code[, count]), filled per row
    seen_r: list[int] = []
    seen_v: list[int] = []
    count_r: list[int] = []
    count_v: list[int] = []
    count_c: list[int] = []
    member_r: list[int] = []
    member_n: list[int] = []
    member_v: list[int] = []
    drawn_r: list[int] = []
    drawn_v: list[int] = []
    key: tuple = ()
    base: _RequestCodes | None = None
    for r in range(n_rows):
        prev, key = key, tuple(None if col is None else col[r] for col in (union, counts, responders, seen))
        if base is None or not _same_request(key, prev):  # a group's G rows share their request's columns
            base = _RequestCodes.build(r, *key)
        codes = base.codes.copy()
        if base.member_v:
            member_r += [r] * len(base.member_v)
            member_n += base.member_n
            member_v += base.member_v
        if base.count_v:
            count_r += [r] * len(base.count_v)
            count_v += base.count_v
            count_c += base.count_c
        if base.seen_v:
            seen_r += [r] * len(base.seen_v)
            seen_v += base.seen_v
        n_resp.append(base.n_resp)
        slots = slot_ids[r]
        n_lines.append(len(slots))
        row = item_RK[r]
        for j, item in enumerate(slots[:k]):
            if item is not None:
                row[j] = codes.setdefault(item, len(codes))
        if responder_index is not None:
            drawn = base.drawn(r, int(responder_index[r]))
        elif responder_items is not None:
            drawn = [codes.setdefault(item, len(codes)) for item in responder_items[r]]
        else:
            drawn = []
        drawn_r += [r] * len(drawn)
        drawn_v += drawn
        n_codes.append(len(codes))

    n_max = max(n_resp, default=0)
    if max_responders is not None:
        if max_responders < n_max:
            raise ValueError(
                f"max_responders={max_responders} is below the largest n_x in these rows ({n_max})"
            )
        n_max = max_responders
    width = max(n_codes, default=0) + 1  # + sentinel column
    seen_RV = _bool_table((n_rows, width), seen_r, seen_v)
    member_RNV = _bool_table((n_rows, n_max, width), member_r, member_n, member_v)
    counts_RV = torch.zeros(n_rows, width, dtype=torch.float32)
    if count_r:
        counts_RV[_ints(count_r), _ints(count_v)] = _ints(count_c).to(torch.float32)
    elif responders is not None and counts is None:
        counts_RV = member_RNV.to(torch.float32).sum(1)
    if responders is not None and counts is not None:
        derived = member_RNV.to(torch.float32).sum(1)
        bad = (derived != counts_RV).any(1).nonzero().flatten()
        if bad.numel():
            r = int(bad[0])
            raise ValueError(
                f"row {r}: counts {list(counts[r])} disagree with the responders' lists (c_i must be the number "
                f"of responders naming union[i]); {bad.numel()} rows disagree"
            )
    resp_n = torch.tensor(n_resp, dtype=torch.int64)
    return EncodedRows(
        item_RK=_int_table(item_RK, k).reshape(n_rows, k),
        n_lines_R=torch.tensor(n_lines, dtype=torch.int64),
        seen_RV=seen_RV,
        counts_RV=counts_RV,
        member_RNV=member_RNV,
        responder_mask_RN=torch.arange(n_max)[None, :] < resp_n[:, None],
        n_responders_R=resp_n.to(torch.float32),
        drawn_RV=None
        if responder_index is None and responder_items is None
        else _bool_table((n_rows, width), drawn_r, drawn_v),
    )


def _same_request(a: tuple, b: tuple) -> bool:
    """The request columns of two rows are the same objects or equal (then so are their codes)."""
    if len(a) != len(b):
        return False
    try:
        return all(x is y or bool(x == y) for x, y in zip(a, b, strict=True))
    except (TypeError, ValueError):  # e.g. arrays: compared as different
        return False


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


def _ints(values: list[int]) -> torch.Tensor:
    return torch.from_numpy(np.fromiter(values, dtype=np.int64, count=len(values)))


def _int_table(rows: list, width: int) -> torch.Tensor:
    """int64 (len(rows), width) from equal-length int sequences (``torch.tensor`` of the list, without its
    per-element cost: one ``np.fromiter`` over the flattened ints)."""
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=len(rows) * width)
    return torch.from_numpy(flat.reshape(len(rows), width))


def _bool_table(shape: tuple[int, ...], *index: list[int]) -> torch.Tensor:
    """bool ``shape``, True at the positions given by one index list per dimension."""
    out = torch.zeros(shape, dtype=torch.bool)
    if index[0]:
        out[tuple(_ints(ix) for ix in index)] = True
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
