"""ProtoQA's own matching: each generated line against the answer clusters of *its* question.

The catalog metric (``eval.views``) grounds every line to one global catalog and compares ids, so on
ProtoQA "car" and "cars" are two items unless one cluster lists both, an answer string that clusters of two
questions claim is no alias at all, and a line can only score when the catalog holds it. ProtoQA's
official evaluator (iesl/protoqa-evaluator, ``general_eval``) matches each prediction against the clusters
of the question asked only. This module scores lists that way, beside the catalog metric, from the
answers a ProtoQA dataset carries (``answers.parquet``, ``data_prep.schema.ANSWERS_SCHEMA``).

**Groups** (the targets of one question, :func:`answer_groups`). Each cluster of the question is a group;
so is each raw answer that no cluster of the question lists (crowdsourced raw strings were cleaned before
clustering), keyed by that answer. A group's responders ``r_g`` are counted as ``data_prep`` pools
respondents (``data_prep.readers.protoqa``): with raw answers, each raw answer's respondents go to the
first cluster (file order) listing its text (``strip().lower()``), else to its own group; a raw answer with
no text left after ``catalog.normalize.normalize_title`` ("?") has no responder, as it grounds to nothing
there; without raw answers a cluster has its file count. So ``R_q = sum_g r_g`` counts the respondents that
pooling makes responders of ``q`` when every answer grounds (``items="raw"``).

**Matching** (the evaluator's exact-match rule, ``eval.protoqa``): a line is preprocessed as the evaluator
does (``lower()[:50].strip()``) and matches a group when it equals one of the group's strings (cluster
strings ``strip().lower()``, which is the evaluator's comparison as written for ProtoQA's lower-cased
files). Lines are cut at ``K`` with positions kept (the evaluator's ``max_pred_answers``; an unmatched or
empty line keeps its rank), and lines and groups are assigned one to one (a group is credited at most
once per list, a line credits at most one group), maximising the credited weight: with the line-group
membership ``M_LG`` (``K x G``) and weights ``w_G``, ``credit = max over assignments of sum w_g``
(``scipy.optimize.linear_sum_assignment`` where a line matches two groups; otherwise the credited groups
are simply the distinct groups matched by the first ``K`` lines, computed for every list at once).

**Metrics** of one list ``l`` for question ``q`` at cut-off ``K`` (``C_l(K)``: its credited groups):

- ``protoqa/recall@K/per_responder = sum_{g in C_l(K)} r_g / R_q``: the share of the question's
  respondents whose answer's group the list names, weighted over requests by ``R_q``
  (``protoqa/n_responders``), as the per-responder view weights by ``n_rows``;
- ``protoqa/recall@K/union = |C_l(K) with r_g > 0| / |{g: r_g > 0}|``: the share of the question's
  answer groups named, averaged over requests;
- ``protoqa/max_answers@K``: the evaluator's "Max Answers @ K", clusters only with their file counts
  ``n_c``: ``sum_{c credited} n_c / (sum of the K largest n_c)`` (raw answers outside clusters are not
  in it); averaged over requests, as ProtoQA reports it.

With several lists per request (samples) a request's value is the mean over its lists. A request without
answers (or with ``R_q = 0``) gets nulls and is counted. The official evaluator's numbers are reproduced
where they are defined alike (``tests/eval/test_protoqa_match.py``): Max Answers@K, its
``set_intersection`` (union recall at the list's length) and ``family_feud`` (per-responder recall up to
the third unmatched line) when every respondent is in a cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from scipy.optimize import linear_sum_assignment

from catalog.normalize import normalize_title
from eval.bootstrap import DEFAULT_CI, BootstrapConfig, paired_difference, ratio_of_sums

PREFIX = "protoqa"
#: the per-request weight column of the per-responder keys (``R_q``)
WEIGHT = f"{PREFIX}/n_responders"
#: what :func:`protoqa_block` records as the rule used
MATCHING = (
    "per question, as ProtoQA's evaluator: each line (lower()[:50].strip()) equal to a string of one of "
    "its own question's answer clusters (or of a raw answer in no cluster); first K lines, positions kept; "
    "lines and clusters assigned one to one"
)


def _key(text: str) -> str:
    """The evaluator's prediction preprocessing (``default_string_preprocessing``)."""
    return text.lower()[:50].strip()


def answer_groups(answers: pl.DataFrame) -> pl.DataFrame:
    """``ANSWERS_SCHEMA`` rows -> one row per (request, group, string): ``request_id``, ``group`` (0-based
    within the request: clusters in file order, then unclustered raw answers), ``cluster`` (bool), ``key``
    (the string a preprocessed line must equal), ``responders`` (``r_g``) and ``count`` (the file's count,
    0 for a raw-answer group). See the module docstring for how ``r_g`` follows ``data_prep``."""
    rows: dict[str, list] = {k: [] for k in ("request_id", "group", "cluster", "key", "responders", "count")}
    for rid, clusters, raw in answers.select("request_id", "clusters", "raw").iter_rows():
        first: dict[str, int] = {}  # raw text -> its first cluster, as data_prep's reader maps it
        for c, cl in enumerate(clusters):
            for s in cl["answers"]:
                first.setdefault(s.strip().lower(), c)
        responders = [0] * len(clusters)
        loose: dict[str, int] = {}
        if raw:
            for r in raw:
                text, n = r["answer"].strip().lower(), r["count"] or 0
                if not normalize_title(text):
                    continue
                if text in first:
                    responders[first[text]] += n
                else:
                    loose[text] = loose.get(text, 0) + n
        else:
            responders = [cl["count"] or 0 for cl in clusters]
        for c, cl in enumerate(clusters):
            for key in dict.fromkeys(s.strip().lower() for s in cl["answers"]):
                rows["request_id"].append(rid)
                rows["group"].append(c)
                rows["cluster"].append(True)
                rows["key"].append(key)
                rows["responders"].append(responders[c])
                rows["count"].append(cl["count"] or 0)
        for j, (text, n) in enumerate(loose.items()):
            rows["request_id"].append(rid)
            rows["group"].append(len(clusters) + j)
            rows["cluster"].append(False)
            rows["key"].append(_key(text))
            rows["responders"].append(n)
            rows["count"].append(0)
    schema = {
        "request_id": pl.String,
        "group": pl.UInt32,
        "cluster": pl.Boolean,
        "key": pl.String,
        "responders": pl.Int64,
        "count": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema)


@dataclass
class ProtoQAScores:
    """Result of :func:`score_protoqa`: ``per_request`` (``request_id``, ``protoqa/n_lists``,
    ``protoqa/n_responders`` (``R_q``), ``protoqa/n_groups`` and each key of ``keys``, null where a
    request has no answers) and ``counts`` (requests, lists, lines, matches)."""

    per_request: pl.DataFrame
    keys: tuple[str, ...]
    counts: dict[str, int] = field(default_factory=dict)


def protoqa_keys(ks: Sequence[int]) -> tuple[str, ...]:
    """The metric columns at ``ks``: ``protoqa/recall@K/per_responder``, ``protoqa/recall@K/union``,
    ``protoqa/max_answers@K``."""
    ks = sorted(set(ks))
    return (
        *(f"{PREFIX}/recall@{k}/per_responder" for k in ks),
        *(f"{PREFIX}/recall@{k}/union" for k in ks),
        *(f"{PREFIX}/max_answers@{k}" for k in ks),
    )


def _assign(member: np.ndarray, weights: np.ndarray) -> float:
    """``max over one-to-one assignments of the summed weights`` of the matched groups (``member``:
    lines x groups, boolean)."""
    if member.size == 0:
        return 0.0
    gain = member * weights[None, :]
    rows, cols = linear_sum_assignment(-gain)
    return float(gain[rows, cols].sum())


def score_protoqa(
    request_ids: Sequence[str] | pl.Series,
    lists: Sequence[Sequence[str | None]],
    answers: pl.DataFrame,
    *,
    list_request: Sequence[int] | np.ndarray | None = None,
    ks: Sequence[int] = (1, 3, 5, 10),
) -> ProtoQAScores:
    """Score L lists of answer strings (``None`` = an empty line) against their own questions' groups.

    ``request_ids`` (N) names the requests; ``list_request[l]`` is the request row list ``l`` answers
    (default: list l answers row l); ``answers``: ``ANSWERS_SCHEMA`` rows (others ignored). Shapes: lines
    are flattened to ``(line, position, request)``, joined to the groups' ``(request, key)`` strings to
    give matches ``(line, group)``; per list, ``first[l, g]`` is the first matching position of group g,
    and at K the credited groups are those with ``first < K``; their weights summed per list
    (``np.bincount``) over the per-request denominators give ``(L,)`` values per key, averaged per
    request (``(N,)``). Lists where one line matches two groups are assigned exactly instead.
    """
    ids = [str(x) for x in (request_ids.to_list() if isinstance(request_ids, pl.Series) else request_ids)]
    n_req, n_lists = len(ids), len(lists)
    group_L = np.arange(n_req) if list_request is None else np.asarray(list_request, dtype=np.int64).ravel()
    if group_L.shape != (n_lists,):
        raise ValueError(f"{n_lists} lists but list_request maps {group_L.shape[0]} (one entry per list)")
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ValueError(f"cut-offs must be positive integers, got {ks}")
    req_index = pl.DataFrame({"request_id": ids, "q": np.arange(n_req, dtype=np.int64)})
    groups = answer_groups(answers.join(req_index.select("request_id"), on="request_id", how="semi"))
    groups = groups.join(req_index, on="request_id", how="inner")
    # one row per (request, group): a global group index gg, its weights
    per_group = (
        groups.group_by("q", "group", maintain_order=True)
        .agg(pl.col("cluster").first(), pl.col("responders").first(), pl.col("count").first())
        .with_row_index("gg")
    )
    groups = groups.join(per_group.select("q", "group", "gg"), on=["q", "group"])
    q_g = per_group["q"].to_numpy()
    r_g = per_group["responders"].to_numpy().astype(np.float64)
    u_g = (r_g > 0).astype(np.float64)
    c_g = np.where(per_group["cluster"].to_numpy(), per_group["count"].to_numpy(), 0).astype(np.float64)
    R_q = np.bincount(q_g, weights=r_g, minlength=n_req)
    U_q = np.bincount(q_g, weights=u_g, minlength=n_req)
    has_answers = np.bincount(q_g, minlength=n_req) > 0
    # the evaluator's oracle at K: the sum of the K largest cluster counts of each request
    top = (
        per_group.filter("cluster")
        .group_by("q")
        .agg(pl.col("count").sort(descending=True))
        .select("q", *(pl.col("count").list.head(k).list.sum().alias(str(k)) for k in ks))
    )
    oracle = {}
    for k in ks:
        oracle[k] = np.zeros(n_req)
        oracle[k][top["q"].to_numpy()] = top[str(k)].to_numpy()

    lengths = np.array([len(x) for x in lists], dtype=np.int64)
    flat = [t for x in lists for t in x]
    uniq = {t: _key(t) for t in set(flat) if t is not None}
    lines = pl.DataFrame(
        {
            "l": np.repeat(np.arange(n_lists), lengths),
            "p": np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths),
            "q": np.repeat(group_L, lengths),
            "key": [None if t is None else uniq[t] for t in flat],
        },
        schema={"l": pl.Int64, "p": pl.Int64, "q": pl.Int64, "key": pl.String},
    )
    matches = lines.drop_nulls("key").join(groups.select("q", "key", "gg"), on=["q", "key"], how="inner")
    l_m = matches["l"].to_numpy()
    p_m = matches["p"].to_numpy()
    gg_m = matches["gg"].to_numpy().astype(np.int64)
    multi = matches.group_by("l", "p").len().filter(pl.col("len") > 1)
    ambiguous = np.zeros(n_lists, dtype=bool)
    ambiguous[multi["l"].to_numpy()] = True

    # first matching position of each (list, group); credited at K when first < K
    first = (
        pl.DataFrame({"l": l_m, "gg": gg_m, "p": p_m}).group_by("l", "gg").agg(pl.col("p").min())
        if l_m.size
        else pl.DataFrame(schema={"l": pl.Int64, "gg": pl.Int64, "p": pl.Int64})
    )
    f_l, f_g, f_p = (first[c].to_numpy().astype(np.int64) for c in ("l", "gg", "p"))
    columns: dict[str, np.ndarray] = {}
    for k in ks:
        ok = f_p < k
        hits = {
            name: np.bincount(f_l[ok], weights=w[f_g[ok]], minlength=n_lists)
            for name, w in (("r", r_g), ("u", u_g), ("c", c_g))
        }
        for li in np.flatnonzero(ambiguous):  # a line matching two groups: assign exactly
            sel = (l_m == li) & (p_m < k)
            gs = np.unique(gg_m[sel])
            member = np.zeros((k, gs.size), dtype=bool)
            member[p_m[sel], np.searchsorted(gs, gg_m[sel])] = True
            for name, w in (("r", r_g), ("u", u_g), ("c", c_g)):
                hits[name][li] = _assign(member, w[gs])
        q = group_L
        with np.errstate(invalid="ignore", divide="ignore"):
            values = {
                f"{PREFIX}/recall@{k}/per_responder": np.where(R_q[q] > 0, hits["r"] / R_q[q], np.nan),
                f"{PREFIX}/recall@{k}/union": np.where(U_q[q] > 0, hits["u"] / U_q[q], np.nan),
                f"{PREFIX}/max_answers@{k}": np.where(oracle[k][q] > 0, hits["c"] / oracle[k][q], np.nan),
            }
        for name, v in values.items():
            good = ~np.isnan(v)
            s = np.bincount(group_L[good], weights=v[good], minlength=n_req)
            c = np.bincount(group_L[good], minlength=n_req)
            columns[name] = np.where(c > 0, s / np.maximum(c, 1), np.nan)
    keys = protoqa_keys(ks)
    frame = pl.DataFrame(
        {
            "request_id": ids,
            f"{PREFIX}/n_lists": np.bincount(group_L, minlength=n_req).astype(np.int64),
            WEIGHT: R_q.astype(np.int64),
            f"{PREFIX}/n_groups": U_q.astype(np.int64),
            **{k: columns[k] for k in keys},
        },
        nan_to_null=True,
    )
    counts = {
        "n_requests": n_req,
        "n_requests_without_answers": int((~has_answers).sum()),
        "n_requests_without_responders": int((has_answers & (R_q == 0)).sum()),
        "n_lists": n_lists,
        "n_lines": int(lengths.sum()),
        "n_matched_lines": int(matches.select("l", "p").n_unique()) if matches.height else 0,
        "n_ambiguous_lines": multi.height,
        "n_responders": int(R_q.sum()),
        "n_groups": int(U_q.sum()),
        "n_unclustered_groups": int(((~per_group["cluster"].to_numpy()) & (r_g > 0)).sum()),
    }
    return ProtoQAScores(frame, keys, counts)


def _weights(per_request: pl.DataFrame, key: str) -> np.ndarray:
    """Per-request weights of a protoqa key: ``R_q`` for per-responder keys, else 1; 0 where null."""
    w = (
        per_request[WEIGHT].cast(pl.Float64).to_numpy()
        if key.endswith("/per_responder")
        else np.ones(per_request.height)
    )
    return np.where(per_request[key].is_null().to_numpy(), 0.0, w)


def _num_den(per_request: pl.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    w = np.stack([_weights(per_request, k) for k in keys], axis=1)
    v = np.stack([per_request[k].fill_null(0.0).to_numpy().astype(np.float64) for k in keys], axis=1)
    return w * v, w


def _view(key: str) -> tuple[str, str]:
    """``"protoqa/recall@5/union"`` -> ``("union", "recall@5")``; ``"protoqa/max_answers@5"`` ->
    ``("max_answers", "max_answers@5")``."""
    parts = key.split("/")
    return (parts[2], parts[1]) if len(parts) == 3 else ("max_answers", parts[1])


def protoqa_block(scores: ProtoQAScores, config: BootstrapConfig = DEFAULT_CI) -> dict[str, Any]:
    """The ``protoqa`` block of a result: ``{"matching", "n_requests", "per_responder": {"recall@K":
    {"mean", "ci_low", "ci_high"}}, "union": {...}, "max_answers": {"max_answers@K": {...}}, "counts"}``;
    means as the module docstring weights them, intervals by bootstrap over requests (``eval.bootstrap``)."""
    keys = list(scores.keys)
    num, den = _num_den(scores.per_request, keys)
    iv = ratio_of_sums(num, den, config)
    out: dict[str, Any] = {"matching": MATCHING, "n_requests": scores.per_request.height}
    for i, key in enumerate(keys):
        view, name = _view(key)
        cell = {"mean": float(iv.estimate[i]), "ci_low": float(iv.low[i]), "ci_high": float(iv.high[i])}
        out.setdefault(view, {})[name] = cell
    out["counts"] = dict(scores.counts)
    return out


def protoqa_compare(
    a: pl.DataFrame, b: pl.DataFrame, keys: Sequence[str], config: BootstrapConfig = DEFAULT_CI
) -> dict[str, dict[str, float]]:
    """Paired differences A - B of protoqa keys on the same requests (two per-request tables, e.g. two
    ``per_request.parquet``): ``{key: {"mean", "ci_low", "ci_high"}}``, as ``eval.bootstrap.compare``."""
    if set(a["request_id"].to_list()) != set(b["request_id"].to_list()):
        raise ValueError("the two runs were scored on different requests; score both on the same split")
    b = a.select("request_id").join(b, on="request_id", how="left", maintain_order="left")
    na, da = _num_den(a, keys)
    nb, db = _num_den(b, keys)
    iv = paired_difference(na, da, nb, db, config)
    return {
        k: {"mean": float(iv.estimate[i]), "ci_low": float(iv.low[i]), "ci_high": float(iv.high[i])}
        for i, k in enumerate(keys)
    }


def protoqa_result(
    answers: pl.DataFrame | None,
    requests: pl.DataFrame,
    lists: Sequence[Sequence[str | None]],
    *,
    list_request: Sequence[int] | np.ndarray | None = None,
    ks: Sequence[int],
    config: BootstrapConfig = DEFAULT_CI,
) -> tuple[dict[str, Any], pl.DataFrame] | None:
    """What ``eval.run.evaluate_model`` adds for a dataset that carries answers (``PooledDataset.answers``,
    ProtoQA): ``(block, per-request columns)`` (:func:`protoqa_block`; the table keyed by ``request_id``,
    to join onto ``per_request.parquet``); None when ``answers`` is None (another source, or a dataset
    prepared before answers were carried)."""
    if answers is None:
        return None
    scores = score_protoqa(requests["request_id"], lists, answers, list_request=list_request, ks=ks)
    return protoqa_block(scores, config), scores.per_request


def with_protoqa(per_request: pl.DataFrame, table: pl.DataFrame | None) -> pl.DataFrame:
    """``per_request`` with the protoqa columns of ``table`` joined on ``request_id`` (unchanged when None)."""
    if table is None:
        return per_request
    return per_request.join(table, on="request_id", how="left", maintain_order="left")


def protoqa_markdown(block: dict[str, Any] | None) -> str:
    """A paragraph for ``report.md``: the :func:`protoqa_block` means with their intervals ("" for None)."""
    if not block:
        return ""
    parts = []
    for view, label in (("per_responder", "per-responder"), ("union", "union"), ("max_answers", "")):
        for name, cell in block.get(view, {}).items():
            shown = f"{label} {name}" if label else name.replace("max_answers", "Max Answers")
            parts.append(f"{shown} {cell['mean']:.3f} [{cell['ci_low']:.3f}, {cell['ci_high']:.3f}]")
    return (
        f"\nMatched per question as ProtoQA's evaluator does ({block['n_requests']} requests; "
        '`metrics.json["protoqa"]`): ' + "; ".join(parts) + ".\n"
    )
