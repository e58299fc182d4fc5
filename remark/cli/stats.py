"""``remark stats DIR``: statistics of a prepared dataset (recomputed from requests.parquet)."""

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
    from data_prep.stats import dataset_stats, format_stats

    ds = load_dataset(args.dir)
    stats = dataset_stats(ds.requests)
    stats["responder_rows"] = ds.responder_rows.height
    stats["catalog_items"] = len(ds.catalog)
    prep = (read_stats(args.dir) or {}).get("prep")
    if prep is not None:
        stats["prep"] = prep
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        print(
            f"{args.dir}: source {ds.meta['source']}, domain {ds.meta['domain']}, {len(ds.catalog)} catalog items"
        )
        print(format_stats(stats))
    return 0
