"""Dataset statistics of a pooled table: how many responders, how much they agree, what failed to ground.

All figures come from ``requests`` alone (one polars pass each), so ``remark stats`` works on any
prepared directory; ``remark prep`` adds what only preparation knows (rows skipped, seen mentions
removed) under ``"prep"`` in ``stats.json``.

Definitions (c_i = responders naming union item i, n_x = responders of request x):

- ``single_mention_item_share``: share of union items with c_i = 1, over all requests' items (micro);
  for such an item ReMaRk's capped reward min(c_i, 1) equals the per-responder hits summed over
  responders. ``..._multi`` restricts it to requests with n_x >= 2 (for n_x = 1 it is 1 trivially).
- ``union_reward_equals_summed_hits_share``: share of requests whose c_i are all 1, where the union
  reward of *any* list equals the sum of its per-responder hits.
- ``ungrounded_share``: distinct ungrounded mentions / (distinct ungrounded mentions + union items),
  summed over requests.

:func:`split_group_balance` checks the splits a dataset was given by near-duplicate group
(``data_prep.request_split.group_balance``): one group larger than its split's share makes the
fractions asked for impossible. :func:`outlier_block` lists the requests whose responder count is an
outlier in their split (``data_prep.outliers``, the rule in its docstring) with their share of the split's
per-responder weight.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from data_prep.outliers import RULE, outlier_requests
from data_prep.request_split import group_balance, near_duplicate_groups, prompt_texts

#: Histogram bins of responders per request: (upper bound inclusive, label).
BINS = [(1, "1"), (2, "2"), (3, "3"), (4, "4"), (5, "5"), (10, "6-10"), (20, "11-20"), (50, "21-50")]
BINS += [(100, "51-100"), (200, "101-200"), (500, "201-500"), (1000, "501-1000")]


def _summary(col: str) -> list[pl.Expr]:
    c = pl.col(col)
    return [
        c.min().alias(f"{col}.min"),
        c.median().alias(f"{col}.median"),
        c.mean().alias(f"{col}.mean"),
        c.max().alias(f"{col}.max"),
        c.sum().alias(f"{col}.total"),
    ]


def _bin_label() -> pl.Expr:
    n = pl.col("n_responders")
    expr = pl.when(n <= BINS[0][0]).then(pl.lit(BINS[0][1]))
    for bound, label in BINS[1:]:
        expr = expr.when(n <= bound).then(pl.lit(label))
    return expr.otherwise(pl.lit(f">{BINS[-1][0]}")).alias("bin")


def _round(value: Any) -> Any:
    """Floats rounded to 1e-6; NaN (a share over nothing, e.g. no multi-responder request) -> None."""
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 6)
    return value


def dataset_stats(requests: pl.DataFrame) -> dict[str, Any]:
    """The statistics listed in the module docstring, as a JSON-ready dict (floats rounded to 1e-6)."""
    if requests.is_empty():
        return {"requests": 0}
    per_request = requests.lazy().select(
        "split",
        pl.col("n_responders").cast(pl.Int64),
        pl.col("union").list.len().alias("union_size"),
        pl.col("seen").list.len().alias("seen_size"),
        pl.col("ungrounded").list.len().alias("ungrounded_size"),
        (pl.col("counts").list.eval(pl.element() == 1).list.sum()).alias("single"),
        pl.col("counts").list.eval(pl.element() == 1).list.all().alias("all_single"),
        pl.col("responders").list.eval(pl.element().list.len()).alias("items_per_responder"),
    )
    row = (
        per_request.select(
            pl.len().alias("requests"),
            *_summary("n_responders"),
            *_summary("union_size"),
            (pl.col("single").sum() / pl.col("union_size").sum()).alias("single_mention_item_share"),
            (
                pl.col("single").filter(pl.col("n_responders") >= 2).sum()
                / pl.col("union_size").filter(pl.col("n_responders") >= 2).sum()
            ).alias("single_mention_item_share_multi"),
            pl.col("all_single").mean().alias("union_reward_equals_summed_hits_share"),
            (pl.col("n_responders") == 1).mean().alias("single_responder_request_share"),
            (
                pl.col("ungrounded_size").sum()
                / (pl.col("ungrounded_size").sum() + pl.col("union_size").sum())
            ).alias("ungrounded_share"),
            pl.col("seen_size").mean().alias("seen_per_request.mean"),
            pl.col("items_per_responder").explode().mean().alias("items_per_responder.mean"),
            pl.col("items_per_responder").explode().max().alias("items_per_responder.max"),
        )
        .collect()
        .row(0, named=True)
    )
    hist = per_request.select(_bin_label()).group_by("bin").len().collect()
    order = {label: i for i, (_, label) in enumerate(BINS)}
    histogram = {b: n for b, n in sorted(hist.iter_rows(), key=lambda r: order.get(r[0], len(order)))}
    by_split = (
        per_request.group_by("split")
        .agg(
            pl.len().alias("requests"),
            pl.col("n_responders").mean().alias("n_responders.mean"),
            pl.col("union_size").mean().alias("union_size.mean"),
        )
        .sort("split")
        .collect()
    )
    out: dict[str, Any] = {"requests": row.pop("requests")}
    for group in ("n_responders", "union_size", "seen_per_request", "items_per_responder"):
        keys = [k for k in row if k.startswith(group + ".")]
        out[group] = {k.split(".", 1)[1]: _round(row.pop(k)) for k in keys}
    out["n_responders"]["histogram"] = histogram
    out.update({k: _round(v) for k, v in row.items()})
    out["by_split"] = {
        r["split"]: {k: _round(v) for k, v in r.items() if k != "split"}
        for r in by_split.iter_rows(named=True)
    }
    return out


def format_stats(stats: dict[str, Any]) -> str:
    """A short human-readable report of :func:`dataset_stats` (plus ``prep`` when present)."""
    if not stats.get("requests"):
        return "requests: 0"
    n, u = stats["n_responders"], stats["union_size"]
    lines = [
        f"requests: {stats['requests']}  ("
        + ", ".join(f"{k} {v['requests']}" for k, v in stats["by_split"].items())
        + ")",
        f"responders per request: min {n['min']}  median {n['median']:g}  mean {n['mean']:.2f}  max {n['max']}"
        f"  (total {n['total']})",
        "  histogram: " + "  ".join(f"{k}: {v}" for k, v in n["histogram"].items()),
        f"union size: min {u['min']}  median {u['median']:g}  mean {u['mean']:.2f}  max {u['max']}",
        f"items per responder: mean {stats['items_per_responder']['mean']:.2f}"
        f"  max {stats['items_per_responder']['max']}",
        f"single-responder requests: {stats['single_responder_request_share']:.1%}",
        f"union items named by exactly one responder (c_i = 1): {stats['single_mention_item_share']:.1%}"
        + (
            f"  (requests with n_x >= 2: {stats['single_mention_item_share_multi']:.1%})"
            if stats.get("single_mention_item_share_multi") is not None
            else ""
        ),
        f"requests where union reward = summed per-responder hits (all c_i = 1): "
        f"{stats['union_reward_equals_summed_hits_share']:.1%}",
        f"ungrounded share of mentions: {stats['ungrounded_share']:.1%}",
        f"seen items per request: mean {stats['seen_per_request']['mean']:.2f}",
    ]
    prep = stats.get("prep")
    if prep:
        skipped = prep.get("skipped") or {}
        lines.append("skipped rows: " + (", ".join(f"{k} {v}" for k, v in skipped.items()) or "none"))
        notes = {k: v for k, v in (prep.get("notes") or {}).items() if v}
        if notes:
            lines.append("notes: " + ", ".join(f"{k} {v}" for k, v in notes.items()))
    return "\n".join(lines)


def split_fractions_of(meta: dict[str, Any]) -> tuple[dict[str, float], float] | None:
    """The fractions and near-duplicate threshold a dataset's splits were hashed with, from its meta:
    ``remark prep``'s ``split_fractions`` / ``split_near_duplicate_threshold`` (None when a split was
    given with an input, by time, or without grouping), or the demo's ``question_split`` /
    ``near_duplicate_threshold``."""
    demo = meta.get("demo") or {}
    if demo.get("question_split") and demo.get("near_duplicate_threshold") is not None:
        names = ("train", "valid", "test")
        return dict(zip(names, demo["question_split"], strict=True)), float(demo["near_duplicate_threshold"])
    fractions, threshold = meta.get("split_fractions"), meta.get("split_near_duplicate_threshold")
    if not fractions or threshold is None or any((i or {}).get("split") for i in meta.get("inputs") or []):
        return None
    return dict(fractions), float(threshold)


def split_group_balance(requests: pl.DataFrame, meta: dict[str, Any]) -> dict[str, Any] | None:
    """``group_balance`` of the requests' splits over their near-duplicate groups (recomputed from the
    prompts at the threshold the dataset was split with), plus ``threshold``; None when the meta names no
    hashed fractions (:func:`split_fractions_of`) or there is no prompt column."""
    known = split_fractions_of(meta)
    if known is None or "prompt" not in requests.columns or requests.is_empty():
        return None
    fractions, threshold = known
    groups = near_duplicate_groups(prompt_texts(requests), threshold=threshold)
    out = group_balance(groups, requests["split"].to_list(), fractions, requests["request_id"].to_list())
    return {"threshold": threshold, **out}


def outlier_block(requests: pl.DataFrame) -> dict[str, Any]:
    """``{"rule": RULE, "requests": [...]}``: one dict per request ``outlier_requests`` flags (``request_id``,
    ``split``, ``n_responders``, ``weight_share`` rounded to 1e-6, ``rules``: the rules that fired,
    ``reason``)."""
    flagged = outlier_requests(requests)
    rows = [
        {
            "request_id": r["request_id"],
            "split": r["split"],
            "n_responders": r["n_responders"],
            "weight_share": _round(r["weight_share"]),
            "rules": [name for name in ("equal_counts", "responders") if r[name]],
            "reason": r["reason"],
        }
        for r in flagged.iter_rows(named=True)
    ]
    return {"rule": RULE, "requests": rows}


def outlier_lines(block: dict[str, Any]) -> list[str]:
    """:func:`outlier_block` in words: a count and the rule, then one line per flagged request."""
    rows = block["requests"]
    if not rows:
        return [f"responder-count outliers: none (rule: {block['rule']})"]
    lines = [f"responder-count outliers: {len(rows)} (rule: {block['rule']})"]
    for r in rows:
        lines.append(
            f"  {r['request_id']} ({r['split'] or 'no split'}): {r['n_responders']} responders, "
            f"{r['weight_share']:.1%} of the split's per-responder weight; {r['reason']}"
        )
    return lines
