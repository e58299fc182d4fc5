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
    f.add_argument(
        "--out",
        type=Path,
        required=True,
        help="folder for the dataset (swapped in once every file is downloaded; new, empty, or an earlier fetch)",
    )
    f.add_argument(
        "--force", action="store_true", help="replace --out even if it is a folder remark did not write"
    )
    f.set_defaults(func=run_fetch)


def run_fetch(args: argparse.Namespace) -> int:
    from data_prep.fetch import fetch

    written = fetch(args.name, args.out, progress=print, force=args.force)
    print(f"wrote {len(written)} files under {args.out}")
    return 0
