"""Pure, vectorised ranking metrics: eligibility, slot filters, hit matrices, recall/NDCG/precision/hit/MRR@k.

Everything here works on integer item codes (``-1`` = an empty slot: unparsed, ungrounded or padding) and
numpy arrays; no I/O, no strings, no Python loops over rows. :mod:`eval.views` turns pooled requests and
lists of catalog ids into these arrays. docs/metrics.md has every definition with its references.

Definitions, for a row with target set ``T`` and the first ``k`` counted slots of its list:

- ``recall@k    = |top_k ∩ T| / |T|``
- ``precision@k = |top_k ∩ T| / k`` (``k`` even when the list is shorter)
- ``hit@k       = 1[|top_k ∩ T| > 0]``
- ``mrr@k       = 1 / rank of the first slot in top_k that is in T`` (0 when none is)
- ``ndcg@k      = DCG@k / IDCG@k``, ``DCG@k = sum_{i<=k} hit_i d_i``, ``d_1 = 1``, ``d_i = 1/log2(i+1)``,
  ``IDCG@k = sum_{i <= min(|T|, k)} d_i``.

A row with ``|T| = 0`` has no defined metric: it gets NaN, and callers exclude and count it.
With one target item (``|T| = 1``, the CRS references' rows) hit@k = recall@k and mrr@k, ndcg@k are the
reciprocal rank and ``1/log2(rank+1)`` of that item, as in CRSLab and He et al. (CIKM'23).

Eligibility ``e_k = 1`` iff slot k holds an item (``id >= 0``), the item is not in the request's ``seen``
set, and it is not a repeat of an earlier slot of the same list (a repeat counts once). An ineligible slot
never scores; a *slot filter* (:data:`FILTERS`) says which ineligible slots are dropped from the list
before it is cut at k and which keep their rank:

- ``ooc`` slots hold no catalog item (did not parse, or grounded to nothing: out of catalog);
- ``seen`` slots hold an item already mentioned, in the request or earlier in the same list.

==================  =========  ==========  ==============================================
filter              ooc slots  seen slots  also known as
==================  =========  ==========  ==============================================
``drop_ooc_seen``   dropped    dropped     ``compact=True``; Rank-GRPO's eval; He et al.
                                           filtered=True, exclude_seen=True
``drop_ooc``        dropped    kept        He et al. filtered=True, exclude_seen=False
``drop_seen``       kept       dropped     He et al. filtered=False, exclude_seen=True
``drop_none``       kept       kept        ``compact=False``; Rank-GRPO's training reward
==================  =========  ==========  ==============================================

Departures from the references, and why:

- Rank-GRPO's eval *compacts* (drops seen and out-of-catalog items before cutting at k) while its training
  reward keeps positions; He et al. report each of the four combinations. All four are here, by name.
- An in-list repeat counts as a seen item (already mentioned, earlier in the list): it is dropped with
  the seen items or keeps its slot with them, and never scores twice. Rank-GRPO's eval and He et al. keep
  repeats as wasted slots even when they filter; so with ``drop_ooc_seen`` a list with repeats can score
  higher here (its later items move up). ``list/distinct`` in the views shows how often lists repeat.
- He et al. map every generated title to its nearest catalog title, so with their ``filtered=False`` a
  title far from any catalog item can still hit; here an ungrounded slot never scores.
- Rank-GRPO reports no uncertainty; per-row values are returned so :mod:`eval.bootstrap` can resample
  requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from eval.metric_registry import METRICS, CutCounts, metric

#: a name of ``eval.metric_registry.METRIC_REGISTRY``
MetricName = str
DEFAULT_KS: tuple[int, ...] = (5, 10, 15, 20)
#: The largest cut-off (CRSLab reports up to 50; the prompt asks the model for max(k) items).
MAX_K = 50


@dataclass(frozen=True)
class SlotFilter:
    """Which ineligible slots are dropped from a list before the cut at k (the others keep their rank)."""

    name: str
    drop_ooc: bool
    """Drop slots without a catalog item (unparsed or ungrounded: out of catalog)."""
    drop_seen: bool
    """Drop slots whose item was already mentioned (in the request's ``seen``, or earlier in the list)."""


#: The four named filters (He et al.'s {filtered} x {exclude_seen}), by name; the module docstring's table.
FILTERS: dict[str, SlotFilter] = {
    f.name: f
    for f in (
        SlotFilter("drop_ooc_seen", drop_ooc=True, drop_seen=True),
        SlotFilter("drop_ooc", drop_ooc=True, drop_seen=False),
        SlotFilter("drop_seen", drop_ooc=False, drop_seen=True),
        SlotFilter("drop_none", drop_ooc=False, drop_seen=False),
    )
}


def filter_for(compact: bool) -> SlotFilter:
    """The filter of the historical ``compact`` switch: True -> ``drop_ooc_seen``, False -> ``drop_none``."""
    return FILTERS["drop_ooc_seen" if compact else "drop_none"]


def check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    """Validate cut-offs: integers in ``[1, MAX_K]``, returned sorted and distinct."""
    out = sorted({int(k) for k in ks})
    if not out or out[0] < 1 or out[-1] > MAX_K:
        raise ValueError(f"cut-offs k must be integers from 1 to {MAX_K}, got {list(ks)!r}")
    return tuple(out)


def check_filters(names: Sequence[str]) -> tuple[str, ...]:
    """Validate slot-filter names against :data:`FILTERS` (the error lists the valid names)."""
    bad = [n for n in names if n not in FILTERS]
    if bad:
        raise ValueError(f"unknown slot filter(s) {bad!r}; valid: {', '.join(FILTERS)}")
    return tuple(dict.fromkeys(names))


def check_metrics(metrics: Sequence[str]) -> tuple[MetricName, ...]:
    """Validate metric names against ``eval.metric_registry.METRICS`` (the error lists the valid names)."""
    bad = [m for m in metrics if m not in METRICS]
    if bad or not metrics:
        raise ValueError(f"unknown metric(s) {bad or list(metrics)!r}; valid: {', '.join(METRICS)}")
    return tuple(dict.fromkeys(metrics))


def pad_lists(codes: np.ndarray, lengths: np.ndarray, width: int | None = None) -> np.ndarray:
    """Ragged lists of codes -> a dense ``(L, W)`` matrix padded with -1.

    ``codes`` is the concatenation of L lists (shape ``(sum(lengths),)``), ``lengths`` shape ``(L,)``.
    ``W = max(lengths)`` unless ``width`` is given (longer lists are cut, shorter ones padded).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n_lists = lengths.shape[0]
    full_w = int(lengths.max(initial=0))
    w = full_w if width is None else int(width)
    out = np.full((n_lists, w), -1, dtype=np.int64)
    if codes.size == 0 or w == 0:
        return out
    starts = np.cumsum(lengths) - lengths
    row = np.repeat(np.arange(n_lists), lengths)
    col = np.arange(codes.shape[0]) - np.repeat(starts, lengths)
    keep = col < w
    out[row[keep], col[keep]] = codes[keep]
    return out


def pair_keys(group_G: np.ndarray, item_G: np.ndarray, n_items: int) -> np.ndarray:
    """Encode (group, item) pairs as one int64 key ``group * n_items + item`` (shapes broadcast)."""
    return np.asarray(group_G, dtype=np.int64) * np.int64(n_items) + np.asarray(item_G, dtype=np.int64)


def eligibility(ids_LK: np.ndarray, group_L: np.ndarray, seen_keys: np.ndarray, n_items: int) -> np.ndarray:
    """Eligible slots ``e_LK`` (bool): an item, not seen by the list's request, first occurrence in the list.

    ``ids_LK`` int codes (-1 empty); ``group_L`` the request index of each list; ``seen_keys`` the
    :func:`pair_keys` of (request index, seen item) pairs; ``n_items`` the code range.
    """
    ids = np.asarray(ids_LK, dtype=np.int64)
    n_lists, width = ids.shape
    has = ids >= 0
    seen = np.isin(pair_keys(np.asarray(group_L)[:, None], ids, n_items), seen_keys) & has
    # first occurrence of each (list, item): np.unique returns the first flat (row-major) index.
    list_keys = pair_keys(np.arange(n_lists)[:, None], np.where(has, ids, n_items), n_items + 1)
    first = np.zeros(n_lists * width, dtype=bool)
    first[np.unique(list_keys.ravel(), return_index=True)[1]] = True
    return has & ~seen & first.reshape(n_lists, width)


def filter_slots(ids_LK: np.ndarray, eligible_LK: np.ndarray, slot_filter: SlotFilter) -> np.ndarray:
    """Slots that count after a filter, as codes (-1 = scores nothing), shape ``(L, K)``.

    With ``ooc = id < 0`` and ``seen = id >= 0 and not eligible`` (seen by the request, or a repeat):
    ``dropped = (drop_ooc and ooc) or (drop_seen and seen)``. The kept slots move left in order
    (position ``cumsum(kept) - 1``); a kept slot holds its id if eligible, else -1 (a rank that scores 0).
    """
    ids = np.asarray(ids_LK, dtype=np.int64)
    elig = np.asarray(eligible_LK, dtype=bool)
    has = ids >= 0
    dropped = np.zeros_like(elig)
    if slot_filter.drop_ooc:
        dropped |= ~has
    if slot_filter.drop_seen:
        dropped |= has & ~elig
    out = np.full_like(ids, -1)
    pos = np.cumsum(~dropped, axis=1) - 1
    rows, cols = np.nonzero(elig & ~dropped)
    out[rows, pos[rows, cols]] = ids[rows, cols]
    return out


def apply_eligibility(ids_LK: np.ndarray, eligible_LK: np.ndarray, *, compact: bool) -> np.ndarray:
    """:func:`filter_slots` with :func:`filter_for` ``(compact)``; shape ``(L, K)``.

    ``compact=True``: eligible items moved left in order (Rank-GRPO's eval: the first k eligible items);
    ``compact=False``: positions kept, ineligible slots set to -1 (Rank-GRPO's training reward).
    """
    return filter_slots(ids_LK, eligible_LK, filter_for(compact))


def hit_matrix(
    slots_RK: np.ndarray, target_group_R: np.ndarray, target_keys: np.ndarray, n_items: int
) -> np.ndarray:
    """``hits_RK[r, k] = 1[slots[r, k] in T_r]`` (bool) for rows with targets given as pair keys.

    ``slots_RK`` the counted slots of each row's list (-1 = nothing), ``target_group_R`` the target-set
    index of each row, ``target_keys`` the :func:`pair_keys` of (target-set index, item).
    """
    slots = np.asarray(slots_RK, dtype=np.int64)
    keys = pair_keys(np.asarray(target_group_R)[:, None], slots, n_items)
    return np.isin(keys, target_keys) & (slots >= 0)


def discounts(k: int) -> np.ndarray:
    """DCG weights ``d_i`` for ranks 1..k: 1 at rank 1, ``1/log2(i+1)`` after; shape ``(k,)``."""
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def metrics_at_k(
    hits_RK: np.ndarray,
    n_target_R: np.ndarray,
    ks: Sequence[int] = DEFAULT_KS,
    metrics: Sequence[str] = METRICS,
) -> dict[str, np.ndarray]:
    """Per-row metrics from a hit matrix: ``{"recall@10": (R,) float64, ...}``.

    ``hits_RK`` bool/0-1, ``n_target_R`` = ``|T_r|`` (ints). Lists shorter than k count missing slots
    as misses. Rows with ``|T_r| = 0`` get NaN for every metric. Each metric's value comes from its
    ``eval.metric_registry`` entry, given the hits in the first k slots, the first hit's index, DCG@k and
    IDCG@min(|T|, k).

    >>> h = np.array([[0, 1, 1]], dtype=bool)
    >>> {k: round(float(v[0]), 4) for k, v in metrics_at_k(h, np.array([2]), ks=[2]).items()}
    {'recall@2': 0.5, 'ndcg@2': 0.3869, 'precision@2': 0.5, 'hit@2': 1.0, 'mrr@2': 0.5}
    """
    ks = check_ks(ks)
    names = check_metrics(metrics)
    hits = np.asarray(hits_RK, dtype=np.float64)
    n_rows = hits.shape[0]
    kmax = ks[-1]
    if hits.shape[1] < kmax:
        hits = np.pad(hits, ((0, 0), (0, kmax - hits.shape[1])))
    hits = hits[:, :kmax]
    n_t = np.asarray(n_target_R, dtype=np.int64)
    if n_t.shape != (n_rows,):
        raise ValueError(f"n_target_R has shape {n_t.shape}, expected ({n_rows},)")
    valid = n_t > 0
    cum = np.cumsum(hits, axis=1)  # (R, kmax): hits within the first i+1 slots
    first = np.argmax(hits > 0, axis=1)  # (R,): 0-based index of the first hit (0 when there is none)
    d = discounts(kmax)
    dcg = np.cumsum(hits * d, axis=1)
    idcg_table = np.concatenate([[0.0], np.cumsum(d)])  # idcg_table[m] = sum of the first m weights
    denom = np.where(valid, n_t, 1).astype(np.float64)
    out: dict[str, np.ndarray] = {}
    for k in ks:
        counts = CutCounts(
            k=k,
            hits=cum[:, k - 1],
            n_targets=denom,
            first=first.astype(np.float64),
            dcg=dcg[:, k - 1],
            idcg=idcg_table[np.clip(np.minimum(n_t, k), 1, None)],
        )
        for name in names:
            out[f"{name}@{k}"] = np.where(valid, metric(name).value(counts), np.nan)
    # keep the documented order: metric-major, then k
    return {f"{m}@{k}": out[f"{m}@{k}"] for m in names for k in ks}
