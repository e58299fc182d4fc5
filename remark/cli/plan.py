"""``remark plan-group-size``: recommend a GRPO group size G from a cost profile and measured pass rates.

A thin layer over :mod:`remark.planning.group_size` (the formulas and the objective are explained there):
reads the "Cost profile" and "Pass rates" contracts, fits the cost lines, scores every candidate G and
prints the recommendation with q, memory, step time and the objective per candidate.
"""

from __future__ import annotations

import argparse
import json

from catalog.io.errors import InputError
from remark.config.ranges import check_number, flag_type

DEFAULT_CANDIDATES = "2,4,6,8,12,16,24,32,48,64"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "plan-group-size",
        help="recommend the group size G under a memory budget from a cost profile and pass rates",
    )
    p.add_argument("--profile", required=True, help="cost profile JSON (bench/gpu_check.py)")
    p.add_argument(
        "--pass-rates", required=True, help="parquet, CSV or JSON lines (remark diagnose --pass-rates-out)"
    )
    p.add_argument(
        "--memory-budget",
        type=flag_type("--memory-budget"),
        required=True,
        metavar="GB",
        help="peak memory budget in GB",
    )
    p.add_argument("--candidates", default=DEFAULT_CANDIDATES, help="comma-separated G (default %(default)s)")
    p.add_argument(
        "--objective",
        default="signal_per_s",
        choices=("signal_per_s", "signal_per_step"),
        help="what to maximise (default signal_per_s = q (1 - 1/G) / step time)",
    )
    p.add_argument(
        "--estimator",
        default="auto",
        choices=("auto", "plugin", "beta"),
        help="mean q from pass rates: plug-in, or empirical-Bayes beta (auto: beta when n_samples is given)",
    )
    p.add_argument(
        "--extrapolate",
        action="store_true",
        help="let the recommendation use G outside the profile's measured range (default: scored and listed only)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


#: bytes per (candidate G, request) cell of the planner's arrays: q(G, p) and the beta estimator's
#: log-beta terms, float64, a few temporaries each
BYTES_PER_CELL = 64


def parse_candidates(text: str) -> list[int]:
    """``"2,4,8"`` -> [2, 4, 8]; every entry an integer >= 2."""
    out = []
    for part in text.split(","):
        try:
            g = int(part.strip())
        except ValueError:
            raise InputError(f"{part.strip()!r} is not an integer", field="--candidates") from None
        check_number("--candidates", g)
        out.append(g)
    return out


def run(args: argparse.Namespace) -> int:
    from remark.planning.group_size import fit_cost_model, plan_group_size
    from remark.planning.logs import read_pass_rates, read_profile

    points = read_profile(args.profile)
    cost = fit_cost_model(
        [pt["G"] for pt in points], [pt["peak_mem_gb"] for pt in points], [pt["step_s"] for pt in points]
    )
    rates = read_pass_rates(args.pass_rates)
    candidates = parse_candidates(args.candidates)
    from catalog.io.memory import check_fits

    check_fits(
        BYTES_PER_CELL * len(candidates) * len(rates.request_id),
        what=f"{len(candidates)} candidate G x {len(rates.request_id)} requests",
        field="--candidates",
        hint="pass fewer candidates (the planner scores each G on every request)",
    )
    plan = plan_group_size(
        cost,
        rates.pass_rate,
        memory_budget_gb=args.memory_budget,
        candidates=candidates,
        n_samples=rates.n_samples,
        estimator=args.estimator,
        objective=args.objective,
        extrapolate=args.extrapolate,
    )
    out = plan.to_dict() | {
        "n_requests": len(rates.request_id),
        "mean_pass_rate": float(rates.pass_rate.mean()),
    }
    if args.json:
        print(json.dumps(out))
        return 0
    mem, step = cost.memory, cost.step
    print(
        f"{len(rates.request_id)} requests, mean pass rate {out['mean_pass_rate']:.3f}; q estimator: {plan.estimator}"
    )
    for name, line, unit in (("memory", mem, "GB"), ("step time", step, "s")):
        quality = (
            "exact through 2 points" if line.exact else f"R^2 {line.r2:.3f}, RMSE {line.rmse:.3g} {unit}"
        )
        print(f"{name} ~ {line.intercept:.3g} + {line.slope:.3g} G {unit} ({quality})")
        if line.slope < 0:
            print(
                f"note: the profile's {name} falls as G grows: read it as noise, not as a trend to extrapolate"
            )
    best = max((c.objective for c in plan.candidates if c.fits_memory), default=1.0) or 1.0
    print(f"{'G':>4} {'q':>7} {'mem GB':>8} {'step s':>8} {plan.objective:>13} {'rel':>5}  note")
    for c in plan.candidates:
        notes = []
        if plan.recommended == c.G:
            notes.append("<- recommended")
        if not c.fits_memory:
            notes.append(f"over {plan.memory_budget_gb:g} GB")
        if c.extrapolated:
            notes.append("extrapolated" if args.extrapolate else "extrapolated, not recommended")
        print(
            f"{c.G:>4} {c.q:7.4f} {c.mem_gb:8.2f} {c.step_s:8.3g} {c.objective:13.5g} {c.objective / best:5.2f}  "
            + ", ".join(notes)
        )
    print(f"recommended G = {plan.recommended}")
    return 0
