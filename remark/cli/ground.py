"""``remark ground``: ground titles (one per line) or whole generated lists against a catalog.

    remark ground --catalog gt_catalog.csv titles.txt
    printf '1. Arrival (2016)\\n2. Matrix, The (1999)\\n' | remark ground --catalog gt_catalog.csv --json
    remark ground --catalog gt_catalog.csv --lists --json completions.jsonl
    remark ground --data data/reddit-v2 titles.txt     # a dataset's catalog and grounding settings

Each input line is parsed like a list line (numbering, markdown, quotes, "(Year)" handled). With
``--lists`` the input is one completion (or, for a ``.jsonl`` file, one completion per line: a JSON
string or an object with a ``completion`` field) and every ranked line is grounded, with its rank and
character span. ``--json`` prints one JSON object per line with ``input``, ``item_id`` (null when nothing
matched), ``title``, ``year``, ``rule``, ``score`` and ``detail``; without it a tab-separated table.

Grounding: ``--data DIR`` takes a prepared dataset's catalog and its grounding settings
(``meta.json["grounding"]``), so titles are grounded as the reward and ``remark eval`` ground them;
``--catalog`` starts from the defaults. The grounding flags (``--match-mode``, ``--year-tolerance``,
``--match-threshold``, ``--match-scorer``) override field by field; with ``--data`` a difference from the
dataset's settings is printed on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from catalog.io.errors import InputError
from remark.cli.grounding_flags import add_grounding_flags, print_notes, requested_grounding


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ground",
        help="ground titles or generated lists to catalog items",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", nargs="?", help="input file (default: standard input)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--catalog", help="catalog file (csv/parquet/json/jsonl, entity2id.json, ReDial csv)")
    src.add_argument(
        "--data", type=Path, help="prepared dataset directory: its catalog and grounding settings"
    )
    p.add_argument(
        "--catalog-format",
        choices=["csv", "tsv", "parquet", "json", "jsonl", "entity2id", "redial"],
        help="catalog format (default: from the file)",
    )
    add_grounding_flags(p, from_dataset=False)
    p.add_argument(
        "--lists", action="store_true", help="input is a whole completion (or .jsonl of completions)"
    )
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=run)


def _read_input(path: str | None) -> str:
    from catalog.io.files import decode_text, read_text

    if path is None or path == "-":
        stdin = getattr(sys.stdin, "buffer", None)  # in-process callers may pass a text stream
        return decode_text(stdin.read(), "<stdin>") if stdin is not None else sys.stdin.read()
    return read_text(path, what="input file", hint="check the path, or pipe the input on stdin")


def _completions(text: str, path: str | None) -> list[str]:
    if path is None or not path.endswith(".jsonl"):
        return [text]
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as err:
            raise InputError(f"not JSON: {err}", path=path, row=n, hint="one JSON value per line") from err
        if isinstance(obj, dict):
            obj = obj.get("completion")
        if not isinstance(obj, str):
            raise InputError(
                "expected a string or an object with a 'completion' string",
                path=path,
                row=n,
                field="completion",
            )
        out.append(obj)
    return out


def run(args: argparse.Namespace) -> int:
    from catalog import GroundingSettings, Matcher, load_catalog, parse_line, parse_list

    asked = requested_grounding(args)
    if args.data is not None:
        from data_prep.dataset import choose_grounding, load_dataset

        if args.catalog_format is not None:
            raise InputError("--catalog-format goes with --catalog", field="--catalog-format")
        ds = load_dataset(args.data)
        choice = choose_grounding(ds, asked, by="command-line flags")
        print_notes(choice)
        catalog, settings = ds.catalog, choice.used
    else:
        catalog = load_catalog(args.catalog, format=args.catalog_format)
        settings = GroundingSettings().with_overrides(asked)
    matcher = Matcher(catalog, settings)
    text = _read_input(args.file)
    rows: list[dict] = []
    if args.lists:
        for i, completion in enumerate(_completions(text, args.file)):
            for line in parse_list(completion):
                rows.append(
                    {"list": i, "rank": line.rank, "start": line.start, "end": line.end, "input": line.text}
                    | {"parsed_title": line.title, "parsed_year": line.year}
                )
    else:
        for line in text.splitlines():
            title, year = parse_line(line)
            rows.append({"input": line, "parsed_title": title, "parsed_year": year})
    matches = matcher.ground_many([r["parsed_title"] for r in rows], [r["parsed_year"] for r in rows])
    out = sys.stdout
    if not args.json:
        out.write("input\titem_id\trule\tscore\n")
    for row, m in zip(rows, matches, strict=True):
        if args.json:
            obj = row | {"item_id": m.item_id, "title": m.title, "year": m.year, "rule": m.rule}
            obj |= {"score": round(m.score, 2), "detail": m.detail}
            out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        else:
            shown = "" if m.item_id is None else m.item_id
            out.write(f"{row['input']}\t{shown}\t{m.rule}\t{m.score:.1f}\n")
    return 0
