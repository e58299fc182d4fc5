"""Reference levels: what no model, a popularity list, a genre list and the training answers of similar
requests score on the same requests.

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
- ``train_popularity`` (given the training requests): the K items training responders named most
  (``counts`` summed over the training requests; ties by ``item_id``), unseen: popularity that cannot
  hold a test answer, where a catalog's ``popularity`` may have been counted on every split. The demo's
  catalog popularity already counts training mentions only, so its reports show ``popularity`` alone;
- ``genre_popularity`` (catalogs with a ``genre`` column, as the synthetic world's): the K most popular
  unseen items of the genre the request names (the longest catalog genre found in its first user
  message); requests naming none fall back to the popularity list. In the synthetic world this is the
  best list a model can learn from the prompt alone (responders draw relevant items from that genre,
  by popularity), an upper reference, not a bound on what sampling finds;
- ``nearest_request`` (given the training requests): the answers of the most similar training request.
  Similarity: rapidfuzz's ``token_sort_ratio`` of the prompts' content words
  (``data_prep.request_split.similarity_texts`` and ``SCORER``), ties to the lower training row; the request itself is skipped when it is a training
  request (same ``request_id``). The list is that request's union by count (descending, ties by
  union order) without the request's ``seen`` items, then the next most similar requests' unions the
  same way, skipping items already listed, until K items;
- ``retrieval`` (given the training requests and a ``eval.retrieval.RetrievalChoice``): the answers of the
  k most similar training prompts by TF-IDF (words or character n-grams) or BM25, each item scored by the
  neighbours' shares of responders who named it weighted by similarity (``eval.retrieval``); the variant
  and k chosen on the validation requests (``choose_retrieval``), else a stated default;
- ``seen_request`` (given the training requests, and only when some request has a training twin:
  the same normalized prompt or a near-duplicate one, ``data_prep.request_split.twin_pairs``): the
  twin's union by count without the request's seen items, K at most; the most similar twin, ties to the
  lower row; requests without a twin get an empty list. A lookup of the answers trained on: the ceiling
  a memorising model approaches on a split that shares requests with training (``eval.leakage``).

:func:`reference_levels` gives the demo's recall@K per view; :func:`baseline_levels` any metrics, cut-offs
and views with bootstrap intervals over requests (``remark eval baselines``). :func:`strongest_baseline`
names the strongest simple baseline: the best level on the validation requests, ``seen_request`` (a lookup,
:data:`ORACLE_LEVELS`) left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from data_prep.catalog_splits import item_mentions
from data_prep.request_split import CHUNK_CELLS, prompt_texts, similarity_scores, similarity_texts, twin_pairs
from eval.bootstrap import DEFAULT_CI, BootstrapConfig, intervals
from eval.retrieval import RetrievalChoice, retrieval_lists
from eval.views import score_lists, split_key

VIEWS = ("per_responder", "union", "single_mention")
#: level -> what its lists are, for reports
LEVELS = {
    "chance": "K random unseen catalog items (exact expectation; recall only)",
    "popularity": "the K most popular unseen catalog items",
    "train_popularity": "the K items training responders named most, unseen",
    "genre_popularity": "the K most popular unseen items of the genre the request names",
    "nearest_request": "the training answers (by count) of the most similar training prompt, then the next, "
    "unseen items, K in all",
    "retrieval": "the training answers of the k most similar training prompts (TF-IDF or BM25), each "
    "weighted by its similarity, unseen items, K at most; variant and k chosen on validation",
    "seen_request": "the training answers of the request's own training twin (same or near-duplicate "
    "prompt): a lookup, the memorisation ceiling",
}
#: levels that look the answers up rather than predict them: never "the strongest simple baseline"
ORACLE_LEVELS = frozenset({"seen_request"})


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


def train_popularity_lists(train: pl.DataFrame, requests: pl.DataFrame, k: int) -> list[list[str]]:
    """Per request, the K items named most by the responders of ``train`` (pooled rows: ``union``,
    ``counts``), not in its ``seen``: mentions ``m(i) = sum over training rows of counts[i]``, ranked by
    ``m`` descending, ties by ``item_id``. Shapes: ``train`` T rows, ``requests`` R rows -> R lists."""
    ranked = item_mentions(train).sort(["n", "item_id"], descending=[True, False])["item_id"].to_list()
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


def _unions_by_count(frame: pl.DataFrame) -> list[list[str]]:
    """Each row's ``union`` sorted by ``counts``, descending; ties keep the union's order."""
    out = []
    for union, counts in zip(frame["union"].to_list(), frame["counts"].to_list(), strict=True):
        order = sorted(range(len(union)), key=lambda i: -counts[i])
        out.append([union[i] for i in order])
    return out


def nearest_request_lists(train: pl.DataFrame, requests: pl.DataFrame, k: int) -> list[list[str]]:
    """Per request, the answers of the most similar training requests (module docstring), K items.

    ``train`` and ``requests``: pooled rows (``request_id``, ``prompt``, ``union``, ``counts``; ``seen``
    for ``requests``). Scores: ``(R, N)`` uint8, computed ``CHUNK_CELLS // N`` requests at a time; per
    request, training rows by descending score (a stable sort: ties to the lower row).
    """
    if train.height == 0:
        return [[] for _ in range(requests.height)]
    sim = similarity_texts(prompt_texts(pl.concat([requests.select("prompt"), train.select("prompt")])))
    queries, choices = sim[: requests.height], sim[requests.height :]
    train_ids = train["request_id"].to_list()
    unions = _unions_by_count(train)
    ids, seens = requests["request_id"].to_list(), requests["seen"].to_list()
    rows = max(1, CHUNK_CELLS // len(choices))
    out = []
    for start in range(0, requests.height, rows):
        scores = similarity_scores(queries[start : start + rows], choices)
        for r, row in enumerate(scores):
            rid, seen = ids[start + r], set(seens[start + r])
            listed: list[str] = []
            for j in np.argsort(-row.astype(np.int16), kind="stable"):
                if train_ids[j] == rid:
                    continue
                listed += [i for i in unions[j] if i not in seen and i not in listed][: k - len(listed)]
                if len(listed) == k:
                    break
            out.append(listed)
    return out


def seen_request_lists(train: pl.DataFrame, requests: pl.DataFrame, k: int) -> list[list[str]] | None:
    """Per request, its training twin's answers (module docstring); ``[]`` without a twin; None when no
    request has one. Twins: ``data_prep.request_split.twin_pairs`` of the prompts, same ``request_id``
    excluded; the highest score wins, ties to the lower training row."""
    if train.height == 0 or requests.height == 0:
        return None
    qi, ci, score = twin_pairs(prompt_texts(requests), prompt_texts(train))
    train_ids, ids = train["request_id"].to_list(), requests["request_id"].to_list()
    best: dict[int, tuple[int, int]] = {}  # request row -> (score, training row)
    for q, c, s in zip(qi.tolist(), ci.tolist(), score.tolist(), strict=True):  # by request, then row
        if train_ids[c] != ids[q] and (q not in best or s > best[q][0]):
            best[q] = (s, c)
    if not best:
        return None
    unions = _unions_by_count(train)
    out = []
    for q, seen in enumerate(requests["seen"].to_list()):
        twin = unions[best[q][1]] if q in best else []
        out.append([i for i in twin if i not in set(seen)][:k])
    return out


def request_lists(
    requests: pl.DataFrame, train: pl.DataFrame | None, k: int, retrieval: RetrievalChoice | None = None
) -> dict[str, list[list[str]] | None]:
    """``nearest_request``, ``retrieval`` and ``seen_request`` lists of K items (None each without
    ``train``; ``retrieval`` None without a choice, the seen level None when no request has a training
    twin)."""
    if train is None:
        return {"nearest_request": None, "retrieval": None, "seen_request": None}
    found = None
    if retrieval is not None:
        found = retrieval_lists(
            train, requests, k, variant=retrieval.variant, neighbours=retrieval.neighbours
        )
    return {
        "nearest_request": nearest_request_lists(train, requests, k),
        "retrieval": found,
        "seen_request": seen_request_lists(train, requests, k),
    }


def strongest_baseline(levels_on_valid: dict[str, dict[str, Any]], *, view: str = "per_responder") -> str:
    """The level with the highest ``view`` value on the validation requests (``{level: {view: value}}``,
    :func:`reference_levels`' shape, ``eval.retrieval.retrieval_levels``' merged in), :data:`ORACLE_LEVELS`
    and NaN values left out; ties to the first listed. ``ValueError`` when no level is left."""
    best: tuple[float, str] | None = None
    for name, by_view in levels_on_valid.items():
        value = by_view.get(view)
        if name in ORACLE_LEVELS or value is None or np.isnan(value):
            continue
        if best is None or value > best[0]:
            best = (float(value), name)
    if best is None:
        raise ValueError(f"no non-oracle level with a {view} value among {sorted(levels_on_valid)}")
    return best[1]


def reference_levels(
    requests: pl.DataFrame,
    catalog: pl.DataFrame,
    k: int,
    *,
    train: pl.DataFrame | None = None,
    retrieval: RetrievalChoice | None = None,
) -> dict[str, dict[str, Any]]:
    """``{level: {view: recall@K}}`` on ``requests`` (the test split) for the levels the module lists;
    ``nearest_request`` (and ``seen_request``) when ``train`` (the training requests) is given,
    ``retrieval`` when ``retrieval`` is given too (``eval.retrieval.choose_retrieval``)."""
    out: dict[str, dict[str, Any]] = {"chance": chance_recall(requests, catalog.height, k)}
    listed = {
        "popularity": popularity_lists(requests, catalog, k),
        "genre_popularity": genre_lists(requests, catalog, k),
        **request_lists(requests, train, k, retrieval),
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
    train: pl.DataFrame | None = None,
    retrieval: RetrievalChoice | None = None,
) -> dict[str, pl.DataFrame]:
    """Per level, its per-request table (``eval.views.ScoredLists.per_request``: ``request_id``, weight
    columns, ``eval/<metric>@<k>/<view>``) on ``requests``.

    ``popularity``, ``genre_popularity``, ``nearest_request``, ``retrieval`` and ``seen_request`` score lists of
    ``max(ks)`` items (their top k is the level's list at k); ``popularity`` is left out when no catalog
    item has a popularity, ``genre_popularity`` without a ``genre`` column, ``train_popularity`` and the
    request levels without ``train`` (the training requests), ``retrieval`` without ``retrieval`` (the
    variant and k, ``eval.retrieval.choose_retrieval``), ``seen_request`` when no request has a training
    twin. ``chance`` holds :func:`chance_recall_R` in the recall columns of the
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
        "train_popularity": train_popularity_lists(train, requests, max(ks)) if train is not None else None,
        "genre_popularity": genre_lists(requests, catalog, max(ks)),
        **request_lists(requests, train, max(ks), retrieval),
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
    train: pl.DataFrame | None = None,
    retrieval: RetrievalChoice | None = None,
) -> dict[str, dict[str, Any]]:
    """``{level: {view: {"recall@5": {"mean", "ci_low", "ci_high"}}}}`` on ``requests``: each table of
    :func:`baseline_tables` (``train``: the training requests, for the request levels; ``retrieval``: the
    retrieval level's variant and k) with its bootstrap over requests (``eval.bootstrap.intervals``)."""
    out: dict[str, dict[str, Any]] = {}
    tables = baseline_tables(
        requests, catalog, ks=ks, metrics=metrics, views=views, train=train, retrieval=retrieval
    )
    for name, table in tables.items():
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
