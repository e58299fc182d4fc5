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
or a near-duplicate one; several twins are pooled):

- ``target_overlap``: of their target mentions (each responder's items, one mention per responder and
  item), the share whose item is in the union of their twins' training unions, pooled over requests
  (sum of hits / sum of mentions);
- ``target_overlap_items``: the same over their distinct union items.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

import numpy as np
import polars as pl

from data_prep.request_split import NEAR_DUPLICATE_THRESHOLD, normalize_prompt, prompt_texts, twin_pairs


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
    when some test request has a twin)}``.
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
    }
    if test.height == 0 or train.height == 0:
        return out
    test_texts, train_texts = prompt_texts(test), prompt_texts(train)
    qi, ci, _ = twin_pairs(test_texts, train_texts, threshold=threshold)
    twinned = np.unique(qi)
    train_keys = {normalize_prompt(t) for t in train_texts}
    out["exact_prompt"] = sum(normalize_prompt(t) in train_keys for t in test_texts)
    out["near_duplicate_prompt"] = int(twinned.size)
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
    if overlap["warning"]:
        lines.append(f"warning: {overlap['warning']}")
    return lines


def warn(overlap: dict[str, Any] | None, file: TextIO | None = None) -> bool:
    """Print the overlap's warning (``warning: ...``) on ``file`` (stderr); True when there was one."""
    if not overlap or not overlap.get("warning"):
        return False
    print(f"warning: {overlap['warning']}", file=file or sys.stderr)
    return True
