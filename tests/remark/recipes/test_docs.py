"""docs/recipes.md: its table names every shipped recipe once, and each "how to run" command parses
with the real CLI and composes into a valid config (what a user copying it would run)."""

from __future__ import annotations

import shlex
from pathlib import Path

from remark.cli.main import build_parser
from remark.cli.train import parse_overrides
from remark.config import compose_config
from remark.recipes import recipe_names

REPO = Path(__file__).resolve().parents[3]


def table_rows():
    rows = []
    for line in (REPO / "docs" / "recipes.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[3].startswith("`remark train"):
            rows.append((cells[0].strip("`"), cells[3].strip("`")))
    return rows


def test_the_recipe_table_runs_every_recipe(monkeypatch):
    rows = table_rows()
    assert [name for name, _ in rows] == sorted(recipe_names(), key=[n for n, _ in rows].index)
    assert sorted(name for name, _ in rows) == recipe_names()
    monkeypatch.chdir(REPO)
    parser = build_parser()
    for name, command in rows:
        args = parser.parse_args(shlex.split(command)[1:])
        assert args.recipe == name and args.config.is_file()
        cfg = compose_config(args.recipe, args.config, parse_overrides(args.set)).config
        assert cfg.recipe == name and cfg.build_tiny is not None
