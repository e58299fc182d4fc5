"""``remark demo``: ProtoQA (or synthetic) data -> tiny model -> SFT -> ReMaRk and Rank-GRPO -> report.

Examples::

    remark demo                                   # real ProtoQA, shipped: 3 RL seeds, 66 min on 2 busy AMD EPYC cores (README)
    remark demo --fast --out runs/demo_fast       # tiny everything, under a minute (numbers meaningless)
    remark demo --data protoqa --data-dir protoqa-data/data/dev/dev.scraped.jsonl --out runs/demo_protoqa
                                                  # another copy of ProtoQA's scraped dev file
    remark demo --data synthetic                  # the embedded synthetic multi-responder world

Writes ``report.md``, ``curves.png`` and ``summary.json`` (plus every stage's outputs) under ``--out``
(atomically: a killed run leaves the previous one) and prints where the report is. The same settings
(``--seed``, ``--seeds``, ``--threads``, ...) give the same numbers however busy the machine is; ``--jobs``
changes the time only. See ``remark.demo`` (a package: settings, stages, runs, evaluation,
report, pipeline) for what runs and where it departs from the paper.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from remark.config.ranges import flag_type


def add_parser(subparsers) -> None:
    from remark.demo import DATA_CHOICES

    p = subparsers.add_parser(
        "demo",
        help="ReMaRk vs Rank-GRPO end to end on CPU (ProtoQA, shipped; or synthetic data; ~66 min on 2 busy cores)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="output folder (default %(default)s)")
    p.add_argument("--data", choices=DATA_CHOICES, default="protoqa", help="data (default %(default)s)")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="ProtoQA: dev.scraped.jsonl, the folder holding it, or a `remark prep protoqa --items clusters` "
        "output (default: the copy shipped in the package)",
    )
    p.add_argument(
        "--steps",
        type=flag_type("--steps"),
        default=None,
        help="RL steps per method (default: the data's default)",
    )
    p.add_argument(
        "--seed",
        type=flag_type("--seed"),
        default=0,
        help="seed of the world, model, warm-up and test sampling (default 0)",
    )
    p.add_argument(
        "--seeds",
        type=flag_type("--seeds"),
        nargs="+",
        default=None,
        metavar="S",
        help="RL seeds, all from the one warm-up: the first runs the learning-rate grid, each further one a "
        "ReMaRk and a Rank-GRPO run at the chosen rates (default 0)",
    )
    p.add_argument(
        "--lr-grid",
        type=flag_type("--lr-grid"),
        nargs="+",
        default=None,
        metavar="LR",
        help="learning rates tried per method on the first RL seed; each method's is chosen on the validation "
        "questions before the test questions are read (default 1e-4 3e-4 1e-3)",
    )
    p.add_argument(
        "--threads",
        type=flag_type("--threads"),
        default=None,
        help="torch/OpenMP/polars threads of every stage process (default 1); part of what sets the numbers",
    )
    p.add_argument(
        "--warmup-threads",
        type=flag_type("--warmup-threads"),
        default=None,
        help="threads of the warm-up process, which runs alone (default: the data's default); part of what "
        "sets the numbers",
    )
    p.add_argument(
        "--jobs",
        type=flag_type("--jobs"),
        default=None,
        help="stage processes at once (default 2); changes the time only",
    )
    p.add_argument(
        "--settings",
        type=Path,
        default=None,
        metavar="FILE",
        help="a YAML file of demo settings (remark.demo.settings.DemoSettings fields) over the data's "
        "defaults; flags override it (e.g. experiments/protoqa_cpu/heldout.yaml)",
    )
    p.add_argument(
        "--resume-from",
        type=Path,
        default=None,
        metavar="DIR",
        help="an unfinished demo's folder with the same settings (the .<out>.unfinished-* one a failed or "
        "interrupted run kept and named, or the .<out>...tmp one a killed run left beside --out): its "
        "finished stages are reused, not run again",
    )
    p.add_argument("--fast", action="store_true", help="tiny settings for a smoke run (seconds)")
    p.add_argument("--sequential", action="store_true", help="one stage process at a time (--jobs 1)")
    p.add_argument(
        "--force", action="store_true", help="replace --out even if it is not an earlier demo output"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from remark.demo import run_demo
    from remark.demo.preflight import check_preflight
    from remark.demo.settings import resolve_settings

    # the settings checked whole (each value, their combinations, the folders they name, the base model, the
    # memory they need) before run_demo writes anything: one line naming the file and field, or the flag
    settings, origins = resolve_settings(
        args.data,
        fast=args.fast,
        steps=args.steps,
        seed=args.seed,
        data_dir=args.data_dir,
        rl_seeds=args.seeds,
        lr_grid=args.lr_grid,
        settings_file=args.settings,
        threads=args.threads,
        warmup_threads=args.warmup_threads,
        jobs=1 if args.sequential else args.jobs,
    )
    check_preflight(settings, origins)
    console = Console(stderr=args.json)
    summary = run_demo(settings, args.out, console=console, force=args.force, resume_from=args.resume_from)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    k, n = settings.k, len(settings.rl_seeds)
    console.print(summary["headline"]["sentence"].replace("**", ""), soft_wrap=True, markup=False)
    across = summary["across_seeds"]
    seeds = "one RL seed" if n == 1 else f"mean of {n} seeds"
    for mode in ("sampled", "greedy"):
        for m in ("sft", "remark", "rank_grpo"):
            cell = across["models"][m][mode]["per_responder"]["requests"]
            label = "SFT start" if m == "sft" else summary["runs"][m]["label"]
            console.print(
                f"{label:<10} test recall@{k} per responder ({mode}, {seeds}): {_num(cell['mean'])} "
                f"[{_num(cell['ci_low'])}, {_num(cell['ci_high'])}]",
                markup=False,
            )
        d = across["paired"]["remark_vs_rank_grpo"][mode]["per_responder"]
        per_seed = ", ".join(f"{100 * v:+.2f}" for v in d["seeds"]["values"])
        over_seeds = (
            f"per seed {per_seed}; over seeds [{_pts(d['seeds']['ci_low'])}, {_pts(d['seeds']['ci_high'])}], "
            if n > 1
            else ""
        )
        console.print(
            f"{'difference':<10} ReMaRk - Rank-GRPO ({mode}): {100 * d['requests']['mean']:+.2f} points; "
            f"{over_seeds}over requests [{_pts(d['requests']['ci_low'])}, {_pts(d['requests']['ci_high'])}]",
            markup=False,
        )
    console.print(f"finished in {summary['timing']['total_s'] / 60:.1f} min")
    console.print(f"report: {args.out / 'report.md'}", soft_wrap=True)  # a long path stays one line
    return 0


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _pts(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.2f}"
