"""``remark diagnose``: responder-noise diagnostic of a pooled dataset (see :mod:`remark.diagnose`).

Lists come from ``--lists FILE`` (JSON lines, one object per request: ``{"request_id": str, "lists":
[[item_id or null, ...], ...]}`` with G lists of grounded catalog ids, or ``"completions": [str, ...]``
with G raw completions, parsed with ``catalog.parse.parse_list`` and grounded against the dataset's
catalog with its grounding settings, ``meta.json["grounding"]``, unless a grounding flag overrides them)
or from ``--policy popularity``.

The reward schemes, the scalings and the pass-rate schemes the help lists come from the registry
(``remark.algos.registry.offered``: read from the registrants' declarations, so ``--help`` loads no torch).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from catalog.io.files import iter_jsonl
from remark.algos.registry import choices_help, lists_alone, offered
from remark.cli.grounding_flags import add_grounding_flags, print_notes, requested_grounding
from remark.config.ranges import flag_type

#: the ``catalog.io.outputs.atomic_file`` kind of ``--pass-rates-out``.
PASS_RATES_KIND = "pass-rates"


def add_parser(subparsers) -> None:
    schemes = offered("reward")
    scales = offered("scale")
    pass_rate = [d for d in schemes if lists_alone(d.meta)]
    p = subparsers.add_parser(
        "diagnose",
        help="responder-noise diagnostic: draw share of advantage variance, zero-signal groups, mean |A|",
        description="For G lists per request (from --lists or a built-in policy), report per reward scheme "
        "(a) the share of the advantage variance explained by the responder draw, (b) the fraction of "
        "groups whose G lists all get the same reward vector, (c) mean |A|, and (d) the share of union "
        f"items named by one responder. Every registered reward scheme is reported: {choices_help(schemes)}.",
    )
    p.add_argument("dataset", type=Path, metavar="DIR", help="prepared dataset directory (remark prep)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--lists", type=Path, metavar="FILE", help="JSON lines of lists or completions per request"
    )
    src.add_argument(
        "--policy",
        choices=["popularity"],
        help="sample K distinct items per list from the training split's union counts",
    )
    p.add_argument(
        "--group-size", type=flag_type("--group-size"), default=8, help="G, lists per request (default 8)"
    )
    p.add_argument("--k", type=flag_type("--k"), default=20, help="K, scored ranks (default 20)")
    p.add_argument(
        "--scale",
        choices=[d.name for d in scales],
        default="group",
        help=f"advantage scaling (default group): {choices_help(scales)}",
    )
    p.add_argument("--split", default=None, help="diagnose only this split's requests (default: all)")
    p.add_argument(
        "--prior-split",
        default=None,
        help="--policy popularity: split whose union counts make the prior (default train)",
    )
    p.add_argument(
        "--batch-size",
        type=flag_type("--batch-size"),
        default=48,
        help="requests per batch (batch scaling; default 48)",
    )
    p.add_argument(
        "--seed", type=flag_type("--seed"), default=None, help="--policy popularity: its seed (default 0)"
    )
    add_grounding_flags(p, from_dataset=True)
    p.add_argument(
        "--pass-rate-scheme",
        choices=[d.name for d in pass_rate],
        default="union",
        help="reward behind the pass rates (default union): a scheme that rewards each list from the list and "
        "its request alone (one reward vector per list, no responder draw): "
        + ", ".join(d.name for d in pass_rate),
    )
    p.add_argument(
        "--pass-rates-out",
        type=Path,
        default=None,
        help="write per-request pass rates (.parquet, .jsonl or .csv; a new file or an earlier --pass-rates-out)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="let --pass-rates-out replace a file remark did not write (never an input)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def _read_lists(
    path: Path, known: set[str], group_size: int, catalog: Any, grounding: Any
) -> dict[str, list]:
    """Per request id, G lists of grounded ids (completions are parsed and grounded here)."""
    if not path.is_file():
        raise InputError("file not found", path=path, hint="pass a JSON lines file of lists per request")
    out: dict[str, list] = {}
    texts: dict[str, list[str]] = {}
    for row, obj in iter_jsonl(path):
        if not isinstance(obj.get("request_id"), str):
            raise InputError(
                "expected an object with a string request_id", path=path, row=row, field="request_id"
            )
        rid = obj["request_id"]
        if rid not in known:
            raise InputError(f"unknown request_id {rid!r}", path=path, row=row, field="request_id")
        if rid in out or rid in texts:
            raise InputError(f"request_id {rid!r} appears twice", path=path, row=row, field="request_id")
        key = "lists" if "lists" in obj else "completions" if "completions" in obj else None
        if key is None:
            raise InputError("needs a 'lists' or a 'completions' field", path=path, row=row)
        value = obj[key]
        if not isinstance(value, list) or len(value) != group_size:
            got = len(value) if isinstance(value, list) else type(value).__name__
            raise InputError(
                f"{key} must hold G = {group_size} entries, got {got}",
                path=path,
                row=row,
                field=key,
                hint="set --group-size to the number of lists per request",
            )
        if key == "lists":
            for lst in value:
                if not isinstance(lst, list) or not all(x is None or isinstance(x, str) for x in lst):
                    raise InputError(
                        "each list must be a list of item ids (strings) or nulls",
                        path=path,
                        row=row,
                        field="lists",
                    )
            out[rid] = value
        else:
            if not all(isinstance(t, str) for t in value):
                raise InputError("completions must be strings", path=path, row=row, field="completions")
            texts[rid] = value
    if texts:
        out.update(_ground_completions(texts, catalog, grounding))
    if not out:
        raise InputError("no lists found", path=path)
    return out


def _ground_completions(texts: dict[str, list[str]], catalog: Any, grounding: Any) -> dict[str, list]:
    """Parse each completion and ground its lines with ``Matcher.ground_lines`` (the rewards' path)."""
    from catalog.match import Matcher
    from catalog.parse import parse_list

    rids = list(texts)
    rows = [parse_list(t) for rid in rids for t in texts[rid]]
    ids = iter(Matcher(catalog, grounding).ground_lines(rows))
    return {rid: [next(ids) for _ in texts[rid]] for rid in rids}


def _check_memory(requests: Any, args: argparse.Namespace) -> None:
    """Refuse (exit 2) a G, batch size and K whose batch would not fit in memory
    (``remark.diagnose.diagnose_memory``), before any list is drawn or read."""
    from catalog.io.memory import check_fits
    from remark.diagnose import diagnose_memory

    n = requests["responders"].list.len().to_list()
    need = diagnose_memory(n, group_size=args.group_size, k=args.k, batch_size=args.batch_size)
    batch = min(args.batch_size, sum(1 for x in n if x > 0))
    check_fits(
        need,
        what=f"one batch of {batch} requests x G = {args.group_size} lists x K = {args.k} ranks "
        f"(up to {max(n, default=0)} responders)",
        field="--group-size",
        hint="lower --group-size or --batch-size (one batch is held at a time)",
    )


def run(args: argparse.Namespace) -> int:
    import polars as pl

    from catalog.io.outputs import TABLE_FORMATS, atomic_file, check_output_file
    from data_prep.dataset import load_dataset
    from remark.diagnose import diagnose, iter_popularity_groups, popularity_prior

    out_check = dict(
        formats=TABLE_FORMATS, inputs=[args.dataset, args.lists], force=args.force, field="--pass-rates-out"
    )
    fmt = None
    if args.pass_rates_out is not None:  # refuse before the work: never an input, nor a foreign file
        fmt = check_output_file(args.pass_rates_out, PASS_RATES_KIND, **out_check)
    for flag, value in (("--seed", args.seed), ("--prior-split", args.prior_split)):
        if value is not None and args.policy is None:  # a flag of the popularity policy only
            raise InputError(
                f"{flag} has no effect with --lists: it sets the popularity policy's lists",
                field=flag,
                hint=f"drop {flag}, or use --policy popularity instead of --lists",
            )
    ds = load_dataset(args.dataset)
    requests = ds.requests
    if args.split is not None:
        requests = requests.filter(pl.col("split") == args.split)
        if requests.height == 0:
            splits = sorted(set(ds.requests["split"].to_list()))
            raise InputError(
                f"no requests in split {args.split!r}", path=args.dataset, hint=f"splits: {splits}"
            )
    notes: dict[str, Any] = {}
    _check_memory(requests, args)
    if args.policy == "popularity":
        prior_split = args.prior_split or "train"
        if ds.requests.filter(pl.col("split") == prior_split).height == 0:
            notes["prior"] = f"no {prior_split!r} split: the prior uses every request"
            prior_split = None
        items, weights = popularity_prior(ds.requests, split=prior_split)
        lists: Any = iter_popularity_groups(  # drawn batch by batch, as diagnose reads them
            requests.height, items, weights, group_size=args.group_size, k=args.k, seed=args.seed or 0
        )
        policy, seed = "popularity", args.seed or 0
        notes["prior_items"] = len(items)
    else:
        from data_prep.dataset import choose_grounding

        choice = choose_grounding(ds, requested_grounding(args), by="command-line flags")
        print_notes(choice)
        notes["grounding"] = choice.used.describe() + (
            " (overrides the dataset's)" if choice.overridden else ""
        )
        found = _read_lists(
            args.lists, set(requests["request_id"].to_list()), args.group_size, ds.catalog, choice.used
        )
        requests = requests.filter(pl.col("request_id").is_in(list(found)))
        lists, policy, seed = found, f"lists from {args.lists}", None
    result = diagnose(
        requests,
        lists,
        group_size=args.group_size,
        k=args.k,
        scale=args.scale,
        batch_size=args.batch_size,
        pass_rate_scheme=args.pass_rate_scheme,
        policy=policy,
        seed=seed,
    )
    result.notes.update(notes)
    if args.pass_rates_out is not None:
        with atomic_file(args.pass_rates_out, PASS_RATES_KIND, **out_check) as tmp:
            if fmt == "parquet":
                result.pass_rates.write_parquet(tmp)
            elif fmt == "csv":
                result.pass_rates.write_csv(tmp)
            else:
                result.pass_rates.write_ndjson(tmp)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(f"remark diagnose {args.dataset}")
        print(result.format_table())
        if args.pass_rates_out is not None:
            print(
                f"pass rates ({args.pass_rate_scheme}) for {result.pass_rates.height} requests -> {args.pass_rates_out}"
            )
    return 0
