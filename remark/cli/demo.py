"""``remark demo``: synthetic (or ProtoQA) data -> tiny model -> SFT -> ReMaRk and Rank-GRPO -> report.

Examples::

    remark demo                                   # the embedded synthetic world: 3-6 minutes on 2 CPU cores
    remark demo --fast --out runs/demo_fast       # tiny everything, under a minute (numbers meaningless)
    remark demo --data protoqa --data-dir protoqa-data/data/dev/dev.scraped.jsonl --out runs/demo_protoqa
                                                  # real ProtoQA (download it first): 7-10 minutes

Writes ``report.md``, ``curves.png`` and ``summary.json`` (plus every stage's outputs) under ``--out``
and prints where the report is. See ``remark.demo`` (a package: settings, stages, runs, evaluation,
report, pipeline) for what runs and where it departs from the paper.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(subparsers) -> None:
    from remark.demo import DATA_CHOICES

    p = subparsers.add_parser(
        "demo",
        help="ReMaRk vs Rank-GRPO end to end on CPU in minutes (synthetic data; or ProtoQA)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="output folder (default %(default)s)")
    p.add_argument("--data", choices=DATA_CHOICES, default="synthetic", help="data (default %(default)s)")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="ProtoQA: dev.scraped.jsonl, the folder holding it, or a `remark prep protoqa --items clusters` output",
    )
    p.add_argument(
        "--steps", type=int, default=None, help="RL steps per method (default: the data's default)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of everything (default 0)")
    p.add_argument("--fast", action="store_true", help="tiny settings for a smoke run (seconds)")
    p.add_argument(
        "--sequential", action="store_true", help="run the two methods one after the other, not side by side"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from remark.demo import default_settings, run_demo

    settings = default_settings(
        args.data,
        fast=args.fast,
        steps=args.steps,
        seed=args.seed,
        data_dir=args.data_dir,
        parallel=False if args.sequential else None,
    )
    console = Console(stderr=args.json)
    summary = run_demo(settings, args.out, console=console)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    k = settings.k
    for mode in ("sampled", "greedy"):
        for m in ("remark", "rank_grpo"):
            cell = summary["test"][m][mode]["per_responder"][f"recall@{k}"]
            console.print(
                f"{summary['runs'][m]['label']:<10} test recall@{k} per responder ({mode}): {cell['mean']:.3f} "
                f"[{cell['ci_low']:.3f}, {cell['ci_high']:.3f}]"
            )
        d = summary["paired"]["remark_vs_rank_grpo"][mode]["per_responder"][f"recall@{k}"]
        console.print(
            f"{'difference':<10} ReMaRk - Rank-GRPO ({mode}): {100 * d['mean']:+.2f} points "
            f"[{100 * d['ci_low']:+.2f}, {100 * d['ci_high']:+.2f}]"
        )
    console.print(f"finished in {summary['timing']['total_s'] / 60:.1f} min")
    console.print(f"report: {args.out / 'report.md'}", soft_wrap=True)  # a long path stays one line
    return 0
