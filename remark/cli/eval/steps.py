"""``remark eval steps`` (steps for a run to reach a baseline's value, with a CI) and ``remark eval
curves`` (validation curves with CI bands), both read from training runs' eval logs (``eval.steps``).
"""

from __future__ import annotations

import argparse
import json
import math

from remark.cli.eval.flags import bootstrap_config

#: the ``catalog.io.outputs.atomic_file`` kinds of ``eval steps --plot`` and ``eval curves --out``.
STEPS_PLOT_KIND = "eval-steps-plot"
CURVES_KIND = "eval-curves"


def run_steps(args: argparse.Namespace) -> int:
    from catalog.io.outputs import PLOT_FORMATS, check_output_file
    from eval.report import plot_curves
    from eval.steps import resolve_metric, steps_to_reach, validation_curve

    inputs = [args.run, args.baseline]
    if args.plot is not None:  # refused before any work
        check_output_file(
            args.plot, STEPS_PLOT_KIND, formats=PLOT_FORMATS, inputs=inputs, force=args.force, field="--plot"
        )
    cfg = bootstrap_config(args)
    (run, key), (base, _) = resolve_metric([args.run, args.baseline], args.metric)
    res = steps_to_reach(run, base, key=key, baseline_step=args.step, config=cfg)
    res["runs"] = {"run": str(run), "baseline": str(base)}
    if args.plot is not None:
        curves = [validation_curve(d, key, config=cfg) for d in (run, base)]
        plot_curves(
            curves,
            args.plot,
            reach=res,
            inputs=inputs,
            kind=STEPS_PLOT_KIND,
            force=args.force,
            field="--plot",
        )
    if args.json:
        print(json.dumps(res, indent=2))
    else:

        def share(x: float | None) -> str:  # an upper end past the run (None or inf in the result)
            return "never, in some resamples" if x is None or not math.isfinite(x) else f"{x:.1%}"

        reached = (
            f"step {res['step']:.0f} = {res['fraction']:.1%} of {res['baseline_step']} "
            f"[{share(res['ci_low'])}, {share(res['ci_high'])}]"
            if res["reached"]
            else "not reached"
        )
        print(
            f"{args.metric} ({key} in {run}/eval_log.jsonl): baseline {res['baseline_value']:.4f} at step "
            f"{res['baseline_step']}; run reaches it at {reached}"
        )
    return 0


def run_curves(args: argparse.Namespace) -> int:
    from catalog.io.outputs import PLOT_FORMATS, check_output_file
    from eval.report import plot_curves
    from eval.steps import resolve_metric, validation_curve

    check_output_file(args.out, CURVES_KIND, formats=PLOT_FORMATS, inputs=args.runs, force=args.force)
    resolved = resolve_metric(args.runs, args.metric)
    curves = [validation_curve(d, key, x=args.x, config=bootstrap_config(args)) for d, key in resolved]
    written = plot_curves(curves, args.out, inputs=args.runs, kind=CURVES_KIND, force=args.force)
    print(f"wrote {written}")
    return 0
