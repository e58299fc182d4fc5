"""``remark recipes``: the GRPO-family recipes shipped in ``configs/recipes``, one line each.

Examples::

    remark recipes                 # name and one-line description of every recipe
    remark recipes dapo            # what the recipe sets, and its source
    remark recipes --json          # all of it, machine-readable
    remark train --recipe dapo --config configs/recipes/runs/tiny_cpu.yaml

A recipe sets the loss family only; the run config (model, data, reward scheme, batch) goes on top.
See docs/recipes.md.
"""

from __future__ import annotations

import argparse
import json


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "recipes",
        help="list the GRPO-family recipes (DAPO, CISPO, GSPO, ScaleRL, Olmo 3, ...)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", nargs="?", help="show one recipe's fields and source")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from remark.recipes import list_recipes, load_recipe

    recipes = [load_recipe(args.name)] if args.name else list_recipes()
    if args.json:
        data = [r.as_dict() for r in recipes]
        print(json.dumps(data[0] if args.name else data, indent=2))
        return 0
    if args.name:
        (r,) = recipes
        print(f"{r.name}: {r.description}")
        print(f"source: {r.source}")
        print(f"file: {r.path}")
        width = max(len(k) for k in r.fields)
        for key, value in r.fields.items():
            print(f"  {key:<{width}}  {value}")
        return 0
    width = max(len(r.name) for r in recipes)
    for r in recipes:
        print(f"{r.name:<{width}}  {r.description}")
    return 0
