"""``remark eval convert-protoqa`` and ``remark eval protoqa-evaluator``: ProtoQA's prediction format,
and its official "Max Answers @ k" for cross-checks (``eval.protoqa``).
"""

from __future__ import annotations

import argparse
import json
import sys


def run_convert(args: argparse.Namespace) -> int:
    from eval.protoqa import convert_protoqa_predictions

    n = convert_protoqa_predictions(args.input, args.out, force=args.force)
    print(f"wrote {args.out} ({n} questions)")
    return 0


def run_protoqa_evaluator(args: argparse.Namespace) -> int:
    from catalog.io.errors import InputError
    from eval.protoqa import evaluator_scores, read_protoqa_clusters, read_protoqa_predictions

    questions = read_protoqa_clusters(args.targets)
    preds = read_protoqa_predictions(args.predictions)
    overlap = len(set(preds) & set(questions))
    if not overlap:
        raise InputError(
            f"no question id of the predictions ({len(preds)}) is among the targets' ({len(questions)} questions): "
            "every score would be 0",
            path=args.predictions,
            hint=f"pass the predictions made for {args.targets}",
        )
    if overlap < len(questions):
        print(
            f"note: predictions for {overlap} of the {len(questions)} target questions; the other "
            f"{len(questions) - overlap} score 0 (and {len(set(preds) - set(questions))} predicted ids are not targets)",
            file=sys.stderr,
        )
    scores = evaluator_scores(preds, questions, args.k)
    mean = {
        f"max_answers@{k}": sum(s[f"max_answers@{k}"] for s in scores.values()) / len(scores) for k in args.k
    }
    result = {"n_questions": len(scores), "mean": mean, "per_question": scores}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{len(scores)} questions: " + ", ".join(f"{k} = {v:.4f}" for k, v in mean.items()))
    return 0
