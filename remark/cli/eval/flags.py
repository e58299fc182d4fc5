"""``remark eval``'s shared flags and output helpers: cut-offs, metrics, views and filters (spelled out so
that ``remark --help`` imports no numpy), the bootstrap flags, ``--force``, and how results are printed.
"""

from __future__ import annotations

import argparse
import json
import sys

from catalog.io.errors import InputError
from eval.metric_registry import METRICS
from remark.cli.grounding_flags import add_grounding_flags
from remark.config.ranges import MAX_K, flag_type

DEFAULT_KS = [5, 10, 15, 20]
#: the registered metrics (``eval.metric_registry`` imports no numpy)
METRIC_NAMES = list(METRICS)
# eval.metrics' FILTERS, spelled out so that `remark --help` imports no numpy
# (tests/eval/test_cli.py checks they agree).
FILTER_NAMES = ["drop_ooc_seen", "drop_ooc", "drop_seen", "drop_none"]
#: ``compare --lists``: the per-request table of an ``eval run`` dir and where its settings are
LISTS = {"greedy": ("per_request.parquet", None), "sampled": ("per_request_sampled.parquet", "sampled")}
VIEW_NAMES = ["per_responder", "union", "single_mention", "per_mention"]
DEFAULT_VIEWS = VIEW_NAMES[:3]


#: ``--k`` values: integers from 1 to MAX_K (the ranges table's ``eval --k``; argparse refuses the rest)
cutoff = flag_type("eval --k")


def filter_names(names: list[str] | None) -> list[str]:
    """``--filters`` as given (``all`` = the four), in FILTER_NAMES order."""
    chosen = set(names or ())
    return [f for f in FILTER_NAMES if f in chosen or "all" in chosen]


def ci_flags(p: argparse.ArgumentParser, *, method: str = "bca", resamples: int = 9999) -> None:
    g = p.add_argument_group("confidence intervals (bootstrap over requests)")
    g.add_argument(
        "--ci-method", choices=["bca", "percentile", "basic"], default=method, help="default %(default)s"
    )
    g.add_argument(
        "--resamples",
        type=flag_type("--resamples"),
        default=resamples,
        help="bootstrap resamples (default %(default)s)",
    )
    g.add_argument(
        "--confidence",
        type=flag_type("--confidence"),
        default=0.95,
        help="confidence level (default %(default)s)",
    )
    g.add_argument("--seed", type=flag_type("--seed"), default=0, help="bootstrap seed (default %(default)s)")


def score_flags(p: argparse.ArgumentParser) -> None:
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
    ci_flags(p)


def force_flag(p: argparse.ArgumentParser, flag: str = "--out", what: str = "a folder") -> None:
    p.add_argument(
        "--force",
        action="store_true",
        help=f"replace {flag} even if it is {what} this command did not write (never an input)",
    )


def bootstrap_config(args: argparse.Namespace):
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


def emit(result: dict, args: argparse.Namespace, markdown: str) -> None:
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(markdown, end="")
    if result.get("warnings"):
        print("warnings: " + ", ".join(f"{k} = {v}" for k, v in result["warnings"].items()), file=sys.stderr)


def grounding_notes(result: dict) -> None:
    """Print the result's grounding notes (settings that differ from the dataset's)."""
    for line in result.get("settings", {}).get("grounding", {}).get("notes", []):
        print(line, file=sys.stderr)
