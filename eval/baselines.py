"""Reference levels: what no model, a popularity list and a genre list score on the same requests.

A recall of 0.05 means little without a scale. Beside a model's test values (the demo's report,
``remark eval baselines``), on the same requests and with the same metric code (``eval.views.score_lists``):

- ``chance``: the expected recall@K of K distinct catalog items drawn uniformly from the items a request
  has not seen. For a target set ``T`` of catalog items outside ``seen``, ``E|L ∩ T| = K |T| / (N - |seen|)``
  for a list ``L`` of K uniform draws among the ``N - |seen|`` unseen items, so every row's expected
  recall ``E|L ∩ T| / |T|`` is ``min(1, K / (N - |seen|))``, whatever ``T`` is; the view's value is its
  (row-weighted) mean, computed exactly, not sampled. Recall only: the other metrics' expectations
  depend on ``|T|`` and the ranks;
- ``popularity``: one list per request, the K most popular unseen catalog items (catalog ``popularity``,
  ties by ``item_id``): what a model that learned only the catalog's popularity would write;
- ``genre_popularity`` (catalogs with a ``genre`` column, as the synthetic world's): the K most popular
  unseen items of the genre the request names (the longest catalog genre found in its first user
  message); requests naming none fall back to the popularity list. In the synthetic world this is the
  best list a model can learn from the prompt alone (responders draw relevant items from that genre,
  by popularity), an upper reference, not a bound on what sampling finds.

:func:`reference_levels` gives the demo's recall@K per view; :func:`baseline_levels` any metrics, cut-offs
and views with bootstrap intervals over requests (``remark eval baselines``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from eval.bootstrap import DEFAULT_CI, BootstrapConfig, intervals
from eval.views import score_lists, split_key

VIEWS = ("per_responder", "union", "single_mention")
#: level -> what its lists are, for reports
LEVELS = {
    "chance": "K random unseen catalog items (exact expectation; recall only)",
    "popularity": "the K most popular unseen catalog items",
    "genre_popularity": "the K most popular unseen items of the genre the request names",
}


def chance_recall_R(requests: pl.DataFrame, n_items: int, k: int) -> np.ndarray:
    """Per request, the expected recall@K of K uniform distinct unseen items: ``min(1, K / (N - |seen|))``.

    Shapes: ``requests`` R rows (``seen``) -> ``(R,)``; ``N = n_items`` (a request that has seen every
    item counts ``N - |seen|`` as 1).
    """
    n_seen = requests["seen"].list.len().to_numpy()
    return np.minimum(1.0, k / np.maximum(n_items - n_seen, 1))


def chance_recall(requests: pl.DataFrame, n_items: int, k: int) -> dict[str, float]:
    """Exact expected recall@K per view of K uniform distinct unseen items: :func:`chance_recall_R` per row.

    ``requests``: pooled rows (``seen``, ``responders``, ``counts``). Per-responder rows are weighted as
    the evaluation weights them (one per responder with a target; requests' rows pooled).
    """
    per_row = chance_recall_R(requests, n_items, k)
    n_rows = requests["responders"].list.eval(pl.element().list.len() > 0).list.sum().to_numpy()
    has_union = requests["counts"].list.len().to_numpy() > 0
    has_single = requests["counts"].list.eval(pl.element() == 1).list.sum().to_numpy() > 0
    out = {"per_responder": float((per_row * n_rows).sum() / max(n_rows.sum(), 1))}
    out["union"] = float(per_row[has_union].mean()) if has_union.any() else float("nan")
    out["single_mention"] = float(per_row[has_single].mean()) if has_single.any() else float("nan")
    return out


def popularity_lists(requests: pl.DataFrame, catalog: pl.DataFrame, k: int) -> list[list[str]]:
    """Per request, the K most popular catalog ids not in its ``seen`` (ties broken by ``item_id``)."""
    order = catalog.sort(["popularity", "item_id"], descending=[True, False], nulls_last=True)["item_id"]
    ranked = order.to_list()
    return [_top_unseen(ranked, set(seen), k) for seen in requests["seen"].to_list()]


def genre_lists(requests: pl.DataFrame, catalog: pl.DataFrame, k: int) -> list[list[str]] | None:
    """Per request, the K most popular unseen items of the genre its prompt names; None without genres."""
    if "genre" not in catalog.columns:
        return None
    order = catalog.sort(["popularity", "item_id"], descending=[True, False], nulls_last=True)
    by_genre = {g: ids for g, ids in order.group_by("genre", maintain_order=True).agg("item_id").iter_rows()}
    everything = order["item_id"].to_list()
    genres = sorted((g for g in by_genre if g), key=len, reverse=True)
    lists = []
    for prompt, seen in zip(requests["prompt"].to_list(), requests["seen"].to_list(), strict=True):
        text = next((m["content"] for m in prompt if m["role"] == "user"), "").lower()
        named = next((g for g in genres if g.lower() in text), None)
        lists.append(_top_unseen(by_genre[named] if named else everything, set(seen), k))
    return lists


def reference_levels(requests: pl.DataFrame, catalog: pl.DataFrame, k: int) -> dict[str, dict[str, Any]]:
    """``{level: {view: recall@K}}`` on ``requests`` (the test split) for the levels the module lists."""
    out: dict[str, dict[str, Any]] = {"chance": chance_recall(requests, catalog.height, k)}
    listed = {
        "popularity": popularity_lists(requests, catalog, k),
        "genre_popularity": genre_lists(requests, catalog, k),
    }
    for name, lists in listed.items():
        if lists is None:
            continue
        means = score_lists(requests, lists, ks=(k,), metrics=("recall",), views=VIEWS).means()
        out[name] = {v: means[f"eval/recall@{k}/{v}"] for v in VIEWS}
    return out


def baseline_tables(
    requests: pl.DataFrame,
    catalog: pl.DataFrame,
    *,
    ks: Sequence[int],
    metrics: Sequence[str],
    views: Sequence[str] = VIEWS,
) -> dict[str, pl.DataFrame]:
    """Per level, its per-request table (``eval.views.ScoredLists.per_request``: ``request_id``, weight
    columns, ``eval/<metric>@<k>/<view>``) on ``requests``.

    ``popularity`` and ``genre_popularity`` score lists of ``max(ks)`` items (their top k is the level's
    list at k); ``popularity`` is left out when no catalog item has a popularity, ``genre_popularity``
    without a ``genre`` column. ``chance`` holds :func:`chance_recall_R` in the recall columns of the
    empty lists' table (same rows, weights and exclusions), and only those.
    """
    ks = sorted(set(ks))
    scored = score_lists(
        requests, [[] for _ in range(requests.height)], ks=ks, metrics=("recall",), views=views
    )
    table = scored.per_request
    chance = []
    for key in (c for c in table.columns if c.startswith("eval/")):
        value = pl.Series(chance_recall_R(requests, catalog.height, int(split_key(key)[0].split("@")[1])))
        chance.append(pl.when(pl.col(key).is_null()).then(None).otherwise(value).alias(key))
    out = {"chance": table.with_columns(chance)} if "recall" in metrics else {}
    listed = {
        "popularity": popularity_lists(requests, catalog, max(ks))
        if catalog["popularity"].is_not_null().any()
        else None,
        "genre_popularity": genre_lists(requests, catalog, max(ks)),
    }
    for name, lists in listed.items():
        if lists is not None:
            out[name] = score_lists(requests, lists, ks=ks, metrics=metrics, views=views).per_request
    return out


def baseline_levels(
    requests: pl.DataFrame,
    catalog: pl.DataFrame,
    *,
    ks: Sequence[int],
    metrics: Sequence[str] = ("recall",),
    views: Sequence[str] = VIEWS,
    config: BootstrapConfig = DEFAULT_CI,
) -> dict[str, dict[str, Any]]:
    """``{level: {view: {"recall@5": {"mean", "ci_low", "ci_high"}}}}`` on ``requests``: each table of
    :func:`baseline_tables` with its bootstrap over requests (``eval.bootstrap.intervals``)."""
    out: dict[str, dict[str, Any]] = {}
    for name, table in baseline_tables(requests, catalog, ks=ks, metrics=metrics, views=views).items():
        keys = [c for c in table.columns if c.startswith("eval/")]
        out[name] = {}
        for key, cell in intervals(table, keys, config).items():
            metric, view = split_key(key)
            out[name].setdefault(view, {})[metric] = cell
    return out


def _top_unseen(ranked: list[str], seen: set[str], k: int) -> list[str]:
    out = []
    for item in ranked:
        if item not in seen:
            out.append(item)
            if len(out) == k:
                break
    return out
