"""Score lists of catalog ids against pooled requests: per-responder, union and single-mention views.

This is the one scoring path for evaluation *and* the trainer's validation (docs/architecture.md: train
and eval never compute "the same" metric in two places). Input: the pooled ``requests`` frame
(``request_id``, ``seen``, ``responders``, ``union``, ``counts``; data_prep's schema) and one ranked list
of grounded catalog ids per request (``None`` for a slot that did not parse or ground), or several lists
per request (sampled evaluation) with ``list_request`` giving each list's request row. Output: a
per-request table in the training eval-log format (docs/architecture.md): ``request_id``, one
``eval/<metric>@<k>/<view>`` column per metric, ``n_rows`` (the per-responder weight) and list diagnostics;
and, with the per-responder view, a per-row table (:attr:`ScoredLists.per_row`): one row per (request,
responder), Rank-GRPO's eval rows, holding every per-responder metric column (the mean over the request's
lists when it has several), so the mean of a column over its non-null rows is the view's value.

Views (docs/metrics.md, "Views"):

- ``per_responder``: one row per (request, responder), ``T = R_r``; rows averaged over all rows, as
  Rank-GRPO. Per request we store the mean over its rows and ``n_rows``; the overall value is the ratio of
  sums ``sum(n_rows * value) / sum(n_rows)``, so a request's responders move together in the bootstrap.
- ``union``: one row per request, ``T = union`` (anyone named it); averaged over requests.
- ``single_mention``: ``T`` = union items with ``c = 1``; requests without any are excluded and counted.
- ``per_mention`` (opt-in, not in :data:`VIEWS`): one row per (request, responder, item), ``T`` = that one
  item, rows averaged over all rows: the rows of He et al. (CIKM'23) and CRSLab, where recall@k = hit@k
  and MRR is the item's reciprocal rank. Per request we store the mean and ``n_mentions``.

Exclusions are never silent: responders with no grounded item, requests with an empty union, requests
without single-mention items get null values and are counted in :attr:`ScoredLists.counts`. ``T`` is taken
as given (seen items are not removed from it; data_prep keeps them out of ``responders``).
With several lists per request (samples), a request's value is the mean over its lists (and responders).

Slot filters (:data:`eval.metrics.FILTERS`, He et al.'s variants): the plain key
``eval/<metric>@<k>/<view>`` is scored with the primary filter (``compact=True``: ``drop_ooc_seen``,
``compact=False``: ``drop_none``); each filter named in ``filters`` adds the same metrics under
``eval/<metric>@<k>/<view>/<filter>``, e.g. ``eval/mrr@10/per_responder/drop_ooc``. A variant key has
the view's weights (``n_rows`` for per-responder). docs/metrics.md lists every name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import polars as pl

from eval.metric_registry import METRICS, VALIDATION_METRICS, validation_ks
from eval.metrics import (
    DEFAULT_KS,
    FILTERS,
    check_filters,
    check_ks,
    check_metrics,
    eligibility,
    filter_for,
    filter_slots,
    hit_matrix,
    metrics_at_k,
    pad_lists,
    pair_keys,
)

View = Literal["per_responder", "union", "single_mention", "per_mention"]
#: The default views (the trainer's validation and every report).
VIEWS: tuple[View, ...] = ("per_responder", "union", "single_mention")
#: Every view; ``per_mention`` is asked for by name.
ALL_VIEWS: tuple[View, ...] = (*VIEWS, "per_mention")
#: Views whose rows are finer than requests, and the per-request column that counts them (the weight).
WEIGHT_COLUMNS: dict[str, str] = {"per_responder": "n_rows", "per_mention": "n_mentions"}
REQUIRED_COLUMNS = ("request_id", "seen", "responders", "union", "counts")


def validation_metric_names(k: int) -> list[str]:
    """Every metric the trainer's validation logs for lists of K items (``eval/...`` greedy, ``sampled/...``
    sampled): the registry's validated metrics at ``validation_ks(k)`` on :data:`VIEWS`, e.g.
    ``eval/recall@20/union``."""
    keys = [f"{m}@{c}/{v}" for m in VALIDATION_METRICS for c in validation_ks(k) for v in VIEWS]
    return [f"{prefix}/{key}" for prefix in ("eval", "sampled") for key in keys]


def metric_key(metric_at_k: str, view: str, slot_filter: str | None = None) -> str:
    """Namespaced metric name, e.g. ``metric_key("recall@20", "union") == "eval/recall@20/union"`` and
    ``metric_key("mrr@10", "union", "drop_ooc") == "eval/mrr@10/union/drop_ooc"``."""
    return f"eval/{metric_at_k}/{view}" + (f"/{slot_filter}" if slot_filter else "")


def split_key(key: str) -> tuple[str, str]:
    """``"eval/recall@20/union"`` -> ``("recall@20", "union")``; a filter variant keeps its filter in the
    view: ``"eval/recall@20/union/drop_none"`` -> ``("recall@20", "union/drop_none")``."""
    parts = key.split("/")
    ok = (
        len(parts) in (3, 4)
        and parts[0] == "eval"
        and parts[2] in ALL_VIEWS
        and "@" in parts[1]
        and (len(parts) == 3 or parts[3] in FILTERS)
    )
    if not ok:
        raise ValueError(
            f"not a metric key of the form eval/<metric>@<k>/<view>[/<filter>]: {key!r} "
            f"(views: {', '.join(ALL_VIEWS)}; filters: {', '.join(FILTERS)})"
        )
    return parts[1], "/".join(parts[2:])


def base_view(view: str) -> str:
    """The view without its filter: ``"per_responder/drop_ooc"`` -> ``"per_responder"``."""
    return view.split("/")[0]


def key_views(keys: Sequence[str]) -> list[str]:
    """The distinct views of metric keys (filter variants included), in order of first appearance."""
    return list(dict.fromkeys(split_key(k)[1] for k in keys))


def weight_column(key: str) -> str | None:
    """The per-request weight column of a metric key (``n_rows``, ``n_mentions``), None for weight 1."""
    return WEIGHT_COLUMNS.get(base_view(split_key(key)[1]))


def weights_for(per_request: pl.DataFrame, key: str) -> np.ndarray:
    """Per-request weights of a metric column: its :func:`weight_column` (``n_rows`` for per-responder
    keys, ``n_mentions`` for per-mention keys), else 1; 0 where the value is null."""
    values = per_request[key]
    column = weight_column(key)
    if column is not None:
        w = per_request[column].cast(pl.Float64).to_numpy()
    else:
        w = np.ones(per_request.height)
    return np.where(values.is_null().to_numpy(), 0.0, w)


def weighted_means(per_request: pl.DataFrame, keys: Sequence[str]) -> dict[str, float]:
    """Point estimates: ``sum(w * v) / sum(w)`` per key (NaN when every request is excluded)."""
    out = {}
    for key in keys:
        w = weights_for(per_request, key)
        v = per_request[key].fill_null(0.0).to_numpy().astype(np.float64)
        out[key] = float((w * v).sum() / w.sum()) if w.sum() > 0 else float("nan")
    return out


@dataclass
class ScoredLists:
    """Result of :func:`score_lists`.

    ``per_row`` (None without the per-responder view): one row per (request, responder) in the requests'
    order, responders in the order of the request's ``responders``: ``request_id``, ``responder_index``
    (the position in ``responders``), ``n_lists``, ``n_targets`` (``abs(T)``, the responder's grounded
    items; 0 = excluded, values null) and each per-responder key of :attr:`keys`.
    """

    per_request: pl.DataFrame
    keys: tuple[str, ...]
    counts: dict[str, int]
    settings: dict[str, Any] = field(default_factory=dict)
    per_row: pl.DataFrame | None = None

    def means(self) -> dict[str, float]:
        """``{"eval/recall@20/union": mean, ...}``: what a trainer logs to ``eval_log.jsonl``."""
        return weighted_means(self.per_request, self.keys)


def _flat(series: pl.Series) -> tuple[pl.Series, np.ndarray]:
    """A list column -> (its items concatenated, lengths ``(n,)``); null lists count as empty."""
    lengths = series.list.len().fill_null(0).to_numpy().astype(np.int64)
    return series.explode(empty_as_null=False, keep_nulls=False), lengths


def _by_group(values: np.ndarray, group: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum of non-NaN ``values`` and their count per group (``np.bincount``)."""
    ok = ~np.isnan(values)
    sums = np.bincount(group[ok], weights=values[ok], minlength=n_groups)
    return sums, np.bincount(group[ok], minlength=n_groups)


def _distinct_per_group(group: np.ndarray, codes: np.ndarray, n_items: int, n_groups: int) -> np.ndarray:
    ok = codes >= 0
    keys = np.unique(pair_keys(group[ok], codes[ok], n_items))
    return np.bincount(keys // n_items, minlength=n_groups)


def score_lists(
    requests: pl.DataFrame,
    ranked: Sequence[Sequence[str | None]] | pl.Series,
    *,
    list_request: Sequence[int] | np.ndarray | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    metrics: Sequence[str] = METRICS,
    views: Sequence[str] = VIEWS,
    compact: bool = True,
    filters: Sequence[str] = (),
) -> ScoredLists:
    """Score ranked lists of catalog ids (``None`` = empty slot) against pooled requests.

    ``ranked`` has L lists; ``list_request[l]`` is the row of ``requests`` list ``l`` answers (default:
    list l answers row l, so L must equal the number of requests). Every request needs at least one list.
    Returns per-request values (mean over the request's lists) for each ``eval/<metric>@<k>/<view>``
    (primary filter, from ``compact``) and each ``eval/<metric>@<k>/<view>/<filter>`` of ``filters``.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in requests.columns]
    if missing:
        raise ValueError(f"requests frame lacks column(s) {missing}; expected data_prep's pooled schema")
    ks = check_ks(ks)
    names = check_metrics(metrics)
    variants = check_filters(filters)
    bad = [v for v in views if v not in ALL_VIEWS]
    if bad or not views:
        raise ValueError(f"unknown view(s) {bad or list(views)!r}; valid: {', '.join(ALL_VIEWS)}")
    n_req = requests.height
    ranked_s = (
        ranked.cast(pl.List(pl.String))
        if isinstance(ranked, pl.Series)
        else pl.Series("ranked", [list(x) for x in ranked], dtype=pl.List(pl.String))
    )
    n_lists = ranked_s.len()
    group_L = np.arange(n_req) if list_request is None else np.asarray(list_request, dtype=np.int64).ravel()
    if group_L.shape != (n_lists,):
        raise ValueError(f"{n_lists} lists but list_request maps {group_L.shape[0]} (one entry per list)")
    if n_lists and (group_L.min() < 0 or group_L.max() >= n_req):
        raise ValueError("list_request holds an index outside the requests frame")
    lists_per_req = np.bincount(group_L, minlength=n_req)
    if (lists_per_req == 0).any():
        first = requests["request_id"][int(np.argmin(lists_per_req))]
        raise ValueError(f"{int((lists_per_req == 0).sum())} request(s) have no list (first: {first!r})")

    # One integer code per distinct string across lists, seen, union and responders (dense rank).
    ranked_flat, list_len = _flat(ranked_s)
    seen_flat, seen_len = _flat(requests["seen"])
    union_flat, union_len = _flat(requests["union"])
    counts_flat, counts_len = _flat(requests["counts"])
    if not np.array_equal(union_len, counts_len):
        row = int(np.argmax(union_len != counts_len))
        raise ValueError(f"request {requests['request_id'][row]!r}: 'counts' is not aligned with 'union'")
    resp_lists, n_resp = _flat(requests["responders"])
    resp_flat, resp_len = _flat(resp_lists)
    parts = [ranked_flat, seen_flat, union_flat, resp_flat]
    codes = pl.concat([p.cast(pl.String) for p in parts]).rank("dense").fill_null(0).to_numpy()
    codes = codes.astype(np.int64) - 1
    n_items = int(codes.max(initial=-1)) + 2  # +1 spare code so no key ever collides
    bounds = np.cumsum([0] + [p.len() for p in parts])
    c_ranked, c_seen, c_union, c_resp = (codes[bounds[i] : bounds[i + 1]] for i in range(4))

    ids = pad_lists(c_ranked, list_len)
    seen_group = np.repeat(np.arange(n_req), seen_len)
    seen_keys = pair_keys(seen_group[c_seen >= 0], c_seen[c_seen >= 0], n_items)
    elig = eligibility(ids, group_L, seen_keys, n_items)
    distinct = eligibility(ids, group_L, np.empty(0, np.int64), n_items)

    columns: dict[str, np.ndarray] = {}
    row_columns: dict[str, np.ndarray] = {}  # per (request, responder): the per-responder view's rows
    counts: dict[str, int] = {"n_requests": n_req, "n_lists": n_lists}
    n_rows_req = np.zeros(n_req, dtype=np.int64)

    def add_view(
        view: str,
        values: dict[str, np.ndarray],
        row_target: np.ndarray,
        row_list: np.ndarray,
        suffix: str | None,
    ) -> None:
        for name, v in values.items():
            s, c = _by_group(v, group_L[row_list], n_req)
            columns[metric_key(name, view, suffix)] = np.where(c > 0, s / np.maximum(c, 1), np.nan)
            if view == "per_responder":  # row_target is the responder: its mean over the request's lists
                s, c = _by_group(v, row_target, n_g)
                row_columns[metric_key(name, view, suffix)] = np.where(c > 0, s / np.maximum(c, 1), np.nan)

    # Targets per view (independent of the slot filter): (target keys, |T| per scored row, row -> request).
    targets: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    req_union = np.repeat(np.arange(n_req), union_len)
    for view in (v for v in VIEWS if v in views and v != "per_responder"):
        mask = np.ones(c_union.shape, bool) if view == "union" else counts_flat.to_numpy() == 1
        keys = pair_keys(req_union[mask], c_union[mask], n_items)
        n_t = _distinct_per_group(req_union[mask], c_union[mask], n_items, n_req)
        targets[view] = (np.arange(n_lists), group_L, keys, n_t[group_L])
        counts[f"{view}/n_excluded_requests"] = int((n_t == 0).sum())
    n_g = int(n_resp.sum())
    if "per_responder" in views:
        resp_req = np.repeat(np.arange(n_req), n_resp)
        resp_start = np.cumsum(n_resp) - n_resp
        item_group = np.repeat(np.arange(n_g), resp_len)
        keys = pair_keys(item_group[c_resp >= 0], c_resp[c_resp >= 0], n_items)
        n_t = _distinct_per_group(item_group, c_resp, n_items, n_g)
        nr = n_resp[group_L]
        row_list = np.repeat(np.arange(n_lists), nr)
        row_resp = resp_start[group_L][row_list] + (np.arange(nr.sum()) - np.repeat(np.cumsum(nr) - nr, nr))
        targets["per_responder"] = (row_list, row_resp, keys, n_t[row_resp])
        n_t_resp = n_t
        n_rows_req = np.bincount(resp_req[n_t > 0], minlength=n_req)
        counts["per_responder/n_rows"] = int(n_rows_req.sum())
        counts["per_responder/n_excluded_rows"] = int((n_t == 0).sum())
        counts["per_responder/n_excluded_requests"] = int((n_rows_req == 0).sum())
    n_mentions_req = np.zeros(n_req, dtype=np.int64)
    if "per_mention" in views:
        # One row per (list, grounded item of one of its request's responders); the target is that item.
        ok = c_resp >= 0
        mention_req = np.repeat(np.repeat(np.arange(n_req), n_resp), resp_len)[ok]
        n_m = int(ok.sum())
        n_mentions_req = np.bincount(mention_req, minlength=n_req)
        m_start = np.cumsum(n_mentions_req) - n_mentions_req
        nm = n_mentions_req[group_L]
        m_list = np.repeat(np.arange(n_lists), nm)
        m_row = m_start[group_L][m_list] + (np.arange(nm.sum()) - np.repeat(np.cumsum(nm) - nm, nm))
        keys = pair_keys(np.arange(n_m), c_resp[ok], n_items)
        targets["per_mention"] = (m_list, m_row, keys, np.ones(m_row.shape[0], dtype=np.int64))
        counts["per_mention/n_rows"] = n_m
        counts["per_mention/n_excluded_requests"] = int((n_mentions_req == 0).sum())

    passes = [(None, filter_for(compact))] + [(name, FILTERS[name]) for name in variants]
    for suffix, slot_filter in passes:
        slots = filter_slots(ids, elig, slot_filter)
        for view, (row_list_v, row_target, keys, n_t_rows) in targets.items():
            hits = hit_matrix(slots[row_list_v], row_target, keys, n_items)
            add_view(view, metrics_at_k(hits, n_t_rows, ks, names), row_target, row_list_v, suffix)

    def per_req_mean(x: np.ndarray) -> np.ndarray:
        return np.bincount(group_L, weights=x.astype(np.float64), minlength=n_req) / lists_per_req

    has = ids >= 0
    seen_slots = has & np.isin(pair_keys(group_L[:, None], ids, n_items), seen_keys)
    counts.update(
        n_slots=int(list_len.sum()),
        n_empty_lists=int((list_len == 0).sum()),
        n_ungrounded_slots=int(list_len.sum() - has.sum()),
        n_seen_slots=int(seen_slots.sum()),
        n_repeat_slots=int(has.sum() - distinct.sum()),
    )
    keys_out = tuple(
        metric_key(f"{m}@{k}", v, suffix)
        for suffix in (None, *variants)
        for v in ALL_VIEWS
        if v in views
        for m in names
        for k in ks
    )
    frame = pl.DataFrame(
        {
            "request_id": requests["request_id"].cast(pl.String),
            "n_lists": lists_per_req.astype(np.int64),
            "n_responders": n_resp,
            "n_rows": n_rows_req.astype(np.int64),
            **({"n_mentions": n_mentions_req} if "per_mention" in views else {}),
            **{k: columns[k] for k in keys_out},
            "list/length": per_req_mean(list_len),
            "list/grounded": per_req_mean(has.sum(1)),
            "list/distinct": per_req_mean(distinct.sum(1)),
            "list/eligible": per_req_mean(elig.sum(1)),
        },
        nan_to_null=True,
    )
    per_row = None
    if "per_responder" in views:
        resp_req = np.repeat(np.arange(n_req), n_resp)
        per_row = pl.DataFrame(
            {
                "request_id": requests["request_id"].cast(pl.String).gather(resp_req),
                "responder_index": (np.arange(n_g) - np.repeat(np.cumsum(n_resp) - n_resp, n_resp)).astype(
                    np.uint32
                ),
                "n_lists": lists_per_req[resp_req].astype(np.int64),
                "n_targets": n_t_resp.astype(np.int64),
                **{k: row_columns[k] for k in keys_out if k in row_columns},
            },
            nan_to_null=True,
        )
    settings = {
        "compact": compact,
        "filter": filter_for(compact).name,
        "filters": list(variants),
        "ks": list(ks),
        "metrics": list(names),
        "views": list(views),
    }
    return ScoredLists(per_request=frame, keys=keys_out, counts=counts, settings=settings, per_row=per_row)
