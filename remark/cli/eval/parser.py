"""The ``remark eval`` argument parser: every subcommand's flags and the function that runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from remark.cli.adapter import add_adapter_flags
from remark.cli.eval.baselines import run_baselines
from remark.cli.eval.compare import run_compare
from remark.cli.eval.flags import (
    DEFAULT_KS,
    DEFAULT_VIEWS,
    LISTS,
    MAX_K,
    METRIC_NAMES,
    VIEW_NAMES,
    ci_flags,
    cutoff,
    force_flag,
    score_flags,
)
from remark.cli.eval.protoqa import run_convert, run_protoqa_evaluator
from remark.cli.eval.score import run_run, run_score
from remark.cli.eval.steps import run_curves, run_steps
from remark.config.ranges import flag_type


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval",
        help="score lists, evaluate a model, compare runs, reference levels, steps-to-reach, curves",
        description="Evaluation with bootstrap CIs over requests: per responder (Rank-GRPO's view), on the "
        "union and on single-mention items.",
    )
    sub = p.add_subparsers(dest="eval_command", metavar="SUBCOMMAND", required=True)

    s = sub.add_parser("score", help="score a predictions JSONL against a prepared dataset")
    s.add_argument("--data", type=Path, required=True, help="prepared dataset directory (remark prep)")
    s.add_argument(
        "--predictions", type=Path, required=True, help='JSON lines {"request_id", "recommendations"}'
    )
    score_flags(s)
    s.add_argument("--on-unknown", choices=["error", "warn"], default="error", help="unknown request ids")
    s.add_argument(
        "--on-missing", choices=["error", "empty"], default="error", help="requests without predictions"
    )
    s.add_argument(
        "--on-other-split",
        choices=["error", "ignore"],
        default="error",
        help="predictions for requests outside --split: an error (default), or left out and counted",
    )
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.add_argument(
        "--out",
        type=Path,
        default=None,
        help="also write metrics.json, per_request.parquet, per_row.parquet, report.md and metrics.png here "
        "(one folder, "
        "swapped in once complete; new, empty, or an earlier `eval score --out`)",
    )
    force_flag(s)
    s.set_defaults(func=run_score)

    r = sub.add_parser("run", help="generate lists with a model, score them, write predictions/metrics/plots")
    r.add_argument(
        "--model",
        type=Path,
        required=True,
        help="model directory (save_pretrained), or a LoRA adapter folder",
    )
    r.add_argument("--data", type=Path, required=True, help="prepared dataset directory")
    r.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output directory (one folder, swapped in once complete; new, empty, or an earlier `eval run`)",
    )
    force_flag(r)
    r.add_argument(
        "--num-samples",
        type=flag_type("--num-samples"),
        default=0,
        help="sampled lists per request besides greedy",
    )
    r.add_argument(
        "--temperature",
        type=flag_type("--temperature"),
        help="--num-samples: sampling temperature (default 1.0)",
    )
    r.add_argument("--top-p", type=flag_type("--top-p"), help="--num-samples: nucleus mass (default 1.0)")
    r.add_argument(
        "--gen-seed", type=flag_type("--gen-seed"), help="--num-samples: sampling seed (default 0)"
    )
    r.add_argument("--engine", choices=["auto", "transformers", "vllm"], default="auto", help="default auto")
    r.add_argument(
        "--batch-size",
        type=flag_type("--batch-size"),
        default=16,
        help="prompts per generate call (default 16)",
    )
    r.add_argument(
        "--max-new-tokens",
        type=flag_type("--max-new-tokens"),
        default=None,
        help="completion cap (default 16 tokens per item: 16 x max(--k), 320 for k = 20, 800 for k = 50)",
    )
    r.add_argument("--device", default=None, help="torch device (default cuda if available, else cpu)")
    r.add_argument(
        "--limit", type=flag_type("--limit"), default=None, help="first N requests of the split only"
    )
    score_flags(r)
    add_adapter_flags(r)
    r.add_argument("--json", action="store_true", help="print metrics.json")
    r.set_defaults(func=run_run)

    c = sub.add_parser(
        "compare",
        help="paired differences A - B with CIs on the same requests (several runs per side: the seed spread)",
        description="A B: paired differences A - B with bootstrap CIs over the requests. A1 A2 A3 --vs B1 B2 "
        "B3 (runs of several seeds): run i of A paired with run i of B (or every A with one B), each pair's "
        "difference, their spread over seeds (mean, SD, range, t-interval) and the bootstrap over requests "
        "of the seed-averaged difference.",
    )
    c.add_argument(
        "runs",
        type=Path,
        nargs="+",
        metavar="A",
        help="A then B: eval run dirs, per_request.parquet or predictions JSONL (needs --data); with --vs, "
        "every run of A (one per seed)",
    )
    c.add_argument(
        "--vs",
        type=Path,
        nargs="+",
        default=None,
        metavar="B",
        help="the runs of B, paired in order with those of A (one: paired with every run of A)",
    )
    c.add_argument("--data", type=Path, default=None, help="dataset, when A or B is a predictions file")
    c.add_argument(
        "--lists",
        choices=list(LISTS),
        default=None,
        help="which lists of an eval run dir: greedy (per_request.parquet, the default) or sampled "
        "(per_request_sampled.parquet, the demo's headline lists); the output says which",
    )
    score_flags(c)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=run_compare)

    bl = sub.add_parser(
        "baselines",
        help="chance, popularity, genre-popularity, nearest-request and retrieval levels on a split, with CIs",
        description="What no model scores on the same requests, with the same metric code: chance (K random "
        "unseen catalog items, exact expected recall), popularity (the K most popular unseen catalog items), "
        "for a catalog with a genre column the K most popular unseen items of the genre the request names, "
        "and, when the dataset has training requests, nearest_request (the training answers of the most "
        "similar training prompt, then the next), retrieval (the similarity-weighted training answers of the k "
        "nearest training prompts by TF-IDF or BM25, the variant and k chosen on the valid split at the largest "
        "--k, the grid printed; without a valid split a stated default) and "
        "seen_request (the training answers of the request's own training twin, same or near-duplicate "
        "prompt: a lookup, printed with a note when the split's requests are training requests). The "
        "split's overlap with the training split is printed too (eval.leakage), and the strongest simple "
        "baseline on the valid split (lookups left out).",
    )
    bl.add_argument("--data", type=Path, required=True, help="prepared dataset directory (remark prep)")
    bl.add_argument("--split", default="test", help="split to score, or 'all' (default %(default)s)")
    bl.add_argument(
        "--train-split",
        default=None,
        metavar="NAME",
        help="the split whose requests the request levels look up (default train; without one, those "
        "levels are left out with a note)",
    )
    bl.add_argument(
        "--k", type=cutoff, nargs="+", default=DEFAULT_KS, help=f"cut-offs, 1 to {MAX_K} (default 5 10 15 20)"
    )
    bl.add_argument(
        "--metrics",
        nargs="+",
        choices=METRIC_NAMES,
        default=METRIC_NAMES,
        help="default: all (chance: recall only)",
    )
    bl.add_argument(
        "--views", nargs="+", choices=VIEW_NAMES, default=DEFAULT_VIEWS, help="default: %(default)s"
    )
    ci_flags(bl)
    bl.add_argument("--json", action="store_true")
    bl.set_defaults(func=run_baselines)

    st = sub.add_parser("steps", help="steps for RUN to reach BASELINE's value at a step, with a CI")
    st.add_argument(
        "--run", type=Path, required=True, help="training run dir (eval_log.jsonl, eval/step_*.parquet)"
    )
    st.add_argument("--baseline", type=Path, required=True, help="baseline run dir")
    st.add_argument(
        "--metric",
        default="eval/recall@20/per_responder",
        help="metric as the eval log or the demo report name it: eval/recall@20/per_responder (greedy "
        "validation lists), sampled/recall@5/per_responder (sampled, read from <run>/sampled); default "
        "%(default)s; a name that is not logged lists those that are",
    )
    st.add_argument(
        "--step",
        type=flag_type("--step"),
        default=None,
        help="baseline step S (default: its last validation)",
    )
    st.add_argument(
        "--plot",
        type=Path,
        default=None,
        help="also write both curves with CI bands here (.png, .pdf or .svg; a new file or an earlier --plot)",
    )
    force_flag(st, "--plot", "a file")
    ci_flags(st, method="percentile", resamples=9999)
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=run_steps)

    cu = sub.add_parser("curves", help="validation curves with CI bands (PNG)")
    cu.add_argument("runs", type=Path, nargs="+", help="training run dirs")
    cu.add_argument(
        "--metric",
        default="eval/recall@20/per_responder",
        help="metric as in eval steps (eval/... or sampled/...; default %(default)s)",
    )
    cu.add_argument("--x", default="step", help="x axis: step, samples, gpu_hours, wall_s (default step)")
    cu.add_argument(
        "--out",
        type=Path,
        required=True,
        help="plot file: .png, .pdf or .svg (new, or an earlier `eval curves`)",
    )
    force_flag(cu, "--out", "a file")
    ci_flags(cu, method="percentile", resamples=2000)
    cu.set_defaults(func=run_curves)

    cp = sub.add_parser("convert-protoqa", help="ProtoQA prediction file -> predictions JSONL")
    cp.add_argument(
        "input", type=Path, help="ProtoQA predictions (.jsonl of {qid: [...]} or one JSON object)"
    )
    cp.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output predictions, .jsonl (new, or an earlier `eval convert-protoqa --out`)",
    )
    force_flag(cp, "--out", "a file")
    cp.set_defaults(func=run_convert)

    pe = sub.add_parser(
        "protoqa-evaluator", help="official ProtoQA Max Answers@k (exact match), for cross-checks"
    )
    pe.add_argument(
        "--targets", type=Path, required=True, help="ProtoQA answer file (e.g. dev.crowdsourced.jsonl)"
    )
    pe.add_argument("--predictions", type=Path, required=True, help="ProtoQA prediction file")
    pe.add_argument("--k", type=flag_type("--k"), nargs="+", default=[1, 3, 5, 10])
    pe.add_argument("--json", action="store_true")
    pe.set_defaults(func=run_protoqa_evaluator)
