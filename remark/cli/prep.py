"""``remark prep``: read a source, ground its mentions, pool one row per request, write a dataset dir.

A thin layer over :mod:`data_prep` (readers, ``pool_threads``, ``write_dataset``). ``--input`` may be
given several times, each optionally prefixed with the split its rows belong to (``train=PATH``), as
for Rank-GRPO's time-split files; rows without a split are assigned one by a stable hash, or, with
``--split-by-time``, by the period their request's timestamp falls in (``data_prep.timesplit``).
``remark prep synthetic --out DIR [--n-requests N --n-items N --seed S]`` writes the embedded synthetic
world (``data_prep.synthetic``) instead, with no input.

The grounding flags (``--match-mode``, ``--year-tolerance``, ``--match-threshold``, ``--match-scorer``;
``catalog.match.GroundingSettings``) ground the mentions and are written to ``meta.json["grounding"]``,
the settings the reward, the validation and ``remark eval`` then use for this dataset.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from catalog.shared.errors import InputError
from remark.cli.args import positive_int
from remark.cli.grounding_flags import add_grounding_flags, requested_grounding

SPLIT_PREFIXES = ("train", "valid", "test", "val", "validation", "dev")


def add_parser(subparsers) -> None:
    from data_prep.sources import SOURCES

    p = subparsers.add_parser(
        "prep",
        help="build a pooled dataset (one row per request) from a source",
        description="Read SOURCE, ground every mention to the catalog, pool responders into one row per "
        "request, and write requests.parquet, responder_rows.parquet, catalog.parquet, meta.json and "
        "stats.json to --out (atomically). Sources: "
        + "; ".join(f"{k}: {v[1]}" for k, v in SOURCES.items())
        + "; synthetic: the embedded seeded multi-responder world (no --input).",
    )
    choices = [*SOURCES, "synthetic"]
    p.add_argument("source", choices=choices, metavar="SOURCE", help=", ".join(choices))
    p.add_argument(
        "--input",
        action="append",
        default=None,
        metavar="[SPLIT=]PATH",
        help="input file (required except for synthetic); repeat for several; prefix with train=, valid= or "
        "test= to set their split",
    )
    p.add_argument("--n-requests", type=positive_int, default=400, help="synthetic: requests (default 400)")
    p.add_argument("--n-items", type=positive_int, default=96, help="synthetic: catalog items (default 96)")
    p.add_argument("--seed", type=int, default=0, help="synthetic: seed (default 0)")
    p.add_argument("--catalog", type=Path, default=None, help="catalog file (overrides the source's own)")
    p.add_argument("--items", choices=["raw", "clusters"], default="raw", help="ProtoQA items (default raw)")
    add_grounding_flags(p, from_dataset=False)
    p.add_argument("--domain", choices=["movie", "book", "music", "answer"], default=None, help="override")
    p.add_argument(
        "--split-fractions",
        default="train=0.8,valid=0.1,test=0.1",
        help="fractions for requests without a split (default %(default)s)",
    )
    p.add_argument("--split-seed", type=int, default=0, help="seed of the split hash (default 0)")
    p.add_argument(
        "--split-by-time",
        default=None,
        metavar="SPEC",
        help="split requests without a split by their rows' timestamp instead of the hash: SPLIT=PERIOD,... "
        "with PERIOD P, ..P, P.. or P..Q (P = YYYY[-MM[-DD]], UTC), e.g. train=..2022-10,valid=2022-11,"
        "test=2022-12 (Rank-GRPO's Reddit-v2 split; also spelled reddit-v2)",
    )
    p.add_argument("--skip-bad-rows", action="store_true", help="drop bad rows and count them in stats.json")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output directory: new, empty, or an earlier `remark prep` output (replaced atomically)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace --out even if it is a folder remark prep did not write (never an input)",
    )
    p.add_argument("--json", action="store_true", help="print stats as JSON")
    p.set_defaults(func=run)


def parse_input(text: str) -> tuple[str | None, str]:
    """``"train=data/a.jsonl"`` -> ("train", "data/a.jsonl"); a plain path -> (None, path)."""
    head, sep, tail = text.partition("=")
    if sep and head.lower() in SPLIT_PREFIXES and tail:
        return head.lower(), tail
    return None, text


def parse_fractions(text: str) -> list[tuple[str, float]]:
    """``"train=0.8,valid=0.2"`` -> [("train", 0.8), ("valid", 0.2)] (checked by ``SplitSpec``)."""
    pairs = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            pairs.append((name.strip(), float(value)))
        except ValueError:
            sep = ""
        if not sep:
            raise InputError(
                f"cannot read {part!r}", field="--split-fractions", hint="write train=0.8,valid=0.1,test=0.1"
            )
    return pairs


def run_synthetic(args: argparse.Namespace) -> int:
    """``remark prep synthetic``: the embedded world, pooled and written like any other source."""
    from catalog.shared.outputs import check_output_dir
    from data_prep.dataset import DATASET_KIND
    from data_prep.synthetic import build_dataset

    if args.input:
        raise InputError("the synthetic source takes no --input", field="--input", hint="drop --input")
    from catalog.match import GroundingSettings

    check_output_dir(args.out, DATASET_KIND, force=args.force)
    from catalog.shared.memory import check_fits
    from data_prep.synthetic import synthetic_memory

    check_fits(
        synthetic_memory(args.n_requests, args.n_items),
        what=f"a synthetic world of {args.n_requests} requests and {args.n_items} items",
        field="--n-requests",
        hint="lower --n-requests or --n-items",
    )
    grounding = GroundingSettings().with_overrides(requested_grounding(args))
    try:
        ds = build_dataset(
            args.out,
            n_requests=args.n_requests,
            n_items=args.n_items,
            seed=args.seed,
            grounding=grounding,
            force=args.force,
            command=getattr(args, "command_line", None),
        )
    except ValueError as err:
        raise InputError(str(err), field="--n-requests/--n-items", hint="see `remark prep --help`") from err
    return _report(args, ds)


def run(args: argparse.Namespace) -> int:
    if args.source == "synthetic":
        return run_synthetic(args)
    if not args.input:
        raise InputError(
            f"source {args.source!r} needs --input", field="--input", hint="pass --input PATH (repeatable)"
        )
    from catalog.match import GroundingSettings, Matcher
    from catalog.shared.outputs import check_output_dir
    from catalog.table import load_catalog
    from data_prep.dataset import DATASET_KIND, write_dataset
    from data_prep.pool import SplitSpec, pool_threads
    from data_prep.readers import combine, read_source
    from data_prep.schema import SPLIT_ALIASES, Report
    from data_prep.timesplit import PRESETS, TimeSplit

    grounding = GroundingSettings().with_overrides(requested_grounding(args))
    by_time = None
    if args.split_by_time is not None:
        try:
            by_time = TimeSplit.parse(args.split_by_time)
        except ValueError as err:
            raise InputError(
                str(err),
                field="--split-by-time",
                hint=f"e.g. {PRESETS['reddit-v2']} (or {', '.join(PRESETS)})",
            ) from err
    fractions = tuple(parse_fractions(args.split_fractions))
    try:
        spec = SplitSpec(fractions, seed=args.split_seed, by_time=by_time)
    except ValueError as err:
        raise InputError(str(err), field="--split-fractions") from err
    sources = [parse_input(text)[1] for text in args.input] + [args.catalog]
    check_output_dir(args.out, DATASET_KIND, inputs=sources, force=args.force)  # before any reading
    report = Report(skip=args.skip_bad_rows)
    parts, splits, inputs = [], [], []
    for text in args.input:
        split, path = parse_input(text)
        parts.append(read_source(args.source, path, items=args.items, domain=args.domain, report=report))
        splits.append(SPLIT_ALIASES.get(split, split) if split else None)
        inputs.append({"path": str(path), "split": splits[-1], **_extra(parts[-1].meta)})
    threads = combine(parts, splits=splits)
    if args.catalog is not None:
        catalog = load_catalog(args.catalog)
    elif threads.catalog is not None:
        catalog = threads.catalog
    else:
        raise InputError(
            f"source {args.source!r} defines no catalog", field="--catalog", hint="pass --catalog PATH"
        )
    matcher = Matcher(catalog, grounding)
    pooled = pool_threads(threads, matcher, split=spec, report=report)
    if pooled.height == 0:  # every input had rows (read_source checks), so pooling removed them all
        raise InputError(
            "no request left after pooling",
            path=", ".join(str(i["path"]) for i in inputs),
            hint=_skipped(report),
        )
    meta = {
        "source": threads.meta["source"],
        "domain": args.domain or threads.meta["domain"],
        "has_years": bool(catalog.has_years),
        "instruction_included": threads.meta["instruction_included"],
        "inputs": inputs,
        "catalog": str(args.catalog) if args.catalog else "from source",
        "catalog_items": len(catalog),
        "items": args.items if args.source == "protoqa" else None,
        "split_fractions": None if by_time else dict(spec.fractions),
        "split_seed": None if by_time else spec.seed,
        "split_by_time": by_time.spec if by_time else None,
    }
    ds = write_dataset(
        args.out,
        pooled,
        catalog,
        meta,
        grounding=grounding,
        report=report,
        inputs=sources,
        force=args.force,
        command=getattr(args, "command_line", None),
    )
    return _report(args, ds)


def _extra(meta: dict) -> dict:
    return {
        k: v for k, v in meta.items() if k not in ("source", "domain", "has_years", "instruction_included")
    }


def _report(args: argparse.Namespace, ds) -> int:
    """Print the written dataset's stats (JSON with --json)."""
    from data_prep.dataset import read_stats
    from data_prep.stats import format_stats

    stats = read_stats(args.out) or {}
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        print(f"wrote {args.out} ({ds.requests.height} requests, {ds.responder_rows.height} responder rows)")
        print(format_stats(stats))
        skipped = (stats.get("prep") or {}).get("skipped") or {}
        if skipped:
            first = next(iter((stats["prep"].get("skipped_examples") or {}).values()), "")
            print(f"warning: {sum(skipped.values())} bad row(s) skipped; the first: {first}")
    return 0


def _skipped(report) -> str | None:
    if not report.skipped:
        return None
    return "rows skipped: " + ", ".join(f"{k} {v}" for k, v in sorted(report.skipped.items()))
