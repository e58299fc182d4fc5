"""``remark curve``: ScaleRL compute curves (predict, crossover, fit an eval log, compare two runs).

A thin layer over :mod:`remark.planning.curves` and :mod:`remark.planning.logs`; every subcommand prints
text, or one JSON object with ``--json``. ``--plot`` is a single-file output
(``catalog.io.outputs.atomic_file``, kind ``curve-plot``): ``.png``, ``.pdf`` or ``.svg``, never one of
the logs read nor inside their runs, an existing file only when it is an earlier ``--plot`` (or ``--force``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from catalog.io.errors import InputError
from remark.config.ranges import check_number, flag_type

X_CHOICES = ("steps", "samples", "gpu_hours")
#: the ``catalog.io.outputs.atomic_file`` kind of a ``--plot``.
PLOT_KIND = "curve-plot"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("curve", help="ScaleRL compute curves: predict, crossover, fit, compare")
    sub = p.add_subparsers(dest="curve_command", metavar="SUBCOMMAND", required=True)

    pr = sub.add_parser("predict", help="R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) at given compute")
    pr.add_argument("--r0", type=flag_type("--r0"), required=True, help="starting score R0")
    pr.add_argument("--a", type=flag_type("--a"), required=True, help="ceiling A")
    pr.add_argument("--b", type=flag_type("--b"), required=True, help="efficiency B (> 0)")
    pr.add_argument(
        "--c-mid", type=flag_type("--c-mid"), required=True, help="compute at half the gain (> 0)"
    )
    pr.add_argument(
        "--at", type=flag_type("--at"), nargs="+", required=True, metavar="C", help="compute values"
    )
    pr.add_argument("--json", action="store_true", help="print one JSON object")
    pr.set_defaults(func=_predict)

    cr = sub.add_parser("crossover", help="where two curves cross (null when they never do)")
    cr.add_argument("--curve", action="append", required=True, metavar="R0,A,B,CMID", help="give twice")
    cr.add_argument("--json", action="store_true", help="print one JSON object")
    cr.set_defaults(func=_crossover)

    for name, nlogs, func, text in (
        ("fit", 1, _fit, "fit A, B, C_mid to a training eval log, with a profile interval on A"),
        (
            "compare",
            2,
            _compare,
            "which of two runs has the higher ceiling, whether that is decidable, crossover",
        ),
    ):
        f = sub.add_parser(name, help=text)
        f.add_argument("logs", nargs=nlogs, metavar="LOG", help="a run directory or its eval_log.jsonl")
        f.add_argument("--x", choices=X_CHOICES, default="steps", help="compute axis (default steps)")
        f.add_argument("--metric", default="eval/recall@20/union", help="eval log key (default %(default)s)")
        f.add_argument(
            "--r0", type=flag_type("--r0"), default=None, help="fixed R0 (default: the first validation)"
        )
        f.add_argument(
            "--min-x", type=flag_type("--min-x"), default=None, help="drop points with compute below this"
        )
        f.add_argument(
            "--level", type=flag_type("--level"), default=0.95, help="interval level (default 0.95)"
        )
        f.add_argument(
            "--plot",
            type=Path,
            default=None,
            metavar="FILE",
            help="write a plot (.png, .pdf or .svg; a new file or an earlier --plot)",
        )
        f.add_argument(
            "--force",
            action="store_true",
            help="let --plot replace a file remark did not write (never an input)",
        )
        f.add_argument("--json", action="store_true", help="print one JSON object")
        f.set_defaults(func=func)


def parse_curve(text: str):
    """``"R0,A,B,CMID"`` -> CurveParams (B and C_mid > 0)."""
    from remark.planning.curves import CurveParams

    parts = text.split(",")
    try:
        r0, a, b, c_mid = (float(x) for x in parts)
    except ValueError:
        raise InputError(f"{text!r} is not four numbers R0,A,B,CMID", field="--curve") from None
    for name, value in (("--r0", r0), ("--a", a), ("--b", b), ("--c-mid", c_mid)):
        check_number(name, value, field="--curve")
    return CurveParams(r0=r0, a=a, b=b, c_mid=c_mid)


def _predict(args: argparse.Namespace) -> int:
    from remark.planning.curves import predict

    r = predict(args.at, r0=args.r0, a=args.a, b=args.b, c_mid=args.c_mid)
    out = {"at": list(args.at), "r": [float(v) for v in r]}
    if args.json:
        print(json.dumps(out))
    else:
        for c, v in zip(out["at"], out["r"]):
            print(f"C = {c:g}\tR = {v:.6g}")
    return 0


def _crossover(args: argparse.Namespace) -> int:
    from remark.planning.curves import crossovers

    if len(args.curve) != 2:
        raise InputError(f"give exactly two --curve options, got {len(args.curve)}", field="--curve")
    p, q = (parse_curve(t) for t in args.curve)
    found = crossovers(p, q)
    out = {"crossover": found[0] if found else None, "crossovers": found}
    if args.json:
        print(json.dumps(out))
    elif found:
        print("the curves cross at C = " + ", ".join(f"{c:.6g}" for c in found))
    else:
        print("the curves never cross")
    return 0


def _load_fit(log: str, args: argparse.Namespace):
    from remark.planning.curves import fit_curve
    from remark.planning.logs import read_eval_log

    series = read_eval_log(log, x=args.x, metric=args.metric, min_x=args.min_x)
    try:
        fit = fit_curve(series.c, series.r, r0=args.r0, level=args.level)
    except InputError as err:  # the log itself was validated line by line; name it for the rest
        raise InputError(str(err), path=series.path) from None
    return series, fit


def _describe(name: str, series, fit) -> str:
    p = fit.params
    lo, hi = fit.a_interval
    unit = series.x.replace("_", " ")
    lines = [
        f"{name}{series.metric} vs {unit} ({series.path}, {fit.n} points)",
        f"  A = {p.a:.4f}   {fit.level:.0%} interval [{lo:.4f}, {hi:.4f}]"
        + ("" if fit.a_hi_closed else " (upper end is the bound)"),
        f"  B = {p.b:.3f}   C_mid = {p.c_mid:.4g} {unit}   R0 = {p.r0:.4f} (fixed)",
        f"  data end at {fit.c_max:.4g} {unit} = {fit.c_max_over_c_mid:.2f} x C_mid",
        "  ceiling: " + (f"UNBOUNDED: {fit.reason}" if fit.unbounded else "bounded"),
    ]
    return "\n".join(lines)


def _plot_inputs(logs: list[str]) -> list[Path]:
    """What ``--plot`` may never touch: each log and the folder it lies in (its run)."""
    from remark.planning.logs import resolve_log_path

    out: list[Path] = []
    for log in logs:
        path = resolve_log_path(log)
        out += [path, path.parent]
    return out


def _check_plot(args: argparse.Namespace) -> str | None:
    """The ``--plot`` format, or None without ``--plot``; refused (``InputError``) before any fit."""
    if args.plot is None:
        return None
    from catalog.io.outputs import PLOT_FORMATS, check_output_file

    return check_output_file(
        args.plot,
        PLOT_KIND,
        formats=PLOT_FORMATS,
        inputs=_plot_inputs(args.logs),
        force=args.force,
        field="--plot",
    )


def _fit(args: argparse.Namespace) -> int:
    _check_plot(args)
    series, fit = _load_fit(args.logs[0], args)
    out = {"log": str(series.path), "x": series.x, "metric": series.metric} | fit.to_dict()
    if args.plot:
        _plot([(series, fit, "run")], args, crossings=[])
        out["plot"] = str(args.plot)
    print(json.dumps(out) if args.json else _describe("", series, fit))
    return 0


def _compare(args: argparse.Namespace) -> int:
    from remark.planning.curves import compare_fits

    _check_plot(args)
    (sa, fa), (sb, fb) = (_load_fit(log, args) for log in args.logs)
    cmp = compare_fits(fa, fb)
    out = {
        "a": {"log": str(sa.path)} | fa.to_dict(),
        "b": {"log": str(sb.path)} | fb.to_dict(),
        "x": sa.x,
        "metric": sa.metric,
    } | cmp
    if args.plot:
        _plot([(sa, fa, "a"), (sb, fb, "b")], args, crossings=cmp["crossovers"])
        out["plot"] = str(args.plot)
    if args.json:
        print(json.dumps(out))
        return 0
    print(_describe("a: ", sa, fa))
    print(_describe("b: ", sb, fb))
    verdict = "decided" if cmp["decidable"] else "not decidable yet"
    print(f"higher ceiling: {cmp['higher']} ({verdict}: {cmp['why']})")
    cross, unit = cmp["crossovers"], sa.x.replace("_", " ")
    if not cross:
        print("the curves never cross")
    else:
        print(f"the curves cross at {', '.join(f'{c:.4g}' for c in cross)} {unit}; ", end="")
        print(f"from {cross[-1]:.4g} {unit} on, {cmp['higher']} stays ahead")
    return 0


def _plot(items, args: argparse.Namespace, *, crossings: list[float]) -> None:
    """Points, fitted curves, ceilings (dashed) and C_mid (dotted) on a log-x axis, written to ``args.plot``
    (``catalog.io.outputs.atomic_file``, in the format its extension names)."""
    import numpy as np
    from matplotlib.figure import Figure

    from catalog.io.outputs import PLOT_FORMATS, atomic_file

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    c_hi = max(max(s.c.max(), 3 * f.params.c_mid) for s, f, _ in items)
    c_lo = min(s.c[s.c > 0].min() for s, _, _ in items)
    grid = np.geomspace(c_lo, c_hi, 300)
    for (series, fit, label), color in zip(items, ("tab:blue", "tab:orange")):
        pos = series.c > 0
        ax.plot(series.c[pos], series.r[pos], "o", ms=3, color=color, label=f"{label} data")
        ax.plot(grid, fit.params(grid), "-", color=color, label=f"{label} fit: A = {fit.params.a:.3f}")
        ax.axhspan(*fit.a_interval, color=color, alpha=0.08)
        ax.axhline(fit.params.a, ls="--", lw=0.8, color=color)
        ax.axvline(fit.params.c_mid, ls=":", lw=0.8, color=color)
    for c in (c for c in crossings if c_lo <= c <= c_hi):
        ax.axvline(c, color="grey", lw=0.8, label=f"crossover {c:.3g}")
    ax.set_xscale("log")
    ax.set_xlabel(items[0][0].x.replace("_", " "))
    ax.set_ylabel(items[0][0].metric)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fmt = _check_plot(args)
    inputs = _plot_inputs(args.logs)
    with atomic_file(
        args.plot, PLOT_KIND, formats=PLOT_FORMATS, inputs=inputs, force=args.force, field="--plot"
    ) as tmp:
        fig.savefig(tmp, format=fmt, dpi=120)
