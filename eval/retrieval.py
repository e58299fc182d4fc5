"""Retrieval over the training prompts: the answers of the k most similar training requests, weighted by
their similarity, a reference level that needs no model (``retrieval`` in ``eval.baselines``).

For a request ``q`` and a training request ``j`` with similarity ``s_j > 0`` among the ``k`` most similar
(``neighbours``), an item's score is

    score(i) = sum over the k neighbours of s_j * c_j(i) / n_j

``c_j(i)``: how many of ``j``'s responders named ``i`` (``counts``), ``n_j``: ``j``'s responders (rows of
``responders``; at least 1): the share of ``j``'s responders who named ``i``, weighted by how alike the
prompts are. The list is the items with a positive score, not in ``q``'s ``seen``, by score descending,
ties by ``item_id``, K at most (fewer when the neighbours name fewer). Neighbours: the training rows by
descending similarity (a stable sort: ties to the lower row), those with similarity 0 left out (they share
no term with ``q``); ``q`` itself is skipped when it is a training request (same ``request_id``), as
``nearest_request`` skips it.

Similarities (:data:`VARIANTS`), on the text of the prompts' user messages
(``data_prep.request_split.prompt_texts``), fitted on the training prompts only:

- ``tfidf_word``: scikit-learn's ``TfidfVectorizer`` on words and word pairs (``ngram_range=(1, 2)``),
  sublinear tf, L2-normalized rows: the cosine similarity;
- ``tfidf_char``: the same on character n-grams inside word boundaries (``analyzer="char_wb"``,
  ``ngram_range=(2, 5)``), which matches "fruits" with "fruit" and a misspelling with its word;
- ``bm25``: Okapi BM25 (``k1 = 1.5``, ``b = 0.75``, ``idf = ln(1 + (T - df + 0.5) / (df + 0.5))``) of the
  query's distinct words against each training prompt, on the word counts of scikit-learn's
  ``CountVectorizer``. Its scale varies by query; the ranking within one query is what counts.

:func:`choose_retrieval` picks the (variant, k) with the best per-responder recall@K on the validation
requests over :data:`VARIANTS` x :data:`NEIGHBOURS` (ties to the first in that order); without validation
requests, :data:`DEFAULT` (the choice on the shipped ProtoQA questions' validation split at K = 10, the
demo's split), said so in the choice. :func:`retrieval_levels` gives the demo its ``{level: {view:
recall@K}}`` on the evaluated requests.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from data_prep.request_split import prompt_texts
from eval.views import score_lists

#: variant -> TfidfVectorizer settings (``bm25``: CountVectorizer's words, scored by :func:`_bm25`)
VARIANTS: dict[str, dict[str, Any]] = {
    "tfidf_word": {"analyzer": "word", "ngram_range": (1, 2), "sublinear_tf": True},
    "tfidf_char": {"analyzer": "char_wb", "ngram_range": (2, 5), "sublinear_tf": True},
    "bm25": {},
}
#: the numbers of neighbours tried on validation
NEIGHBOURS = (1, 3, 5, 10, 20)
#: (variant, neighbours) without validation requests: the choice on the shipped ProtoQA questions'
#: validation split at K = 10 (the demo's split, seed 0; docs/metrics.md, "Reference levels")
DEFAULT = ("tfidf_char", 3)
BM25_K1 = 1.5
BM25_B = 0.75
#: cells of one dense similarity block: queries per block = this // training rows
CHUNK_CELLS = 1 << 22
VIEWS = ("per_responder", "union", "single_mention")


@dataclasses.dataclass(frozen=True)
class RetrievalChoice:
    """The variant and number of neighbours the ``retrieval`` level uses, and how they were chosen.

    ``chosen_on``: the validation split's name, or None for :data:`DEFAULT`; ``metric``: the validation
    key compared (``eval/recall@K/per_responder``); ``grid``: ``(variant, neighbours, value)`` per
    setting tried, in grid order; ``n_valid``: the validation requests.
    """

    variant: str
    neighbours: int
    chosen_on: str | None = None
    metric: str | None = None
    grid: tuple[tuple[str, int, float], ...] = ()
    n_valid: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: the setting, how it was chosen, and the grid's validation values."""
        return {
            "variant": self.variant,
            "neighbours": self.neighbours,
            "chosen_on": self.chosen_on,
            "metric": self.metric,
            "n_valid": self.n_valid,
            "grid": [{"variant": v, "neighbours": n, "value": x} for v, n, x in self.grid],
        }

    def describe(self) -> str:
        """One sentence: the setting, and the validation that chose it or that it is the default."""
        if self.chosen_on is None:
            return (
                f"retrieval: {self.variant} with {self.neighbours} neighbours, the default (not chosen on "
                "validation: no validation requests)"
            )
        return (
            f"retrieval: {self.variant} with {self.neighbours} neighbours, chosen on the {self.n_valid} "
            f"{self.chosen_on} requests by {self.metric} over {len(self.grid)} settings"
        )


def default_choice() -> RetrievalChoice:
    """:data:`DEFAULT`, not chosen on validation."""
    return RetrievalChoice(*DEFAULT)


def similarities(train: pl.DataFrame, requests: pl.DataFrame, variant: str) -> Any:
    """``(R, T)`` scipy sparse similarities of ``requests``' prompts to ``train``'s (module docstring),
    the vectorizer fitted on ``train``'s prompts. A request's own training row is not masked here."""
    queries, docs = _vectors(train, requests, variant)
    return queries @ docs.T


def _vectors(train: pl.DataFrame, requests: pl.DataFrame, variant: str) -> tuple[Any, Any]:
    """``(Q, D)``: sparse rows of the requests' and the training prompts' vectors, ``Q @ D.T`` their
    similarities (TF-IDF: both L2-normalized; ``bm25``: the query's distinct words against BM25 weights)."""
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

    if variant not in VARIANTS:
        raise ValueError(f"unknown retrieval variant {variant!r}: one of {', '.join(VARIANTS)}")
    docs, queries = prompt_texts(train), prompt_texts(requests)
    vectorizer = CountVectorizer() if variant == "bm25" else TfidfVectorizer(**VARIANTS[variant])
    try:
        fitted = vectorizer.fit_transform(docs)
    except ValueError:  # no term in any training prompt
        return _zeros(len(queries), 1), _zeros(len(docs), 1)
    if variant == "bm25":
        return (vectorizer.transform(queries) > 0).astype(np.float64), _bm25(fitted)
    return vectorizer.transform(queries), fitted


def _zeros(rows: int, cols: int) -> Any:
    from scipy import sparse

    return sparse.csr_matrix((rows, cols), dtype=np.float64)


def _bm25(counts: Any) -> Any:
    """``(T, V)`` BM25 term weights of the training prompts' word counts (module docstring)."""
    counts = counts.tocsr().astype(np.float64)
    n_docs = counts.shape[0]
    length = np.asarray(counts.sum(axis=1)).ravel()
    avg = length.mean() if n_docs else 1.0
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * length / max(avg, 1e-12))
    tf = counts.data
    rows = np.repeat(np.arange(n_docs), np.diff(counts.indptr))
    out = counts.copy()
    out.data = idf[counts.indices] * tf * (BM25_K1 + 1.0) / (tf + norm[rows])
    return out


def neighbour_rows(
    train: pl.DataFrame, requests: pl.DataFrame, variant: str, n: int
) -> list[list[tuple[int, float]]]:
    """Per request, up to ``n`` ``(training row, similarity)`` by descending similarity (ties to the lower
    row), similarity above 0, the request's own training row (same ``request_id``) skipped. Dense blocks
    of :data:`CHUNK_CELLS` cells."""
    if train.height == 0 or requests.height == 0:
        return [[] for _ in range(requests.height)]
    queries, docs = _vectors(train, requests, variant)
    queries, docs_t = queries.tocsr(), docs.T.tocsc()
    row_of = {rid: j for j, rid in enumerate(train["request_id"].to_list())}
    ids = requests["request_id"].to_list()
    block = max(1, CHUNK_CELLS // train.height)
    out = []
    for start in range(0, requests.height, block):
        dense = (queries[start : start + block] @ docs_t).toarray()
        for r, row in enumerate(dense):
            own = row_of.get(ids[start + r])
            if own is not None:
                row[own] = 0.0
            out.append([(int(j), float(row[j])) for j in _top(row, n) if row[j] > 0])
    return out


def _top(row: np.ndarray, n: int) -> np.ndarray:
    """The indices of ``row``'s ``n`` largest values, descending, ties to the lower index: every index
    tied with the n-th largest value is a candidate, then a stable sort of the candidates."""
    if n < len(row):
        cut = np.partition(row, len(row) - n)[len(row) - n]
        candidates = np.flatnonzero(row >= cut)
    else:
        candidates = np.arange(len(row))
    return candidates[np.argsort(-row[candidates], kind="stable")][:n]


def _shares(train: pl.DataFrame) -> list[dict[str, float]]:
    """Per training row, item -> the share of its responders who named it (``counts / n_j``)."""
    out = []
    rows = zip(
        train["union"].to_list(), train["counts"].to_list(), train["responders"].to_list(), strict=True
    )
    for union, counts, responders in rows:
        n = max(len(responders or []), 1)
        out.append({item: c / n for item, c in zip(union, counts, strict=True)})
    return out


def _aggregate(
    found: list[list[tuple[int, float]]],
    shares: list[dict[str, float]],
    seens: list[list[str]],
    n: int,
    k: int,
) -> list[list[str]]:
    """Per request, the K items of the score over its first ``n`` neighbours (module docstring)."""
    out = []
    for near, seen in zip(found, seens, strict=True):
        score: dict[str, float] = {}
        for j, s in near[:n]:
            for item, share in shares[j].items():
                score[item] = score.get(item, 0.0) + s * share
        skip = set(seen)
        ranked = sorted(
            (i for i, v in score.items() if v > 0 and i not in skip), key=lambda i: (-score[i], i)
        )
        out.append(ranked[:k])
    return out


def retrieval_lists(
    train: pl.DataFrame,
    requests: pl.DataFrame,
    k: int,
    *,
    variant: str = DEFAULT[0],
    neighbours: int = DEFAULT[1],
) -> list[list[str]]:
    """Per request, the ``retrieval`` list of K items (module docstring). ``train``: pooled rows
    (``request_id``, ``prompt``, ``union``, ``counts``, ``responders``); ``requests``: pooled rows
    (``request_id``, ``prompt``, ``seen``). Shapes: T and R rows -> R lists."""
    found = neighbour_rows(train, requests, variant, neighbours)
    return _aggregate(found, _shares(train), requests["seen"].to_list(), neighbours, k)


def grid_values(
    train: pl.DataFrame,
    valid: pl.DataFrame,
    k: int,
    *,
    variants: Sequence[str] = tuple(VARIANTS),
    neighbours: Sequence[int] = NEIGHBOURS,
) -> list[tuple[str, int, float]]:
    """``(variant, n, per-responder recall@K on valid)`` for every setting, in grid order: the
    neighbours found once per variant (the most tried), each ``n`` their first ``n``."""
    shares, seens = _shares(train), valid["seen"].to_list()
    key = f"eval/recall@{k}/per_responder"
    out = []
    for variant in variants:
        found = neighbour_rows(train, valid, variant, max(neighbours))
        for n in neighbours:
            lists = _aggregate(found, shares, seens, n, k)
            means = score_lists(valid, lists, ks=(k,), metrics=("recall",), views=("per_responder",)).means()
            out.append((variant, n, float(means[key])))
    return out


def choose_retrieval(
    train: pl.DataFrame,
    valid: pl.DataFrame | None,
    k: int,
    *,
    variants: Sequence[str] = tuple(VARIANTS),
    neighbours: Sequence[int] = NEIGHBOURS,
    split: str = "valid",
) -> RetrievalChoice:
    """The (variant, neighbours) with the best per-responder recall@K on ``valid`` (:func:`grid_values`;
    NaN counts as lowest, ties to the first in grid order), or :func:`default_choice` when ``valid`` is
    None or empty or ``train`` is empty. ``split``: the validation split's name, for the record."""
    if valid is None or valid.height == 0 or train.height == 0:
        return default_choice()
    grid = grid_values(train, valid, k, variants=variants, neighbours=neighbours)
    best = max(range(len(grid)), key=lambda g: (_finite(grid[g][2]), -g))
    variant, n, _ = grid[best]
    return RetrievalChoice(variant, n, split, f"eval/recall@{k}/per_responder", tuple(grid), valid.height)


def _finite(x: float) -> float:
    return -math.inf if math.isnan(x) else x


def _recall_by_view(requests: pl.DataFrame, lists: list[list[str]], k: int) -> dict[str, float]:
    means = score_lists(requests, lists, ks=(k,), metrics=("recall",), views=VIEWS).means()
    return {v: means[f"eval/recall@{k}/{v}"] for v in VIEWS}


def retrieval_levels(
    train: pl.DataFrame,
    valid: pl.DataFrame | None,
    requests: pl.DataFrame,
    k: int,
    *,
    variants: Sequence[str] = tuple(VARIANTS),
    neighbours: Sequence[int] = NEIGHBOURS,
) -> dict[str, Any]:
    """The ``retrieval`` level for the demo, chosen on ``valid`` (:func:`choose_retrieval`):

    - ``levels``: ``{"retrieval": {view: recall@K}}`` on ``requests``, the shape of
      ``eval.baselines.reference_levels`` (merge it into that dict); ``{}`` without training requests;
    - ``valid_levels``: the same on ``valid`` (``{}`` without validation requests), beside
      ``reference_levels`` of the validation requests for ``eval.baselines.strongest_baseline``;
    - ``choice``: :meth:`RetrievalChoice.as_dict`, and ``description``: :meth:`RetrievalChoice.describe`.
    """
    choice = choose_retrieval(train, valid, k, variants=variants, neighbours=neighbours)
    out: dict[str, Any] = {"levels": {}, "valid_levels": {}, "choice": choice.as_dict()}
    out["description"] = choice.describe()
    if train.height == 0:
        return out
    for name, frame in (("levels", requests), ("valid_levels", valid)):
        if frame is not None and frame.height:
            lists = retrieval_lists(train, frame, k, variant=choice.variant, neighbours=choice.neighbours)
            out[name] = {"retrieval": _recall_by_view(frame, lists, k)}
    return out


def grid_markdown(choice: Mapping[str, Any]) -> list[str]:
    """The validation grid of :meth:`RetrievalChoice.as_dict` as a markdown table (a row per variant, a
    column per number of neighbours, the chosen cell in bold); ``[]`` without a grid."""
    grid = choice.get("grid") or []
    if not grid:
        return []
    ns = list(dict.fromkeys(g["neighbours"] for g in grid))
    cells = {(g["variant"], g["neighbours"]): g["value"] for g in grid}
    lines = [
        f"Retrieval grid on the {choice['n_valid']} {choice['chosen_on']} requests ({choice['metric']}; "
        "bold: chosen):",
        "",
        "| variant | " + " | ".join(f"k={n}" for n in ns) + " |",
        "|---|" + "---|" * len(ns),
    ]
    for variant in dict.fromkeys(g["variant"] for g in grid):
        row = []
        for n in ns:
            v = cells.get((variant, n))
            text = "n/a" if v is None or math.isnan(v) else f"{v:.4f}"
            chosen = (variant, n) == (choice["variant"], choice["neighbours"])
            row.append(f"**{text}**" if chosen else text)
        lines.append(f"| {variant} | " + " | ".join(row) + " |")
    return lines
