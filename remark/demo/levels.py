"""Reference levels for the demo's test numbers: what no model, a popularity list and a genre list score.

A recall of 0.05 means little without a scale. Beside the models' test values the report prints, on the
same test requests and with the same metric code (``eval.views.score_lists``):

- ``chance``: the expected recall@K of K distinct catalog items drawn uniformly from the items a request
  has not seen. For a target set ``T`` of catalog items outside ``seen``, ``E|L ∩ T| = K |T| / (N - |seen|)``
  for a list ``L`` of K uniform draws among the ``N - |seen|`` unseen items, so every row's expected
  recall ``E|L ∩ T| / |T|`` is ``K / (N - |seen|)``, whatever ``T`` is; the view's value is its
  (row-weighted) mean, computed exactly, not sampled;
- ``popularity``: one list per request, the K most popular unseen catalog items (catalog ``popularity``,
  ties by ``item_id``): what a model that learned only the catalog's popularity would write;
- ``genre_popularity`` (catalogs with a ``genre`` column, as the synthetic world's): the K most popular
  unseen items of the genre the request names (the longest catalog genre found in its first user
  message); requests naming none fall back to the popularity list. In the synthetic world this is the
  best list a model can learn from the prompt alone (responders draw relevant items from that genre,
  by popularity), an upper reference, not a bound on what sampling finds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

VIEWS = ("per_responder", "union", "single_mention")


def chance_recall(requests: pl.DataFrame, n_items: int, k: int) -> dict[str, float]:
    """Exact expected recall@K per view of K uniform distinct unseen items: ``K / (N - |seen|)`` per row.

    ``requests``: pooled rows (``seen``, ``responders``, ``counts``). Per-responder rows are weighted as
    the evaluation weights them (one per responder with a target; requests' rows pooled).
    """
    n_seen = requests["seen"].list.len().to_numpy()
    per_row = np.minimum(1.0, k / np.maximum(n_items - n_seen, 1))
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
    from eval.views import score_lists

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


def _top_unseen(ranked: list[str], seen: set[str], k: int) -> list[str]:
    out = []
    for item in ranked:
        if item not in seen:
            out.append(item)
            if len(out) == k:
                break
    return out
