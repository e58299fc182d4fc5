"""Pure, vectorised ranking metrics: eligibility, compaction, hit matrices, recall/NDCG/precision/hit@k.

Everything here works on integer item codes (``-1`` = an empty slot: unparsed, ungrounded or padding) and
numpy arrays; no I/O, no strings, no Python loops over rows. :mod:`eval.views` turns pooled requests and
lists of catalog ids into these arrays.

Definitions (design.md, "Metrics"), for a row with target set ``T`` and its list's first ``k`` slots:

- ``recall@k    = |top_k ∩ T| / |T|``
- ``precision@k = |top_k ∩ T| / k`` (``k`` even when the list is shorter)
- ``hit@k       = 1[|top_k ∩ T| > 0]``
- ``ndcg@k      = DCG@k / IDCG@k``, ``DCG@k = sum_{i<=k} hit_i d_i``, ``d_1 = 1``, ``d_i = 1/log2(i+1)``,
  ``IDCG@k = sum_{i <= min(|T|, k)} d_i``.

A row with ``|T| = 0`` has no defined metric: it gets NaN, and callers exclude and count it.

Eligibility ``e_k = 1`` iff slot k holds an item (``id >= 0``), the item is not in the request's ``seen``
set, and it is not a repeat of an earlier slot of the same list (a repeat counts once).

Departures from Rank-GRPO, and why:

- Rank-GRPO's eval *compacts* (drops seen and out-of-catalog items before cutting at k) while its training
  reward keeps positions. Both are offered here (``compact=True`` / ``False``) and outputs say which.
  Compaction also drops repeats, so "the first k grounded, eligible items" is literal; without compaction a
  repeat keeps its slot and scores 0 (Rank-GRPO's count decrement).
- Rank-GRPO reports no uncertainty; per-row values are returned so :mod:`eval.bootstrap` can resample
  requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

MetricName = Literal["recall", "ndcg", "precision", "hit"]
METRICS: tuple[MetricName, ...] = ("recall", "ndcg", "precision", "hit")
DEFAULT_KS: tuple[int, ...] = (5, 10, 15, 20)


def check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    """Validate cut-offs: positive integers, returned sorted and distinct."""
    out = sorted({int(k) for k in ks})
    if not out or out[0] < 1:
        raise ValueError(f"cut-offs k must be positive integers, got {list(ks)!r}")
    return tuple(out)


def check_metrics(metrics: Sequence[str]) -> tuple[MetricName, ...]:
    """Validate metric names against :data:`METRICS` (the error lists the valid names)."""
    bad = [m for m in metrics if m not in METRICS]
    if bad or not metrics:
        raise ValueError(f"unknown metric(s) {bad or list(metrics)!r}; valid: {', '.join(METRICS)}")
    return tuple(dict.fromkeys(metrics))  # type: ignore[arg-type]


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


def apply_eligibility(ids_LK: np.ndarray, eligible_LK: np.ndarray, *, compact: bool) -> np.ndarray:
    """Slots that count, as codes (-1 = scores nothing), shape ``(L, K)``.

    ``compact=True``: eligible items moved left in order (Rank-GRPO's eval: the first k eligible items);
    ``compact=False``: positions kept, ineligible slots set to -1 (Rank-GRPO's training reward).
    """
    ids = np.asarray(ids_LK, dtype=np.int64)
    elig = np.asarray(eligible_LK, dtype=bool)
    if not compact:
        return np.where(elig, ids, -1)
    out = np.full_like(ids, -1)
    pos = np.cumsum(elig, axis=1) - 1
    rows, cols = np.nonzero(elig)
    out[rows, pos[rows, cols]] = ids[rows, cols]
    return out


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
    as misses. Rows with ``|T_r| = 0`` get NaN for every metric.

    >>> h = np.array([[1, 0, 1]], dtype=bool)
    >>> {k: round(float(v[0]), 4) for k, v in metrics_at_k(h, np.array([2]), ks=[2]).items()}
    {'recall@2': 0.5, 'ndcg@2': 0.6131, 'precision@2': 0.5, 'hit@2': 1.0}
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
    d = discounts(kmax)
    dcg = np.cumsum(hits * d, axis=1)
    idcg_table = np.concatenate([[0.0], np.cumsum(d)])  # idcg_table[m] = sum of the first m weights
    denom = np.where(valid, n_t, 1).astype(np.float64)
    out: dict[str, np.ndarray] = {}
    for k in ks:
        c = cum[:, k - 1]
        values = {
            "recall": c / denom,
            "precision": c / k,
            "hit": (c > 0).astype(np.float64),
            "ndcg": dcg[:, k - 1] / idcg_table[np.clip(np.minimum(n_t, k), 1, None)],
        }
        for name in names:
            out[f"{name}@{k}"] = np.where(valid, values[name], np.nan)
    # keep the documented order: metric-major, then k
    return {f"{m}@{k}": out[f"{m}@{k}"] for m in names for k in ks}
