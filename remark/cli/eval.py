"""``remark eval``: score, run, compare, steps, curves, and ProtoQA helpers (a thin layer over ``eval``).

Sub-commands:

- ``score``: a predictions JSONL against a prepared dataset -> metrics with bootstrap CIs;
- ``run``: generate lists with a model (greedy, optional samples), score them, write outputs;
- ``compare A B``: paired differences A - B with CIs on the same requests (``--lists greedy|sampled``
  picks which of an eval run's lists, and the output says which it compared);
- ``steps``: steps-to-reach from two training runs' eval logs (``--metric`` as the eval log, the config's
  ``validation_metric`` or the demo report write it: ``eval/recall@5/per_responder``,
  ``sampled/recall@5/per_responder`` for the sampled validation lists under ``<run>/sampled``);
- ``curves``: validation curves with CI bands (PNG);
- ``convert-protoqa``: ProtoQA prediction files -> our predictions JSONL;
- ``protoqa-evaluator``: the official ProtoQA "Max Answers @ k" (exact match), for cross-checks.

``score``, ``run`` and ``compare`` ground with the dataset's settings (``meta.json["grounding"]``) unless a
grounding flag is given (``--match-mode``, ``--year-tolerance``, ``--match-threshold``,
``--match-scorer``); a difference from the dataset's is printed on stderr and recorded in the result's
``settings.grounding``. ``score --split`` is one split or ``all``; predictions outside the scored split
are an error unless ``--on-other-split ignore`` (``eval.score``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from catalog.errors import InputError
from remark.cli.adapter import add_adapter_flags
from remark.cli.args import nonneg_int, open_unit, positive_float, positive_int
from remark.cli.grounding import add_grounding_flags, requested_grounding

DEFAULT_KS = [5, 10, 15, 20]
# eval.metrics' METRICS, MAX_K and FILTERS, spelled out so that `remark --help` imports no numpy
# (tests/eval/test_cli.py checks they agree).
METRIC_NAMES = ["recall", "ndcg", "precision", "hit", "mrr"]
MAX_K = 50
FILTER_NAMES = ["drop_ooc_seen", "drop_ooc", "drop_seen", "drop_none"]
#: ``compare --lists``: the per-request table of an ``eval run`` dir and where its settings are
LISTS = {"greedy": ("per_request.parquet", None), "sampled": ("per_request_sampled.parquet", "sampled")}
VIEW_NAMES = ["per_responder", "union", "single_mention", "per_mention"]
DEFAULT_VIEWS = VIEW_NAMES[:3]


def cutoff(text: str) -> int:
    """``--k`` values: integers from 1 to MAX_K (argparse reports anything else with exit code 2)."""
    try:
        k = int(text)
    except ValueError:
        k = 0
    if not 1 <= k <= MAX_K:
        raise argparse.ArgumentTypeError(f"k must be an integer from 1 to {MAX_K}, got {text!r}")
    return k


def filter_names(names: list[str] | None) -> list[str]:
    """``--filters`` as given (``all`` = the four), in FILTER_NAMES order."""
    chosen = set(names or ())
    return [f for f in FILTER_NAMES if f in chosen or "all" in chosen]


def _ci_flags(p: argparse.ArgumentParser, *, method: str = "bca", resamples: int = 9999) -> None:
    g = p.add_argument_group("confidence intervals (bootstrap over requests)")
    g.add_argument(
        "--ci-method", choices=["bca", "percentile", "basic"], default=method, help="default %(default)s"
    )
    g.add_argument(
        "--resamples", type=int, default=resamples, help="bootstrap resamples (default %(default)s)"
    )
    g.add_argument("--confidence", type=float, default=0.95, help="confidence level (default %(default)s)")
    g.add_argument("--seed", type=int, default=0, help="bootstrap seed (default %(default)s)")


def _score_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--split", default="test", help="split to score, or 'all' (default %(default)s)")
    add_grounding_flags(p, from_dataset=True)
    p.add_argument(
        "--k", type=cutoff, nargs="+", default=DEFAULT_KS, help=f"cut-offs, 1 to {MAX_K} (default 5 10 15 20)"
    )
    p.add_argument("--metrics", nargs="+", choices=METRIC_NAMES, default=METRIC_NAMES, help="default: all")
    p.add_argument(
        "--compact",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="drop seen, ungrounded and repeated items before cutting at k, as Rank-GRPO's eval (default on)",
    )
    p.add_argument(
        "--filters",
        nargs="+",
        choices=[*FILTER_NAMES, "all"],
        default=None,
        metavar="FILTER",
        help="also report these slot filters (He et al.'s variants) as eval/<metric>@<k>/<view>/<filter>: "
        + ", ".join(FILTER_NAMES)
        + " or all (docs/metrics.md)",
    )
    p.add_argument(
        "--views",
        nargs="+",
        choices=VIEW_NAMES,
        default=DEFAULT_VIEWS,
        help="views to score (default: per_responder union single_mention); per_mention: one row per "
        "(request, responder, item), the rows of He et al. and CRSLab (docs/metrics.md)",
    )
    _ci_flags(p)


def _force_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--force",
        action="store_true",
        help="replace --out even if it is a folder this command did not write (never an input)",
    )


def _config(args: argparse.Namespace):
    from eval.bootstrap import BootstrapConfig

    try:
        return BootstrapConfig(
            method=args.ci_method,
            n_resamples=args.resamples,
            confidence_level=args.confidence,
            seed=args.seed,
        )
    except ValueError as err:
        raise InputError(str(err), field="--ci-method/--resamples/--confidence") from err


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval",
        help="score lists, evaluate a model, compare runs, steps-to-reach, curves",
        description="Evaluation with bootstrap CIs over requests: per responder (Rank-GRPO's view), on the "
        "union and on single-mention items.",
    )
    sub = p.add_subparsers(dest="eval_command", metavar="SUBCOMMAND", required=True)

    s = sub.add_parser("score", help="score a predictions JSONL against a prepared dataset")
    s.add_argument("--data", type=Path, required=True, help="prepared dataset directory (remark prep)")
    s.add_argument(
        "--predictions", type=Path, required=True, help='JSON lines {"request_id", "recommendations"}'
    )
    _score_flags(s)
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
    _force_flag(s)
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
    _force_flag(r)
    r.add_argument(
        "--num-samples", type=nonneg_int, default=0, help="sampled lists per request besides greedy"
    )
    r.add_argument(
        "--temperature", type=positive_float, default=1.0, help="sampling temperature (default 1.0)"
    )
    r.add_argument("--top-p", type=open_unit, default=1.0, help="nucleus mass for samples (default 1.0)")
    r.add_argument("--gen-seed", type=int, default=0, help="sampling seed (default 0)")
    r.add_argument("--engine", choices=["auto", "transformers", "vllm"], default="auto", help="default auto")
    r.add_argument(
        "--batch-size", type=positive_int, default=16, help="prompts per generate call (default 16)"
    )
    r.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=None,
        help="completion cap (default 16 tokens per item: 16 x max(--k), 320 for k = 20, 800 for k = 50)",
    )
    r.add_argument("--device", default=None, help="torch device (default cuda if available, else cpu)")
    r.add_argument("--limit", type=positive_int, default=None, help="first N requests of the split only")
    _score_flags(r)
    add_adapter_flags(r)
    r.add_argument("--json", action="store_true", help="print metrics.json")
    r.set_defaults(func=run_run)

    c = sub.add_parser("compare", help="paired differences A - B with CIs on the same requests")
    c.add_argument(
        "a", type=Path, help="eval run dir, per_request.parquet, or predictions JSONL (needs --data)"
    )
    c.add_argument("b", type=Path, help="the same for the baseline")
    c.add_argument("--data", type=Path, default=None, help="dataset, when A or B is a predictions file")
    c.add_argument(
        "--lists",
        choices=list(LISTS),
        default=None,
        help="which lists of an eval run dir: greedy (per_request.parquet, the default) or sampled "
        "(per_request_sampled.parquet, the demo's headline lists); the output says which",
    )
    _score_flags(c)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=run_compare)

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
    st.add_argument("--step", type=int, default=None, help="baseline step S (default: its last validation)")
    st.add_argument("--plot", type=Path, default=None, help="also write both curves with CI bands here (PNG)")
    _ci_flags(st, method="percentile", resamples=9999)
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
    cu.add_argument("--out", type=Path, required=True, help="PNG path")
    _ci_flags(cu, method="percentile", resamples=2000)
    cu.set_defaults(func=run_curves)

    cp = sub.add_parser("convert-protoqa", help="ProtoQA prediction file -> predictions JSONL")
    cp.add_argument(
        "input", type=Path, help="ProtoQA predictions (.jsonl of {qid: [...]} or one JSON object)"
    )
    cp.add_argument("--out", type=Path, required=True, help="output predictions JSONL")
    cp.set_defaults(func=run_convert)

    pe = sub.add_parser(
        "protoqa-evaluator", help="official ProtoQA Max Answers@k (exact match), for cross-checks"
    )
    pe.add_argument(
        "--targets", type=Path, required=True, help="ProtoQA answer file (e.g. dev.crowdsourced.jsonl)"
    )
    pe.add_argument("--predictions", type=Path, required=True, help="ProtoQA prediction file")
    pe.add_argument("--k", type=positive_int, nargs="+", default=[1, 3, 5, 10])
    pe.add_argument("--json", action="store_true")
    pe.set_defaults(func=run_protoqa_evaluator)


def _emit(result: dict, args: argparse.Namespace, markdown: str) -> None:
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(markdown, end="")
    if result.get("warnings"):
        print("warnings: " + ", ".join(f"{k} = {v}" for k, v in result["warnings"].items()), file=sys.stderr)


def _grounding_notes(result: dict) -> None:
    """Print the result's grounding notes (a legacy dataset, settings that differ from the dataset's)."""
    for line in result.get("settings", {}).get("grounding", {}).get("notes", []):
        print(line, file=sys.stderr)


def _score_file(args: argparse.Namespace, predictions: Path, data: Path):
    from data_prep.dataset import load_dataset
    from eval.score import read_predictions, score_predictions

    return score_predictions(
        load_dataset(data),
        read_predictions(predictions),
        split=args.split,
        grounding=requested_grounding(args),
        grounding_by="command-line flags",
        ks=args.k,
        metrics=args.metrics,
        compact=args.compact,
        filters=filter_names(args.filters),
        views=args.views,
        config=_config(args),
        on_unknown=getattr(args, "on_unknown", "error"),
        on_missing=getattr(args, "on_missing", "error"),
        on_other_split=getattr(args, "on_other_split", "error"),
    )


def run_score(args: argparse.Namespace) -> int:
    from catalog.io import check_output_dir
    from eval.report import metrics_markdown
    from eval.run import SCORE_KIND, write_score_outputs

    inputs = [args.data, args.predictions]
    if args.out is not None:  # refused before scoring, not after
        check_output_dir(args.out, SCORE_KIND, inputs=inputs, force=args.force)
    result, scored = _score_file(args, args.predictions, args.data)
    if args.out is not None:
        write_score_outputs(
            args.out, result, scored.per_request, per_row=scored.per_row, inputs=inputs, force=args.force
        )
    _grounding_notes(result)
    _emit(result, args, metrics_markdown(result, title=f"{args.predictions.name} ({args.split})"))
    return 0


def run_run(args: argparse.Namespace) -> int:
    from eval.generate import AdapterLoad, GenerationConfig
    from eval.report import metrics_markdown
    from eval.run import evaluate_model

    gen = GenerationConfig(
        k=max(args.k),
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        num_samples=args.num_samples,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.gen_seed,
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
        grounding=requested_grounding(args),
        grounding_by="command-line flags",
        ks=args.k,
        metrics=args.metrics,
        compact=args.compact,
        filters=filter_names(args.filters),
        views=args.views,
        config=_config(args),
        limit=args.limit,
        force=args.force,
        adapter=AdapterLoad(base=args.base_model, merge=args.merge_adapter),
    )
    md = metrics_markdown(result, title=f"{args.model.name}: greedy ({args.split})")
    _grounding_notes(result)
    _emit(
        result,
        args,
        md + f"\nwrote {args.out}/ (predictions.jsonl, metrics.json, per_request.parquet, per_row.parquet, "
        "report.md)\n",
    )
    return 0


def _per_request(path: Path, args: argparse.Namespace) -> tuple[Any, dict, str]:
    """(per-request table, settings, what was read) from an eval dir, a parquet file or a predictions file."""
    import polars as pl

    lists = args.lists or "greedy"
    if path.is_dir():
        from catalog.io import output_kind
        from eval.run import RUN_KIND, SCORE_KIND

        name, part = LISTS[lists]
        table = path / name
        if not table.is_file():
            hint = (
                "evaluate with `remark eval run --num-samples N` to get sampled lists, or pass --lists greedy"
                if lists == "sampled"
                else "pass an `remark eval run` or `remark eval score --out` output dir"
            )
            raise InputError(f"no {name} here ({lists} lists)", path=path, hint=hint)
        if output_kind(path) not in (RUN_KIND, SCORE_KIND):
            raise InputError(
                f"not a folder written by `remark eval run` or `eval score --out` (no output marker), so its "
                f"{name} and metrics.json may come from different runs",
                path=path,
                hint=f"re-run the evaluation into a new folder, or pass the {name} file itself",
            )
        meta = path / "metrics.json"
        result = json.loads(meta.read_text()) if meta.is_file() else {}
        settings = (result.get(part, {}) if part else result).get("settings", {})
        return pl.read_parquet(table), settings, f"{lists} lists ({table})"
    if path.suffix == ".parquet":
        return pl.read_parquet(path), {}, f"the lists scored in {path}"
    if args.lists == "sampled":
        raise InputError(
            "a predictions file holds one list per request, not sampled lists",
            path=path,
            field="--lists",
            hint="drop --lists sampled, or pass an eval run dir",
        )
    if args.data is None:
        raise InputError("a predictions file needs --data", path=path, field="--data")
    result, scored = _score_file(args, path, args.data)
    _grounding_notes(result)
    return scored.per_request, {**scored.settings, **result["settings"]}, f"the lists in {path}"


def _grounding_used(settings: dict) -> dict | None:
    """The grounding a result was scored with (results written before the contract: their ``match``)."""
    g = settings.get("grounding")
    if isinstance(g, dict) and isinstance(g.get("used"), dict):
        return g["used"]
    return {"match_mode": settings["match"]} if isinstance(settings.get("match"), str) else None


def _same(a: Any, b: Any) -> bool:
    """Equal, or (grounding dicts) equal on the fields both record."""
    if isinstance(a, dict) and isinstance(b, dict):
        return all(a[k] == b[k] for k in set(a) & set(b))
    return a == b


def run_compare(args: argparse.Namespace) -> int:
    from eval.bootstrap import compare
    from eval.report import compare_markdown
    from eval.views import split_key

    (a, sa, what_a), (b, sb, what_b) = _per_request(args.a, args), _per_request(args.b, args)
    checks = {
        "compact": (sa.get("compact"), sb.get("compact")),
        "grounding": (_grounding_used(sa), _grounding_used(sb)),
    }
    for key, (va, vb) in checks.items():
        if va is not None and vb is not None and not _same(va, vb):
            raise InputError(
                f"A and B were scored with different {key} ({va} vs {vb})",
                field=key,
                hint="score both the same way before comparing",
            )
    keys = [c for c in a.columns if c.startswith("eval/") and c in b.columns]
    filters = filter_names(args.filters)
    keys = [
        k
        for k in keys
        if split_key(k)[0].split("@")[0] in args.metrics
        and int(k.split("@")[1].split("/")[0]) in args.k
        and (k.count("/") == 2 or k.rsplit("/", 1)[1] in filters)
    ]
    if not keys:
        raise InputError("A and B share no metric column", hint="score both with the same --k and --metrics")
    try:
        diff = compare(a, b, keys, _config(args))
    except ValueError as err:
        raise InputError(str(err), hint="both must be scored on the same split of the same dataset") from err
    lists = args.lists or "greedy"
    out: dict[str, Any] = {
        "n_requests": a.height,
        "a": str(args.a),
        "b": str(args.b),
        "lists": lists,
        "compared": {"a": what_a, "b": what_b},
        "difference": "A - B",
    }
    for key, cell in diff.items():
        name, view = split_key(key)
        out.setdefault(view, {})[name] = cell
    out["ci"] = _config(args).as_dict()
    header = f"comparing {what_a}\n     with {what_b}\n\n"
    if args.json:
        print(f"comparing {what_a} with {what_b}", file=sys.stderr)
    _emit(out, args, header + compare_markdown(out, name_a=args.a.name, name_b=args.b.name))
    return 0


def run_steps(args: argparse.Namespace) -> int:
    from eval.report import plot_curves
    from eval.steps import resolve_metric, steps_to_reach, validation_curve

    cfg = _config(args)
    (run, key), (base, _) = resolve_metric([args.run, args.baseline], args.metric)
    res = steps_to_reach(run, base, key=key, baseline_step=args.step, config=cfg)
    res["runs"] = {"run": str(run), "baseline": str(base)}
    if args.plot is not None:
        curves = [validation_curve(d, key, config=cfg) for d in (run, base)]
        plot_curves(curves, args.plot, reach=res)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        reached = (
            f"step {res['step']:.0f} = {res['fraction']:.1%} of {res['baseline_step']} "
            f"[{res['ci_low']:.1%}, {res['ci_high']:.1%}]"
            if res["reached"]
            else "not reached"
        )
        print(
            f"{args.metric} ({key} in {run}/eval_log.jsonl): baseline {res['baseline_value']:.4f} at step "
            f"{res['baseline_step']}; run reaches it at {reached}"
        )
    return 0


def run_curves(args: argparse.Namespace) -> int:
    from eval.report import plot_curves
    from eval.steps import resolve_metric, validation_curve

    resolved = resolve_metric(args.runs, args.metric)
    curves = [validation_curve(d, key, x=args.x, config=_config(args)) for d, key in resolved]
    print(f"wrote {plot_curves(curves, args.out)}")
    return 0


def run_convert(args: argparse.Namespace) -> int:
    from eval.protoqa import convert_protoqa_predictions

    n = convert_protoqa_predictions(args.input, args.out)
    print(f"wrote {args.out} ({n} questions)")
    return 0


def run_protoqa_evaluator(args: argparse.Namespace) -> int:
    from eval.protoqa import evaluator_scores, read_protoqa_clusters, read_protoqa_predictions

    questions = read_protoqa_clusters(args.targets)
    preds = read_protoqa_predictions(args.predictions)
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
