"""``remark`` console script: a thin dispatcher over subcommand modules.

Each module listed in :data:`COMMANDS` defines ``add_parser(subparsers)``, which registers its
subcommand and sets ``func`` (a callable taking the parsed ``argparse.Namespace`` and returning an exit
code). Modules import heavy libraries (torch, transformers, trl) inside ``func`` only, so ``remark --help``
stays fast. Library code never reads ``sys.argv``; everything here only orchestrates.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from catalog.errors import InputError
from remark import __version__

#: subcommand name -> module defining ``add_parser``. Order is the order shown in ``remark --help``.
COMMANDS: dict[str, str] = {
    "prep": "remark.cli.prep",
    "stats": "remark.cli.stats",
    "data": "remark.cli.data",
    "ground": "remark.cli.ground",
    "diagnose": "remark.cli.diagnose",
    "sft": "remark.cli.sft",
    "train": "remark.cli.train",
    "recipes": "remark.cli.recipes",
    "eval": "remark.cli.eval",
    "curve": "remark.cli.curve",
    "plan-group-size": "remark.cli.plan",
    "demo": "remark.cli.demo",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remark",
        description="Rank-level RL for LLM recommenders: build pooled datasets, train ReMaRk / Rank-GRPO, "
        "evaluate with CIs, plan compute.",
    )
    parser.add_argument("--version", action="version", version=f"remark {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMANDS.values():
        importlib.import_module(module_name).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 1
    try:
        return int(args.func(args) or 0)
    except InputError as err:
        print(f"remark {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
