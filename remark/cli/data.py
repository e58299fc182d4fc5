"""``remark data fetch NAME --out DIR``: download a public dataset (needs internet; never run in tests)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> None:
    from data_prep.fetch import DATASETS

    p = subparsers.add_parser("data", help="public datasets: fetch")
    sub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)
    f = sub.add_parser("fetch", help="download a public dataset, pinned and checksummed")
    f.add_argument("name", choices=list(DATASETS), help=", ".join(DATASETS))
    f.add_argument("--out", type=Path, required=True, help="directory to write into")
    f.set_defaults(func=run_fetch)


def run_fetch(args: argparse.Namespace) -> int:
    from data_prep.fetch import fetch

    written = fetch(args.name, args.out, progress=print)
    print(f"wrote {len(written)} files under {args.out}")
    return 0
