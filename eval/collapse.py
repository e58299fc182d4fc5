"""List diversity and popularity: does a model give every request the same few items?

Ranking metrics average over requests, so a model that writes one list for every request (the same word
ten times, or the training set's most popular items) can score a plausible recall while answering no
request in particular. The metrics here look at the lists of one model across its requests, not at one
list against its targets. Each is a registered :class:`CollapseMetric` (name, formula, note, function) of
:data:`COLLAPSE_REGISTRY`, in report order; docs/metrics.md's table ("List collapse and popularity") is
:func:`collapse_table_markdown`.

Inputs (:func:`collapse_report`): L lists of catalog item ids, as eval grounds them (``None`` for a slot
that did not parse or ground), the list length K, the catalog size N and the training popularity
``m(i)`` (the number of training responders who named item ``i``: ``counts`` summed over the training
requests' ``union``, as ``eval.baselines.train_popularity_lists`` ranks them;
:func:`train_counts_from_requests`). Every metric reads the *window* of each list: its first K filled
slots, in order. An ungrounded slot (``None``) is excluded first (it holds no item: it is counted in
``n_ungrounded_slots`` and never enters a metric), so a list of ten ungrounded lines is an empty window.
Seen items are not removed (they are recommendations too). With several lists per request (samples),
every metric is over all L lists.

Notation: ``x_{l,j}`` the item of window slot ``j`` of list ``l`` (``j <= n_l <= K``, ``n_l`` the
filled slots), ``d_l`` the distinct items of list ``l``'s window, ``c_i = sum_{l,j} 1[x_{l,j} = i]`` the
recommendation count of item ``i`` over all windows (repeats within a list counted), ``S = sum_i c_i``,
``p_i = m(i) / sum_i' m(i')`` item ``i``'s share of the training mentions (0 for an item no training
responder named).

:func:`collapse_warning` turns a report into one plain sentence when the lists collapse (its docstring
states the rule); ``remark eval score``, ``eval run`` and ``eval compare`` print it as ``warning: ...``
and record the report as ``collapse`` in ``metrics.json``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
import polars as pl

from data_prep.catalog_splits import item_mentions
from eval.metrics import eligibility, pad_lists, pair_keys

#: the collapse rule's thresholds (:func:`collapse_warning`)
REPEAT_SHARE_LIMIT = 0.5
SAME_LIST_SHARE_LIMIT = 0.5
#: rule (c) applies where the windows could have held this many lists' worth of distinct items
COVERAGE_LISTS = 3


@dataclass(frozen=True)
class CollapseInput:
    """The lists of one model, encoded for the metric functions.

    ``ids_LK``: int64 ``(L, K)``, item codes of each list's window (its first K filled slots, in order),
    -1 after the window's last filled slot; ``k`` = K; ``n_items`` = N, the catalog size; ``share_V``:
    float64 ``(V,)``, ``p_i`` per item code (V codes: every item of the lists, the training counts and the
    targets); ``head_V``: bool ``(V,)``, the H items training responders named most; ``hit_LK``: bool
    ``(L, K)``, window slot holds the first occurrence in its list of an item of its request's targets
    (None without targets); ``has_train``: whether training counts were given (else the popularity
    metrics are None).
    """

    ids_LK: np.ndarray
    k: int
    n_items: int
    share_V: np.ndarray
    head_V: np.ndarray
    hit_LK: np.ndarray | None
    has_train: bool


@dataclass(frozen=True)
class CollapseMetric:
    """One collapse metric: ``formula`` and ``note`` as docs/metrics.md prints them, ``function(x)`` its
    value (a float, or None where it is undefined) from a :class:`CollapseInput`."""

    name: str
    formula: str
    note: str
    function: Callable[[CollapseInput], float | None]


def _counts_V(x: CollapseInput) -> np.ndarray:
    """``c_i`` per item code, shape ``(V,)`` (int64): window slots holding the item, repeats counted."""
    ids = x.ids_LK[x.ids_LK >= 0]
    return np.bincount(ids, minlength=x.share_V.shape[0])


def distinct_L(ids_LK: np.ndarray) -> np.ndarray:
    """``abs(d_l)`` per list, shape ``(L,)`` (int64), from codes ``(L, K)`` (-1 = empty): a row sorted, an
    item counted where it differs from its left neighbour."""
    s = np.sort(ids_LK, axis=1)
    new = s >= 0
    new[:, 1:] &= s[:, 1:] != s[:, :-1]
    return new.sum(axis=1)


def coverage(x: CollapseInput) -> float | None:
    """Catalog coverage ``abs(union_l d_l) / N``: the distinct items of all windows over the catalog size.
    ``ids_LK (L, K)`` -> a float in ``[0, min(N, K L) / N]``; None for an empty catalog."""
    if x.n_items <= 0:
        return None
    return float(np.unique(x.ids_LK[x.ids_LK >= 0]).size / x.n_items)


def distinct_per_list(x: CollapseInput) -> float | None:
    """``mean_l abs(d_l) / K``: the distinct items of a list's window over K, averaged over the L lists
    (an empty window counts 0). ``ids_LK (L, K)`` -> a float in ``[0, 1]``; None without lists."""
    if x.ids_LK.shape[0] == 0:
        return None
    return float(distinct_L(x.ids_LK).mean() / x.k)


def repeat_share(x: CollapseInput) -> float | None:
    """``mean_l (n_l - abs(d_l)) / n_l`` over the lists with ``n_l > 0``: the share of a window's filled
    slots that repeat an earlier item of the same list. ``ids_LK (L, K)`` -> a float in ``[0, 1 - 1/K]``;
    None when every window is empty."""
    filled = (x.ids_LK >= 0).sum(axis=1)
    ok = filled > 0
    if not ok.any():
        return None
    return float(((filled - distinct_L(x.ids_LK))[ok] / filled[ok]).mean())


def distinct_tuples(ids_LK: np.ndarray) -> np.ndarray:
    """Each window's distinct items in order of first occurrence, moved left, padded with -1: shape
    ``(L, K)`` (int64). Two lists are the same list when their rows are equal."""
    ids = np.asarray(ids_LK, dtype=np.int64)
    n_lists = ids.shape[0]
    n_codes = int(ids.max(initial=-1)) + 1
    first = eligibility(ids, np.arange(n_lists), np.empty(0, np.int64), max(n_codes, 1))
    out = np.full_like(ids, -1)
    pos = np.cumsum(first, axis=1) - 1
    rows, cols = np.nonzero(first)
    out[rows, pos[rows, cols]] = ids[rows, cols]
    return out


def same_list_share(x: CollapseInput) -> float | None:
    """``max_t abs({l : D_l = t}) / L`` over non-empty tuples ``t``: the share of the L lists whose window,
    as the ordered tuple ``D_l`` of its distinct items (:func:`distinct_tuples`), equals the most common
    non-empty one. 1.0: every list is one list; an empty window is never the common list but counts in L.
    ``ids_LK (L, K)`` -> a float in ``[0, 1]``; None without lists."""
    n_lists = x.ids_LK.shape[0]
    if n_lists == 0:
        return None
    tuples = distinct_tuples(x.ids_LK)
    tuples = tuples[tuples[:, 0] >= 0]
    if tuples.shape[0] == 0:
        return 0.0
    _, counts = np.unique(tuples, axis=0, return_counts=True)
    return float(counts.max() / n_lists)


def avg_popularity(x: CollapseInput) -> float | None:
    """``sum_{l,j} p_{x_{l,j}} / S``: the mean training share ``p_i`` of the recommended items, over the
    ``S`` filled window slots (repeats counted). ``ids_LK (L, K)``, ``share_V (V,)`` -> a float in
    ``[0, 1]``; None without training counts or filled slots."""
    ids = x.ids_LK[x.ids_LK >= 0]
    if not x.has_train or ids.size == 0:
        return None
    return float(x.share_V[ids].mean())


def popularity_lift(x: CollapseInput) -> float | None:
    """``avg_popularity / sum_i p_i^2``: the recommended items' mean share over that of a training mention
    drawn at random (``sum_i p_i^2``: item ``i`` is drawn with probability ``p_i`` and has share ``p_i``).
    1: as popular as the training answers themselves; above 1: a bias towards the popular head.
    ``share_V (V,)`` -> a float >= 0; None where :func:`avg_popularity` is."""
    avg = avg_popularity(x)
    expected = float((x.share_V**2).sum())
    if avg is None or expected == 0:
        return None
    return avg / expected


def gini(x: CollapseInput) -> float | None:
    """Gini index of the counts ``c_i`` over the N catalog items, as RecBole's ``GiniIndex`` metric
    (``recbole/evaluator/metrics.py``): with the N counts sorted ascending (never-recommended items count
    0), ``sum_{r=1}^{N} (2 r - N - 1) c_(r) / (N S)``. 0 when every item is recommended equally often,
    ``(N - 1) / N`` when one item fills every slot. ``ids_LK (L, K)`` -> a float in ``[0, (N - 1) / N]``;
    None without filled slots."""
    counts = _counts_V(x)
    c = np.sort(counts[counts > 0])
    n, m = x.n_items, c.size
    if m == 0:
        return None
    if m > n:
        raise ValueError(f"the lists hold {m} distinct items, more than the catalog's {n}")
    rank = np.arange(n - m + 1, n + 1, dtype=np.float64)
    return float(((2 * rank - n - 1) * c).sum() / (n * c.sum()))


def entropy(x: CollapseInput) -> float | None:
    """Shannon entropy ``-sum_i (c_i / S) ln(c_i / S)`` of the recommended items, in nats: 0 when one item
    fills every slot, ``ln(abs(union_l d_l))`` when the distinct items are recommended equally often.
    ``ids_LK (L, K)`` -> a float in ``[0, ln min(N, S)]``; None without filled slots."""
    counts = _counts_V(x)
    c = counts[counts > 0].astype(np.float64)
    if c.size == 0:
        return None
    q = c / c.sum()
    return float(-(q * np.log(q)).sum()) + 0.0


def head_hit_share(x: CollapseInput) -> float | None:
    """``sum 1[hit and x in H] / sum 1[hit]`` over window slots: of the hits (the first occurrence in a
    list of an item of its request's targets), the share whose item is among the H items training
    responders named most (``head_V``; H = K unless given, ties by item id). ``hit_LK (L, K)``,
    ``head_V (V,)`` -> a float in ``[0, 1]``; None without targets, training counts or hits."""
    if x.hit_LK is None or not x.has_train:
        return None
    hits = x.hit_LK & (x.ids_LK >= 0)
    n_hits = int(hits.sum())
    if n_hits == 0:
        return None
    return float((hits & x.head_V[np.maximum(x.ids_LK, 0)]).sum() / n_hits)


#: Every collapse metric, in report order.
COLLAPSE_REGISTRY: tuple[CollapseMetric, ...] = (
    CollapseMetric(
        "coverage",
        "abs(union_l d_l) / N",
        "catalog coverage of all windows; at most `min(N, K L) / N` (`max_coverage`)",
        coverage,
    ),
    CollapseMetric(
        "distinct_per_list",
        "mean_l abs(d_l) / K",
        "an empty or short window counts its missing items as 0",
        distinct_per_list,
    ),
    CollapseMetric(
        "repeat_share",
        "mean_l (n_l - abs(d_l)) / n_l",
        "share of a window's filled slots repeating an earlier item of the list; lists with `n_l = 0` left out",
        repeat_share,
    ),
    CollapseMetric(
        "same_list_share",
        "max_t abs({l : D_l = t}) / L",
        "`D_l` the window's distinct items in order; 1.0 = one list for every request; empty windows count in `L` only",
        same_list_share,
    ),
    CollapseMetric(
        "avg_popularity",
        "sum_{l,j} p_{x_{l,j}} / S",
        "`p_i = m(i) / sum m`, `m(i)` the training responders naming item `i`",
        avg_popularity,
    ),
    CollapseMetric(
        "popularity_lift",
        "avg_popularity / sum_i p_i^2",
        "`sum_i p_i^2`: the mean share of a random training mention; 1 = as popular as the training answers",
        popularity_lift,
    ),
    CollapseMetric(
        "gini",
        "sum_{r=1}^{N} (2 r - N - 1) c_(r) / (N S)",
        "RecBole's GiniIndex: counts sorted ascending over all N items; 0 uniform, `(N - 1) / N` one item",
        gini,
    ),
    CollapseMetric(
        "entropy",
        "-sum_i (c_i / S) ln(c_i / S)",
        "nats; 0 = one item fills every slot",
        entropy,
    ),
    CollapseMetric(
        "head_hit_share",
        "sum 1[hit, x in H] / sum 1[hit]",
        "of the hits (first occurrences of target items), the share among the H = K most-named training items",
        head_hit_share,
    ),
)
#: The collapse metric names, in report order.
COLLAPSE_METRICS: tuple[str, ...] = tuple(m.name for m in COLLAPSE_REGISTRY)


def collapse_table_markdown() -> str:
    """docs/metrics.md's table of the collapse metrics (one row per entry, in report order)."""
    rows = ["| metric | formula | notes |", "|---|---|---|"]
    rows += [f"| `{m.name}` | `{m.formula}` | {m.note} |" for m in COLLAPSE_REGISTRY]
    return "\n".join(rows)


def _as_lists(lists: Any) -> pl.Series:
    """Lists of ids (a sequence of sequences, a polars list Series, or a 2-d array) -> ``List(String)``."""
    if isinstance(lists, pl.Series):
        return lists.cast(pl.List(pl.String))
    return pl.Series("lists", [list(x) for x in lists], dtype=pl.List(pl.String), strict=False)


def _flat(series: pl.Series) -> tuple[pl.Series, np.ndarray]:
    lengths = series.list.len().fill_null(0).to_numpy().astype(np.int64)
    return series.explode(empty_as_null=False, keep_nulls=False), lengths


def _window(ids_LW: np.ndarray, k: int) -> np.ndarray:
    """Each list's first ``k`` filled slots moved left (-1 after them): ``(L, W)`` -> ``(L, k)``."""
    has = ids_LW >= 0
    pos = np.cumsum(has, axis=1) - 1
    rows, cols = np.nonzero(has & (pos < k))
    out = np.full((ids_LW.shape[0], k), -1, dtype=np.int64)
    out[rows, pos[rows, cols]] = ids_LW[rows, cols]
    return out


def collapse_input(
    lists: Any,
    *,
    k: int,
    n_items: int,
    train_counts: Mapping[str, int] | None = None,
    targets: Any = None,
    list_request: Sequence[int] | np.ndarray | None = None,
    head: int | None = None,
) -> tuple[CollapseInput, dict[str, Any]]:
    """Encode lists for the metric functions (:func:`collapse_report`'s arguments) -> (the
    :class:`CollapseInput`, the counts :func:`collapse_report` records beside the metrics)."""
    if int(k) < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    k = int(k)
    series = _as_lists(lists)
    n_lists = series.len()
    ranked_flat, lengths = _flat(series)
    train = {str(i): int(n) for i, n in (train_counts or {}).items() if n}
    if any(n < 0 for n in train.values()):
        raise ValueError("train_counts must be counts (>= 0)")
    train_items = pl.Series(list(train), dtype=pl.String)
    parts = [ranked_flat, train_items]
    if targets is not None:
        target_s = _as_lists(targets)
        target_flat, target_len = _flat(target_s)
        parts.append(target_flat)
    codes = pl.concat([p.cast(pl.String) for p in parts]).rank("dense").fill_null(0).to_numpy()
    codes = codes.astype(np.int64) - 1
    n_codes = int(codes.max(initial=-1)) + 1
    bounds = np.cumsum([0] + [p.len() for p in parts])
    c_ranked, c_train = codes[: bounds[1]], codes[bounds[1] : bounds[2]]

    ids_LW = pad_lists(c_ranked, lengths)
    ids = _window(ids_LW, k)
    mentions = np.zeros(n_codes, dtype=np.float64)
    mentions[c_train] = np.fromiter(train.values(), dtype=np.float64, count=len(train))
    total = mentions.sum()
    share = mentions / total if total > 0 else mentions
    h = k if head is None else int(head)
    # the H most-named items: by count descending, ties by item id (the codes are the ids' sorted order)
    order = np.lexsort((np.arange(n_codes), -mentions))
    head_V = np.zeros(n_codes, dtype=bool)
    head_V[order[: min(h, int((mentions > 0).sum()))]] = True

    hit = None
    n_requests = n_lists
    if targets is not None:
        n_requests = target_s.len()
        group_L = (
            np.arange(n_lists) if list_request is None else np.asarray(list_request, dtype=np.int64).ravel()
        )
        if group_L.shape != (n_lists,):
            raise ValueError(f"{n_lists} lists but list_request maps {group_L.shape[0]} (one entry per list)")
        if n_lists and (group_L.min() < 0 or group_L.max() >= n_requests):
            raise ValueError(f"list_request holds an index outside the {n_requests} target sets")
        c_target = codes[bounds[2] :]
        t_group = np.repeat(np.arange(n_requests), target_len)
        ok = c_target >= 0
        keys = np.unique(pair_keys(t_group[ok], c_target[ok], max(n_codes, 1)))
        first = eligibility(ids, np.arange(n_lists), np.empty(0, np.int64), max(n_codes, 1))
        hit = np.isin(pair_keys(group_L[:, None], ids, max(n_codes, 1)), keys) & first
    elif list_request is not None:
        n_requests = int(np.unique(np.asarray(list_request)).size)

    n_distinct = int(np.unique(ids[ids >= 0]).size)
    if n_distinct > n_items:
        raise ValueError(f"the lists hold {n_distinct} distinct items, more than n_items = {n_items}")
    filled = int((ids_LW >= 0).sum())
    counts = {
        "k": k,
        "n_items": int(n_items),
        "n_lists": n_lists,
        "n_requests": n_requests,
        "n_slots": int(lengths.sum()),
        "n_ungrounded_slots": int(lengths.sum()) - filled,
        "n_window_slots": int((ids >= 0).sum()),
        "n_slots_beyond_k": filled - int((ids >= 0).sum()),
        "n_distinct_items": n_distinct,
        "max_coverage": min(int(n_items), k * n_lists) / n_items if n_items > 0 else None,
        "head_size": int(head_V.sum()),
        "n_hits": None if hit is None else int(hit.sum()),
        "train_items": len(train),
        "train_mentions": int(total),
        "train_mean_share": float((share**2).sum()) if total > 0 else None,
    }
    x = CollapseInput(ids, k, int(n_items), share, head_V, hit, total > 0)
    return x, counts


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else value
    return value


def collapse_report(
    lists: Any,
    *,
    k: int,
    n_items: int,
    train_counts: Mapping[str, int] | None = None,
    targets: Any = None,
    list_request: Sequence[int] | np.ndarray | None = None,
    head: int | None = None,
    popularity_source: str | None = None,
) -> dict[str, Any]:
    """Every collapse metric of one model's lists, JSON-able, with its counts and warning.

    ``lists``: L lists of catalog item ids (a sequence of sequences of ``str`` or ``None``, a polars
    ``List(String)`` Series, or a 2-d array; ``None`` = an ungrounded slot, excluded); ``k``: K, the window
    (each list's first K filled slots); ``n_items``: N, the catalog size; ``train_counts``: ``{item_id:
    training responders who named it}`` (:func:`train_counts_from_requests`; None: the popularity metrics
    are None); ``targets``: per request, its target item ids (the pooled ``union``; None: no
    ``head_hit_share``); ``list_request``: the target set of each list (default: list l answers target set
    l; samples: ``np.repeat(np.arange(R), n)``); ``head``: H (default K); ``popularity_source``: a phrase
    recorded as where ``train_counts`` came from.

    Keys: ``k``, ``n_items``, ``n_lists``, ``n_requests``, ``n_slots`` (all slots given),
    ``n_ungrounded_slots`` (excluded), ``n_window_slots`` (filled slots read, ``S``),
    ``n_slots_beyond_k`` (filled slots after the window, not read), ``n_distinct_items``, ``max_coverage``
    (``min(N, K L) / N``), ``head_size`` (H, fewer when fewer items were named in training), ``n_hits``,
    ``train_items``, ``train_mentions``, ``train_mean_share`` (``sum_i p_i^2``), ``popularity_source``,
    then every name of :data:`COLLAPSE_METRICS` (a float or None), then ``warning``
    (:func:`collapse_warning`: a sentence or None).

    >>> r = collapse_report([["a", "a", "a"], ["a", "a", None]], k=3, n_items=10)
    >>> round(r["repeat_share"], 4), r["same_list_share"], r["n_ungrounded_slots"], r["warning"] is not None
    (0.5833, 1.0, 1, True)
    """
    x, counts = collapse_input(
        lists,
        k=k,
        n_items=n_items,
        train_counts=train_counts,
        targets=targets,
        list_request=list_request,
        head=head,
    )
    report: dict[str, Any] = {**counts, "popularity_source": popularity_source if x.has_train else None}
    for m in COLLAPSE_REGISTRY:
        report[m.name] = m.function(x)
    report = {key: _clean(v) for key, v in report.items()}
    report["warning"] = collapse_warning(report)
    return report


def collapse_warning(report: Mapping[str, Any]) -> str | None:
    """One sentence when the lists of a :func:`collapse_report` collapse, else None.

    The rule: the lists collapse when any of

    (a) ``repeat_share >= 0.5``: on average half a list's filled slots repeat an earlier item of the list
        (the same answer written again and again);
    (b) ``same_list_share >= 0.5`` and at least two lists share the common list: half the lists are one
        and the same list, whatever the request;
    (c) ``n_distinct_items <= K`` while ``min(N, S) >= 3 K`` (S the filled window slots): all lists
        together hold no more distinct items than one list, where the catalog and the slots filled could
        have held three lists' worth.

    Short or empty lists alone never trip it (a list of 2 distinct items at K = 20 is short, not
    collapsed), nor do ungrounded slots (excluded before the rule; ``n_ungrounded_slots`` counts them).
    """
    reasons = []
    share = report.get("repeat_share")
    if share is not None and share >= REPEAT_SHARE_LIMIT:
        reasons.append(
            f"{share:.0%} of a list's items repeat an earlier item of the same list "
            f"(repeat_share >= {REPEAT_SHARE_LIMIT})"
        )
    same, n_lists = report.get("same_list_share"), report.get("n_lists") or 0
    if same is not None and same >= SAME_LIST_SHARE_LIMIT and round(same * n_lists) >= 2:
        reasons.append(
            f"{same:.0%} of the {n_lists} lists are one and the same list (same_list_share >= "
            f"{SAME_LIST_SHARE_LIMIT})"
        )
    k, n_distinct = report["k"], report.get("n_distinct_items", 0)
    possible = min(report.get("n_items", 0), report.get("n_window_slots", 0))
    if n_lists >= 2 and possible >= COVERAGE_LISTS * k and n_distinct <= k:
        reasons.append(
            f"the {n_lists} lists hold {n_distinct} distinct items in all, no more than one list of K = {k}"
        )
    if not reasons:
        return None
    return "the lists collapse: " + "; ".join(reasons)


def train_counts_from_requests(requests: pl.DataFrame, *, split: str | None = "train") -> dict[str, int]:
    """``{item_id: m(i)}``: the training responders who named each item, ``counts`` summed over the
    ``union`` of the pooled rows of ``split`` (None: every row given). Rows: ``union``, ``counts`` (and
    ``split``). Items nobody named are absent."""
    rows = requests if split is None else requests.filter(pl.col("split") == split)
    table = item_mentions(rows)
    return dict(zip(table["item_id"].to_list(), (int(n) for n in table["n"].to_list()), strict=True))


def requests_collapse(
    lists: Any,
    requests: pl.DataFrame,
    dataset_requests: pl.DataFrame,
    *,
    k: int,
    n_items: int,
    list_request: Sequence[int] | np.ndarray | None = None,
    train_split: str = "train",
) -> dict[str, Any]:
    """:func:`collapse_report` of lists scored against pooled ``requests``: targets their ``union``,
    training popularity from the rows of ``train_split`` in ``dataset_requests`` (all of a dataset's
    requests), recorded in ``popularity_source``; without such rows the popularity metrics are None."""
    train = dataset_requests.filter(pl.col("split") == train_split)
    counts = train_counts_from_requests(train, split=None)
    mentions = sum(counts.values())
    source = (
        f"training responders of split {train_split!r} ({train.height} requests, {mentions} mentions)"
        if counts
        else None
    )
    return collapse_report(
        lists,
        k=k,
        n_items=n_items,
        train_counts=counts or None,
        targets=requests["union"],
        list_request=list_request,
        popularity_source=source,
    )


def _value(v: Any) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def collapse_lines(report: Mapping[str, Any], *, title: str = "List collapse") -> list[str]:
    """Lines for reports: the counts, one row per metric, the warning (``warning: ...``) if any."""
    src = report.get("popularity_source") or "none (no training requests): popularity metrics n/a"
    lines = [
        f"{title} (eval.collapse; docs/metrics.md): {report['n_lists']} lists, window K = {report['k']}, "
        f"{report['n_window_slots']} filled slots read, {report['n_ungrounded_slots']} ungrounded excluded; "
        f"{report['n_distinct_items']} distinct items of {report['n_items']}; popularity: {src}",
        "",
        "| metric | value |",
        "|---|---|",
        *(f"| {name} | {_value(report.get(name))} |" for name in COLLAPSE_METRICS),
    ]
    if report.get("warning"):
        lines += ["", f"warning: {report['warning']}"]
    return lines


def compare_lines(reports: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """Reports side by side (``remark eval compare``): ``{label: report}``, one column per label (``-``
    for one that recorded none), one row per metric, then each warning as ``warning: label: ...``."""
    labels = list(reports)
    lines = [
        "List collapse (eval.collapse; docs/metrics.md), each run's own lists:",
        "",
        "| metric | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for name in ("n_lists", "n_distinct_items", *COLLAPSE_METRICS):
        cells = ["-" if r is None else _cell(r.get(name)) for r in reports.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    missing = [label for label, r in reports.items() if r is None]
    if missing:
        lines += [
            "",
            f"{', '.join(missing)}: no collapse figures recorded (a per-request table, or an older output)",
        ]
    warned = [f"warning: {label}: {r['warning']}" for label, r in reports.items() if r and r.get("warning")]
    return lines + (["", *warned] if warned else [])


def _cell(v: Any) -> str:
    return str(v) if isinstance(v, int) else _value(v)


def warn(report: Mapping[str, Any] | None, *, label: str = "", file: TextIO | None = None) -> bool:
    """Print the report's warning (``warning: [label: ]...``) on ``file`` (stderr); True when there was one."""
    if not report or not report.get("warning"):
        return False
    print(f"warning: {label + ': ' if label else ''}{report['warning']}", file=file or sys.stderr)
    return True
