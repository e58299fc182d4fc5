"""``remark stats DIR``: statistics of a prepared dataset (recomputed from requests.parquet), the
overlap of each split with the training split (``eval.leakage.split_overlap``: test requests that are
training requests by their prompts, with a warning when there is any, and requests whose answers overlap
a training request's, listed for review), and whether one near-duplicate group overfills its split
(``data_prep.stats.split_group_balance``; a warning line on stdout and stderr), and the requests whose
responder count is an outlier in their split (``data_prep.outliers``: id, split, reason, share of the split's
per-responder weight; ``outliers`` in ``--json``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("stats", help="statistics of a prepared dataset directory")
    p.add_argument("dir", type=Path, metavar="DIR", help="a directory written by `remark prep`")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from data_prep.dataset import load_dataset, read_stats
    from data_prep.schema import SPLITS
    from data_prep.stats import dataset_stats, format_stats, outlier_block, outlier_lines, split_group_balance
    from eval.leakage import overlap_against_train, overlap_lines, warn

    ds = load_dataset(args.dir)
    stats = dataset_stats(ds.requests)
    stats["responder_rows"] = ds.responder_rows.height
    stats["catalog_items"] = len(ds.catalog)
    prep = (read_stats(args.dir) or {}).get("prep")
    if prep is not None:
        stats["prep"] = prep
    if "split_near_duplicate_threshold" in ds.meta:
        stats["split_near_duplicate_threshold"] = ds.meta["split_near_duplicate_threshold"]
    present = set(ds.requests["split"].drop_nulls().to_list())
    others = [s for s in SPLITS if s in present] + sorted(present - set(SPLITS))
    overlaps = {s: overlap_against_train(ds.requests, s) for s in others if s != "train"}
    stats["split_overlap"] = {s: o for s, o in overlaps.items() if o is not None}
    stats["outliers"] = outlier_block(ds.requests)
    balance = split_group_balance(ds.requests, ds.meta)
    if balance is not None:
        stats["split_groups"] = balance
    if args.json:
        print(json.dumps(stats, indent=2))
        for overlap in stats["split_overlap"].values():
            warn(overlap)
        warn(balance)
        return 0
    print(
        f"{args.dir}: source {ds.meta['source']}, domain {ds.meta['domain']}, {len(ds.catalog)} catalog items"
    )
    print(format_stats(stats))
    print("\n".join(outlier_lines(stats["outliers"])))
    if "split_near_duplicate_threshold" in stats:
        t = stats["split_near_duplicate_threshold"]
        kept = "not grouped" if t is None else f"kept in one split (score >= {t:g}, data_prep.request_split)"
        print(f"splits remark prep assigned: near-duplicate prompts {kept}")
    if balance is not None:
        print(
            f"near-duplicate groups: {balance['n_groups']} over {balance['n_requests']} requests, the largest "
            f"{balance['largest_group']} ({balance['largest_group_split']})"
        )
        if balance["warning"]:
            print(f"warning: {balance['warning']}")
            warn(balance)
    if "train" not in present:
        print("split overlap: no train split to compare with")
    for overlap in stats["split_overlap"].values():
        print("\n".join(overlap_lines(overlap)))
    return 0
