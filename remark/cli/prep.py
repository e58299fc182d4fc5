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

``--catalog-splits train`` keeps the written catalog to the items that the named splits' requests name,
with their mentions there as popularity (``data_prep.catalog_splits``): mentions are still grounded and
pooled against the whole catalog, so every request keeps its targets, but generated lists ground only
to items known from those splits (recorded as ``meta.json["catalog_splits"]``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from catalog.io.errors import InputError
from remark.cli.grounding_flags import add_grounding_flags, requested_grounding
from remark.config.ranges import check_number, flag_type

SPLIT_PREFIXES = ("train", "valid", "test", "val", "validation", "dev")
#: split names ``--split-fractions`` takes (data_prep.schema's SPLITS and SPLIT_ALIASES, spelled out so
#: that ``remark --help`` imports no polars; tests/remark/test_prep_flags.py checks they agree)
SPLITS = ("train", "valid", "test")
SPLIT_ALIASES = {"val": "valid", "validation": "valid", "dev": "valid", "training": "train", "eval": "test"}
DEFAULT_FRACTIONS = "train=0.8,valid=0.1,test=0.1"
#: the defaults of the flags that default to None, so that a flag a source ignores is refused only when given
DEFAULTS = {
    "n_requests": 400,
    "n_items": 96,
    "seed": 0,
    "split_fractions": DEFAULT_FRACTIONS,
    "split_seed": 0,
}
#: flags only the synthetic world reads, and flags every source but the synthetic one reads
SYNTHETIC_ONLY = ("--n-requests", "--n-items", "--seed")
READERS_ONLY = (
    "--catalog", "--domain", "--split-seed", "--split-by-time", "--skip-bad-rows", "--catalog-splits"
)  # fmt: skip


def add_parser(subparsers) -> None:
    from data_prep.sources import DATA_SOURCES, DOMAINS

    p = subparsers.add_parser(
        "prep",
        help="build a pooled dataset (one row per request) from a source",
        description="Read SOURCE, ground every mention to the catalog, pool responders into one row per "
        "request, and write requests.parquet, responder_rows.parquet, catalog.parquet, meta.json and "
        "stats.json to --out (atomically). Sources: "
        + "; ".join(f"{k}: {v[1]}" for k, v in DATA_SOURCES.items())
        + "; synthetic: the embedded seeded multi-responder world (no --input).",
    )
    choices = [*DATA_SOURCES, "synthetic"]
    p.add_argument("source", choices=choices, metavar="SOURCE", help=", ".join(choices))
    p.add_argument(
        "--input",
        action="append",
        default=None,
        metavar="[SPLIT=]PATH",
        help="input file (required except for synthetic); repeat for several; prefix with train=, valid= or "
        "test= to set their split",
    )
    p.add_argument("--n-requests", type=flag_type("--n-requests"), help="synthetic: requests (default 400)")
    p.add_argument("--n-items", type=flag_type("--n-items"), help="synthetic: catalog items (default 96)")
    p.add_argument("--seed", type=flag_type("--seed"), help="synthetic: seed of the world (default 0)")
    p.add_argument("--catalog", type=Path, default=None, help="catalog file (overrides the source's own)")
    p.add_argument("--items", choices=["raw", "clusters"], default=None, help="ProtoQA items (default raw)")
    p.add_argument(
        "--catalog-splits",
        default=None,
        metavar="SPLIT,...",
        help="write only the catalog items that requests of these splits name, with their mentions there as "
        "popularity (e.g. train: no test answer in the catalog); mentions are still pooled against the "
        "whole catalog (default: the whole catalog)",
    )
    add_grounding_flags(p, from_dataset=False)
    p.add_argument("--domain", choices=DOMAINS, default=None, help="override")
    p.add_argument(
        "--split-fractions",
        default=None,
        metavar="SPLIT=F,...",
        help=f"fractions (in [0, 1], summing to 1) for requests without a split; the synthetic world draws "
        f"its splits with them (default {DEFAULT_FRACTIONS})",
    )
    p.add_argument(
        "--split-seed",
        type=flag_type("--split-seed"),
        help="seed of the split hash (default 0; not synthetic)",
    )
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
    """``"train=0.8,valid=0.2"`` -> [("train", 0.8), ("valid", 0.2)]: distinct split names (aliases such as
    ``val`` folded), each fraction finite and in [0, 1] (the ranges table's ``--split-fractions``), summing
    to 1; else ``InputError`` naming the flag and the value."""
    field, hint = "--split-fractions", f"write e.g. {DEFAULT_FRACTIONS}"
    pairs: list[tuple[str, float]] = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = SPLIT_ALIASES.get(name.strip().lower(), name.strip().lower())
        try:
            fraction = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise InputError(f"cannot read {part!r}", field=field, hint=hint)
        if name not in SPLITS:
            raise InputError(
                f"unknown split {part.partition('=')[0].strip()!r}",
                field=field,
                hint=f"use {', '.join(SPLITS)}",
            )
        if name in dict(pairs):
            raise InputError(f"split {name!r} is given twice", field=field, hint=hint)
        check_number(field, fraction)
        pairs.append((name, fraction))
    total = sum(f for _, f in pairs)
    if abs(total - 1.0) > 1e-9:
        raise InputError(
            f"the fractions {text!r} add up to {total:g}: they must sum to 1", field=field, hint=hint
        )
    return pairs


def given(args: argparse.Namespace) -> list[str]:
    """The flags of this command a user gave (those whose value is not the parser's None default)."""
    flags = {"n_requests": "--n-requests", "n_items": "--n-items", "seed": "--seed", "catalog": "--catalog",
             "items": "--items", "domain": "--domain", "split_fractions": "--split-fractions",
             "split_seed": "--split-seed", "split_by_time": "--split-by-time",
             "catalog_splits": "--catalog-splits"}  # fmt: skip
    out = [flag for dest, flag in flags.items() if getattr(args, dest, None) is not None]
    return out + (["--skip-bad-rows"] if args.skip_bad_rows else [])


def refuse_ignored(args: argparse.Namespace) -> None:
    """Every flag given acts on this source, or ``InputError`` naming it and what ignores it."""
    flags = given(args)
    source = args.source

    def refuse(flag: str, why: str, hint: str) -> None:
        raise InputError(f"{flag} has no effect {why}", field=flag, hint=hint)

    for flag in flags:
        if source == "synthetic" and flag in READERS_ONLY:
            refuse(flag, "on the synthetic source (it reads no input: its --seed draws the world and its splits)",
                   f"drop {flag}")  # fmt: skip
        if source != "synthetic" and flag in SYNTHETIC_ONLY:
            refuse(flag, f"on source {source!r}: it sets the synthetic world", f"drop {flag}")
    if "--items" in flags and source != "protoqa":
        refuse("--items", f"on source {source!r}: it picks ProtoQA's answer items", "drop --items")
    if "--split-by-time" in flags:
        for flag in ("--split-fractions", "--split-seed"):
            if flag in flags:
                refuse(flag, "with --split-by-time, which assigns the splits by date instead",
                       f"drop {flag} or --split-by-time")  # fmt: skip
    if source != "synthetic" and args.input and all(parse_input(t)[0] for t in args.input):
        for flag in ("--split-fractions", "--split-seed", "--split-by-time"):
            if flag in flags:
                refuse(flag, "when every --input names its split (train=PATH, ...): no request is left to split",
                       f"drop {flag}, or give some inputs without a split prefix")  # fmt: skip


def value(args: argparse.Namespace, dest: str):
    """The flag's value, or its default when it was not given."""
    got = getattr(args, dest)
    return DEFAULTS[dest] if got is None else got


def run_synthetic(args: argparse.Namespace) -> int:
    """``remark prep synthetic``: the embedded world, pooled and written like any other source."""
    from catalog.io.outputs import check_output_dir
    from data_prep.dataset import DATASET_KIND
    from data_prep.synthetic import build_dataset

    if args.input:
        raise InputError("the synthetic source takes no --input", field="--input", hint="drop --input")
    fractions = dict(parse_fractions(value(args, "split_fractions")))
    from catalog.match import GroundingSettings

    check_output_dir(args.out, DATASET_KIND, force=args.force, hold=True)
    from catalog.io.memory import check_fits
    from data_prep.synthetic import synthetic_memory

    n_requests, n_items = value(args, "n_requests"), value(args, "n_items")
    check_fits(
        synthetic_memory(n_requests, n_items),
        what=f"a synthetic world of {n_requests} requests and {n_items} items",
        field="--n-requests",
        hint="lower --n-requests or --n-items",
    )
    grounding = GroundingSettings().with_overrides(requested_grounding(args))
    try:
        ds = build_dataset(
            args.out,
            n_requests=n_requests,
            n_items=n_items,
            seed=value(args, "seed"),
            split_fractions=tuple(fractions.get(name, 0.0) for name in SPLITS),
            grounding=grounding,
            force=args.force,
            command=getattr(args, "command_line", None),
        )
    except ValueError as err:
        raise InputError(str(err), field="--n-requests/--n-items", hint="see `remark prep --help`") from err
    return _report(args, ds)


def run(args: argparse.Namespace) -> int:
    refuse_ignored(args)
    if args.source == "synthetic":
        return run_synthetic(args)
    if not args.input:
        raise InputError(
            f"source {args.source!r} needs --input", field="--input", hint="pass --input PATH (repeatable)"
        )
    from catalog.io.outputs import check_output_dir
    from catalog.match import GroundingSettings, Matcher
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
    fractions = tuple(parse_fractions(value(args, "split_fractions")))
    catalog_splits = parse_splits(args.catalog_splits) if args.catalog_splits is not None else None
    try:
        spec = SplitSpec(fractions, seed=value(args, "split_seed"), by_time=by_time)
    except ValueError as err:
        raise InputError(str(err), field="--split-fractions") from err
    sources = [parse_input(text)[1] for text in args.input] + [args.catalog]
    check_output_dir(
        args.out, DATASET_KIND, inputs=sources, force=args.force, hold=True
    )  # before any reading
    report = Report(skip=args.skip_bad_rows)
    parts, splits, inputs = [], [], []
    for text in args.input:
        split, path = parse_input(text)
        items = args.items or "raw"
        parts.append(read_source(args.source, path, items=items, domain=args.domain, report=report))
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
    if catalog_splits is not None:
        from data_prep.catalog_splits import catalog_of_splits

        try:
            catalog = catalog_of_splits(catalog, pooled, catalog_splits)
        except ValueError as err:
            raise InputError(
                str(err), field="--catalog-splits", hint="name a split that has requests"
            ) from err
    meta = {
        "source": threads.meta["source"],
        "domain": args.domain or threads.meta["domain"],
        "has_years": bool(catalog.has_years),
        "instruction_included": threads.meta["instruction_included"],
        "inputs": inputs,
        "catalog": str(args.catalog) if args.catalog else "from source",
        "catalog_items": len(catalog),
        "catalog_splits": catalog_splits,
        "items": (args.items or "raw") if args.source == "protoqa" else None,
        "split_fractions": None if by_time else dict(spec.fractions),
        "split_seed": None if by_time else spec.seed,
        "split_by_time": by_time.spec if by_time else None,
        "split_near_duplicate_threshold": None if by_time else spec.near_duplicate_threshold,
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
        answers=threads.answers,
    )
    return _report(args, ds)


def parse_splits(text: str) -> list[str]:
    """``"train"`` or ``"train,valid"`` -> distinct split names (aliases such as ``val`` folded); else
    ``InputError`` naming ``--catalog-splits``."""
    names = [SPLIT_ALIASES.get(t.strip().lower(), t.strip().lower()) for t in text.split(",")]
    bad = [t for t in names if t not in SPLITS]
    if bad or not names:
        raise InputError(
            f"unknown split {bad[0] if bad else text!r}",
            field="--catalog-splits",
            hint=f"use {', '.join(SPLITS)}",
        )
    return list(dict.fromkeys(names))


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
