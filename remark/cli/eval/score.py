"""``remark eval score`` (a predictions file against a prepared dataset) and ``remark eval run``
(generate lists with a model, then score them); both write their outputs atomically (``eval.run``) and
record the evaluated split's overlap with the train split (``eval.leakage``) and the lists' collapse
figures (``eval.collapse``), printing their warnings (in the markdown, or on stderr with ``--json``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from remark.cli.eval.flags import bootstrap_config, emit, filter_names, grounding_notes
from remark.cli.grounding_flags import requested_grounding


def scoring_options(args: argparse.Namespace) -> dict[str, Any]:
    """What `eval score` and `eval run` pass alike: grounding from the flags, cut-offs, metrics, views, CIs."""
    return {
        "grounding": requested_grounding(args),
        "grounding_by": "command-line flags",
        "ks": args.k,
        "metrics": args.metrics,
        "compact": args.compact,
        "filters": filter_names(args.filters),
        "views": args.views,
        "config": bootstrap_config(args),
    }


def score_file(args: argparse.Namespace, predictions: Path, data: Path):
    from data_prep.dataset import load_dataset
    from eval.score import read_predictions, score_predictions

    return score_predictions(
        load_dataset(data),
        read_predictions(predictions),
        split=args.split,
        **scoring_options(args),
        on_unknown=getattr(args, "on_unknown", "error"),
        on_missing=getattr(args, "on_missing", "error"),
        on_other_split=getattr(args, "on_other_split", "error"),
    )


def run_score(args: argparse.Namespace) -> int:
    from catalog.io.outputs import check_output_dir
    from eval.collapse import warn as warn_collapse
    from eval.leakage import warn
    from eval.report import metrics_markdown
    from eval.run import SCORE_KIND, write_score_outputs

    inputs = [args.data, args.predictions]
    if args.out is not None:  # refused before scoring, not after
        check_output_dir(args.out, SCORE_KIND, inputs=inputs, force=args.force, hold=True)
    result, scored = score_file(args, args.predictions, args.data)
    if args.out is not None:
        write_score_outputs(
            args.out, result, scored.per_request, per_row=scored.per_row, inputs=inputs, force=args.force
        )
    grounding_notes(result)
    emit(result, args, metrics_markdown(result, title=f"{args.predictions.name} ({args.split})"))
    if args.json:  # the markdown carries the overlap's lines and warning; JSON output gets it on stderr
        warn(result.get("split_overlap"))
        warn_collapse(result.get("collapse"))
    return 0


def run_run(args: argparse.Namespace) -> int:
    from catalog.io.errors import InputError
    from eval.collapse import warn as warn_collapse
    from eval.generate import AdapterLoad, GenerationConfig
    from eval.leakage import warn
    from eval.model_sizes import check_model_sizes
    from eval.report import metrics_markdown
    from eval.run import evaluate_model

    check_model_sizes(args.model, base=args.base_model)  # config.json's sizes, before anything loads
    for flag, dest in (("--temperature", "temperature"), ("--top-p", "top_p"), ("--gen-seed", "gen_seed")):
        if getattr(args, dest) is not None and not args.num_samples:  # greedy lists sample nothing
            raise InputError(
                f"{flag} has no effect without --num-samples: greedy lists are not sampled",
                field=flag,
                hint=f"drop {flag}, or add --num-samples N",
            )
    gen = GenerationConfig(
        k=max(args.k),
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        num_samples=args.num_samples,
        temperature=1.0 if args.temperature is None else args.temperature,
        top_p=1.0 if args.top_p is None else args.top_p,
        seed=args.gen_seed or 0,
        engine=args.engine,
        device=args.device,
    )
    note = gen.cap_note()  # before the generation, on stdout (stderr when stdout is the JSON)
    if note:
        print(note, file=sys.stderr if args.json else sys.stdout)
    result = evaluate_model(
        args.model,
        args.data,
        args.out,
        split=args.split,
        generation=gen,
        **scoring_options(args),
        limit=args.limit,
        force=args.force,
        adapter=AdapterLoad(base=args.base_model, merge=args.merge_adapter),
    )
    from eval.run import lists_markdown

    md = metrics_markdown(result, title=f"{args.model.name}: greedy ({args.split})")
    md += lists_markdown(result["lists"]["shape"], "What the greedy lists were")
    if "sampled" in result:
        md += lists_markdown(result["sampled"]["lists"]["shape"], "What the sampled lists were")
        if result["sampled"].get("collapse"):
            from eval.collapse import collapse_lines

            lines = collapse_lines(result["sampled"]["collapse"], title="List collapse, sampled lists")
            md += "\n" + "\n".join(lines) + "\n"
    grounding_notes(result)
    emit(
        result,
        args,
        md + f"\nwrote {args.out}/ (predictions.jsonl, metrics.json, per_request.parquet, per_row.parquet, "
        "report.md)\n",
    )
    if args.json:
        warn(result.get("split_overlap"))
        warn_collapse(result.get("collapse"), label="greedy lists")
        warn_collapse(result.get("sampled", {}).get("collapse"), label="sampled lists")
    return 0
