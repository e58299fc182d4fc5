"""Split leakage: how many evaluated requests are training requests, and how much of their targets the
training answers already hold.

A test request whose prompt is also a training prompt (the same question, or a near duplicate:
``data_prep.request_split``) is scored on answers the model was trained on: a lookup of the training
answers scores near the ceiling, so the numbers measure memorisation: split by request. Such requests are found through their prompts, never their ids, so a respondent split
(``data_prep.holdout``: requests ``<qid>`` in train and ``<qid>#test`` in test, same prompt) is seen
for what it is.

:func:`split_overlap` (a JSON-able dict) is what ``remark stats``, ``remark eval baselines``, ``eval
score`` and ``eval run`` record; :func:`overlap_lines` prints it and :func:`warn` puts its warning on
stderr. The cost is one ``cdist`` of the test prompts against the training prompts, in blocks.

Definitions, over the test requests with a *twin* (a training request with the same normalized prompt
or a near-duplicate one; several twins are pooled). Prompts are compared after Unicode normalisation
(``data_prep.request_split.normalize_prompt``: NFKC, case folding), so an NFC, NFD or fullwidth
spelling of a training prompt is its twin:

- ``target_overlap``: of their target mentions (each responder's items, one mention per responder and
  item), the share whose item is in the union of their twins' training unions, pooled over requests
  (sum of hits / sum of mentions);
- ``target_overlap_items``: the same over their distinct union items.

``answer_overlap`` reaches what no string threshold can: a paraphrase with no wording in common ("name
one spanish word everyone knows" / "other than a type of food name a spanish word that most people
know"). It lists the (test, train) pairs, twins left out, whose union item sets have a Jaccard index of
at least :data:`ANSWER_JACCARD` with at least :data:`ANSWER_MIN_SHARED` items in common, for review:
they are *not* regrouped, because answers overlap between different questions too (on ProtoQA's
scraped dev questions, "name an animal you could recognize just by its nose" and "if a woman eats like
a bird, what animal does a man eat like?" share 5 of 8 answers), and a split moved by its answers would
depend on the very targets it holds out. Pairs come from prefix filtering on the items (rarest first),
so the cost stays near linear in the items.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

import numpy as np
import polars as pl

from data_prep.request_split import NEAR_DUPLICATE_THRESHOLD, normalize_prompt, prompt_texts, twin_pairs

#: ``answer_overlap``: the least Jaccard index of two requests' union item sets that flags the pair. On
#: ProtoQA's scraped dev questions it flags the reworded pairs "name something a child can do to earn
#: money" / "before a parttime job name a way that kids earn money" (0.67) and the two "spanish word"
#: questions (0.5), beside different questions with common answers (animals, appliances).
ANSWER_JACCARD = 0.5
#: ``answer_overlap``: the fewest shared items that flag a pair (two single-answer requests naming one
#: film are not a paraphrase).
ANSWER_MIN_SHARED = 3
#: ``answer_overlap``: the most pairs listed (the count covers them all); :func:`overlap_lines` prints
#: the first ``ANSWER_LINES``.
ANSWER_LISTED = 50
ANSWER_LINES = 5


def split_overlap(
    requests: pl.DataFrame,
    *,
    test_split: str = "test",
    train_split: str = "train",
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
) -> dict[str, Any]:
    """The overlap of ``test_split``'s requests with ``train_split``'s (module docstring).

    ``requests``: pooled rows (``request_id``, ``prompt``, ``responders``, ``union``, ``split``).
    Returns ``{"test_split", "train_split", "n_test_requests", "n_train_requests", "exact_prompt",
    "near_duplicate_prompt" (exact ones included), "threshold", "target_overlap",
    "target_overlap_items" (None when no test request has a twin), "warning" (None, or one sentence
    when some test request has a twin), "answer_overlap"}``; ``answer_overlap`` is :func:`answer_pairs`'
    dict (pairs named by ``request_id`` when the rows have one, else by row number in their split).
    """
    if test_split == train_split:
        raise ValueError(f"test_split and train_split are both {test_split!r}")
    test = requests.filter(pl.col("split") == test_split)
    train = requests.filter(pl.col("split") == train_split)
    out: dict[str, Any] = {
        "test_split": test_split,
        "train_split": train_split,
        "n_test_requests": test.height,
        "n_train_requests": train.height,
        "exact_prompt": 0,
        "near_duplicate_prompt": 0,
        "threshold": float(threshold),
        "target_overlap": None,
        "target_overlap_items": None,
        "warning": None,
        "answer_overlap": _answer_dict([], 0),
    }
    if test.height == 0 or train.height == 0:
        return out
    test_texts, train_texts = prompt_texts(test), prompt_texts(train)
    qi, ci, _ = twin_pairs(test_texts, train_texts, threshold=threshold)
    twinned = np.unique(qi)
    train_keys = {normalize_prompt(t) for t in train_texts}
    out["exact_prompt"] = sum(normalize_prompt(t) in train_keys for t in test_texts)
    out["near_duplicate_prompt"] = int(twinned.size)
    out["answer_overlap"] = answer_pairs(test, train, twins=(qi, ci), texts=(test_texts, train_texts))
    if twinned.size == 0:
        return out
    pairs = pl.DataFrame({"t": qi, "c": ci})
    twin_items = (
        pairs.join(_items(train, "union", "c"), on="c", how="inner")
        .select("t", "item")
        .unique()
        .with_columns(hit=True)
    )
    mentions = _items(test, "responders", "t").filter(pl.col("t").is_in(twinned.tolist()))
    items = _items(test, "union", "t").filter(pl.col("t").is_in(twinned.tolist()))
    out["target_overlap"] = _share(mentions, twin_items)
    out["target_overlap_items"] = _share(items, twin_items)
    noun = "training requests" if train_split == "train" else f"{train_split} requests"
    out["warning"] = (
        f"{twinned.size} of {test.height} {test_split} requests are {noun} (same or near-duplicate prompt): "
        "scores on them measure memorisation; split by request"
    )
    return out


def answer_pairs(
    test: pl.DataFrame,
    train: pl.DataFrame,
    *,
    twins: tuple[np.ndarray, np.ndarray] | None = None,
    texts: tuple[list[str], list[str]] | None = None,
    jaccard: float = ANSWER_JACCARD,
    min_shared: int = ANSWER_MIN_SHARED,
) -> dict[str, Any]:
    """The (test, train) request pairs whose answers overlap strongly (module docstring), for review.

    ``test`` / ``train``: pooled rows (``union``, ``prompt``; ``request_id`` names them when present);
    ``twins``: (test row, train row) pairs to leave out (prompt twins, counted already); ``texts``:
    the rows' prompt texts when computed already. A pair is flagged when its union item sets share at
    least ``min_shared`` items and their Jaccard index is at least ``jaccard``; every such pair holds,
    in both sets' prefixes of their ``len - max(ceil(jaccard len), min_shared) + 1`` rarest items (by
    the number of requests naming the item, ties by item), an item in common, so only pairs sharing a
    prefix item are counted.

    Returns ``{"jaccard", "min_shared", "n_test_requests" (flagged ones), "n_pairs", "pairs" (at most
    ``ANSWER_LISTED``, highest Jaccard first: ``{"test", "train", "jaccard", "shared", "test_prompt",
    "train_prompt"}``), "regrouped": False}``.
    """
    sets = pl.concat(
        [
            _item_sets(test, "t"),
            _item_sets(train, "c").rename({"c": "t"}).with_columns(pl.col("t") + test.height),
        ]
    )
    counts = sets.group_by("item").len("df")
    ranked = (
        sets.join(counts, on="item")
        .sort("t", "df", "item")
        .with_columns(
            pl.int_range(pl.len()).over("t").alias("pos"),
            pl.len().over("t").alias("size"),
        )
    )
    need = pl.max_horizontal((pl.col("size") * jaccard - 1e-9).ceil().cast(pl.Int64), pl.lit(min_shared))
    prefix = ranked.filter((pl.col("size") >= min_shared) & (pl.col("pos") < pl.col("size") - need + 1))
    left = prefix.filter(pl.col("t") < test.height).select("t", "item")
    right = prefix.filter(pl.col("t") >= test.height).select(pl.col("t").alias("c"), "item")
    candidates = left.join(right, on="item").select("t", "c").unique()
    full_t = ranked.filter(pl.col("t") < test.height).select("t", "item", pl.col("size").alias("size_t"))
    full_c = ranked.filter(pl.col("t") >= test.height).select(
        pl.col("t").alias("c"), "item", pl.col("size").alias("size_c")
    )
    pairs = (
        candidates.join(full_t, on="t")
        .join(full_c, on=["c", "item"])
        .group_by("t", "c")
        .agg(pl.len().alias("shared"), pl.col("size_t").first(), pl.col("size_c").first())
        .with_columns(
            (pl.col("shared") / (pl.col("size_t") + pl.col("size_c") - pl.col("shared"))).alias("j")
        )
        .filter((pl.col("shared") >= min_shared) & (pl.col("j") >= jaccard - 1e-12))
        .with_columns(pl.col("c") - test.height)
    )
    if twins is not None and len(twins[0]):
        known = pl.DataFrame(
            {"t": np.asarray(twins[0]), "c": np.asarray(twins[1])}, schema=pairs.select("t", "c").schema
        )
        pairs = pairs.join(known, on=["t", "c"], how="anti")
    pairs = pairs.sort(["j", "shared", "t", "c"], descending=[True, True, False, False])
    test_texts, train_texts = texts if texts is not None else (prompt_texts(test), prompt_texts(train))
    test_ids, train_ids = _names(test), _names(train)
    listed = [
        {
            "test": test_ids[r["t"]],
            "train": train_ids[r["c"]],
            "jaccard": round(r["j"], 4),
            "shared": r["shared"],
            "test_prompt": _short(test_texts[r["t"]]),
            "train_prompt": _short(train_texts[r["c"]]),
        }
        for r in pairs.head(ANSWER_LISTED).iter_rows(named=True)
    ]
    out = _answer_dict(listed, pairs.height, jaccard, min_shared)
    out["n_test_requests"] = pairs["t"].n_unique()
    return out


def _answer_dict(
    pairs: list[dict[str, Any]],
    n_pairs: int,
    jaccard: float = ANSWER_JACCARD,
    min_shared: int = ANSWER_MIN_SHARED,
) -> dict[str, Any]:
    return {
        "jaccard": jaccard,
        "min_shared": min_shared,
        "n_test_requests": len({p["test"] for p in pairs}),
        "n_pairs": n_pairs,
        "pairs": pairs,
        "regrouped": False,
    }


def _item_sets(frame: pl.DataFrame, index: str) -> pl.DataFrame:
    """(index, item) rows of ``union``, each item once per row."""
    return _items(frame, "union", index).unique()


def _names(frame: pl.DataFrame) -> list[str]:
    """Each row's ``request_id``, or its row number (``#0``, ``#1``, ...) without one."""
    if "request_id" in frame.columns:
        return [str(x) for x in frame["request_id"].to_list()]
    return [f"#{i}" for i in range(frame.height)]


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _items(frame: pl.DataFrame, column: str, index: str) -> pl.DataFrame:
    """(index, item) rows of a list column (``union``) or a list-of-lists one (``responders``: one row
    per responder and item), ``index`` being the row's position in ``frame``."""
    rows = frame.select(pl.int_range(pl.len(), dtype=pl.Int64).alias(index), pl.col(column).alias("item"))
    rows = rows.explode("item")
    if column == "responders":
        rows = rows.explode("item")
    return rows.drop_nulls("item")


def _share(targets: pl.DataFrame, twin_items: pl.DataFrame) -> float | None:
    """Share of ``targets`` rows (t, item) whose item is among ``twin_items`` of the same t."""
    if targets.height == 0:
        return None
    hits = targets.join(twin_items, on=["t", "item"], how="left")["hit"].fill_null(False).sum()
    return round(hits / targets.height, 6)


def overlap_against_train(
    requests: pl.DataFrame,
    split: str | None,
    *,
    train_split: str = "train",
    evaluated: pl.DataFrame | None = None,
) -> dict | None:
    """:func:`split_overlap` of ``split`` against ``train_split`` in ``requests`` (a dataset's), or None
    where it means nothing: every split at once (None or ``"all"``), the training split itself, no
    request in ``train_split``, or no ``prompt`` column (a frame built for scoring alone).
    ``evaluated`` (rows of ``split``, e.g. the requests a command scored) replaces the split's rows of
    ``requests``."""
    if split in (None, "all", train_split) or "prompt" not in requests.columns:
        return None
    train = requests.filter(pl.col("split") == train_split)
    if train.height == 0:
        return None
    test = requests.filter(pl.col("split") == split) if evaluated is None else evaluated
    columns = ["prompt", "responders", "union", "split"]
    if "request_id" in train.columns and "request_id" in test.columns:
        columns = ["request_id", *columns]
    frame = pl.concat([train.select(columns), test.select(columns)])
    return split_overlap(frame, test_split=split, train_split=train_split)


def overlap_lines(overlap: dict[str, Any]) -> list[str]:
    """Lines for reports: the counts, the target overlap when some request has a twin, the warning."""
    test, train = overlap["test_split"], overlap["train_split"]
    head = f"Split overlap, {test} vs {train}"
    if not overlap["n_train_requests"] or not overlap["n_test_requests"]:
        return [f"{head}: no {train if not overlap['n_train_requests'] else test} requests to compare"]
    lines = [
        f"{head}: {overlap['n_test_requests']} {test} requests, {overlap['n_train_requests']} {train} requests; "
        f"same prompt as a {train} request: {overlap['exact_prompt']}; same or near-duplicate prompt "
        f"(score >= {overlap['threshold']:g}, data_prep.request_split): {overlap['near_duplicate_prompt']}"
    ]
    if overlap["target_overlap"] is not None:
        items = overlap["target_overlap_items"]
        lines.append(
            f"  of those requests' target mentions, {overlap['target_overlap']:.1%} name an answer of their "
            f"{train} twins" + ("" if items is None else f" ({items:.1%} of their distinct answers)")
        )
    lines += answer_lines(overlap.get("answer_overlap"), test, train)
    if overlap["warning"]:
        lines.append(f"warning: {overlap['warning']}")
    return lines


def answer_lines(answers: dict[str, Any] | None, test: str = "test", train: str = "train") -> list[str]:
    """Lines for :func:`answer_pairs`' dict: none when no pair is flagged, else a count and the first
    ``ANSWER_LINES`` pairs (ids, Jaccard index, shared items, prompts)."""
    if not answers or not answers["n_pairs"]:
        return []
    lines = [
        f"  for review, not regrouped: {answers['n_test_requests']} {test} requests share answers with a "
        f"{train} request of another prompt (Jaccard of union items >= {answers['jaccard']:g}, >= "
        f"{answers['min_shared']} shared; {answers['n_pairs']} pairs), e.g."
    ]
    for p in answers["pairs"][:ANSWER_LINES]:
        lines.append(
            f"    {p['test']} ~ {p['train']}: Jaccard {p['jaccard']:.2f}, {p['shared']} shared: "
            f"{p['test_prompt']!r} / {p['train_prompt']!r}"
        )
    return lines


def warn(overlap: dict[str, Any] | None, file: TextIO | None = None) -> bool:
    """Print the overlap's warning (``warning: ...``) on ``file`` (stderr); True when there was one."""
    if not overlap or not overlap.get("warning"):
        return False
    print(f"warning: {overlap['warning']}", file=file or sys.stderr)
    return True
