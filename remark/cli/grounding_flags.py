"""The four grounding flags shared by ``prep``, ``ground``, ``diagnose`` and ``eval``.

One name per field (``catalog.match.GroundingSettings``): ``--match-mode``, ``--year-tolerance``,
``--match-threshold``, ``--match-scorer``, with the same valid values as the API and the training config.
Every flag defaults to None, meaning "not asked for": commands that read a dataset then use the dataset's
settings (``meta.json["grounding"]``), ``prep`` and ``ground --catalog`` the defaults.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from catalog.io.errors import InputError
from remark.config.ranges import flag_type

# catalog.match's GroundingSettings fields, MATCH_MODES, SCORERS and defaults, spelled out so that
# `remark --help` imports no numpy / rapidfuzz (tests/remark/test_grounding_flags.py checks they agree).
NAMES = ("match_mode", "year_tolerance", "match_threshold", "match_scorer")
MATCH_MODES = ("exact", "normalized", "fuzzy")
SCORERS = ("ratio", "token_sort_ratio", "token_set_ratio", "WRatio", "partial_ratio")
DEFAULTS = {"match_mode": "fuzzy", "year_tolerance": 2, "match_threshold": 90, "match_scorer": "ratio"}
FLAGS = {name: "--" + name.replace("_", "-") for name in NAMES}


def add_grounding_flags(p: argparse.ArgumentParser, *, from_dataset: bool) -> None:
    """Add the four flags; ``from_dataset`` says their default is the dataset's value (else the defaults)."""
    where = "default: the dataset's (meta.json grounding)" if from_dataset else "default %s"
    g = p.add_argument_group(
        "grounding",
        "how titles are grounded to the catalog (the same four settings as the training config's fields)",
    )

    def default(name: str) -> str:
        return where if from_dataset else where % DEFAULTS[name]

    g.add_argument(
        FLAGS["match_mode"],
        choices=MATCH_MODES,
        default=None,
        help="exact = Rank-GRPO's verbatim (title, year) lookup; normalized = folded titles; fuzzy adds "
        f"subtitle and rapidfuzz rules ({default('match_mode')})",
    )
    g.add_argument(
        FLAGS["year_tolerance"],
        type=flag_type("--year-tolerance"),
        default=None,
        help=f"largest |year difference| that matches ({default('year_tolerance')})",
    )
    g.add_argument(
        FLAGS["match_threshold"],
        type=flag_type("--match-threshold"),
        default=None,
        help=f"fuzzy rule's minimum score in [0, 100] ({default('match_threshold')})",
    )
    g.add_argument(
        FLAGS["match_scorer"],
        choices=SCORERS,
        default=None,
        help=f"rapidfuzz scorer of the fuzzy rule ({default('match_scorer')})",
    )


def requested_grounding(args: argparse.Namespace) -> dict[str, Any]:
    """The grounding flags that were given (not None), checked; errors name the flag."""
    from catalog.match import GroundingSettings

    asked = {n: getattr(args, n, None) for n in NAMES}
    asked = {n: v for n, v in asked.items() if v is not None}
    try:
        GroundingSettings().with_overrides(asked)
    except InputError as err:
        raise InputError(err.message, field=FLAGS.get(err.field or "", err.field), hint=err.hint) from None
    from remark.config.effects import check_grounding_flags

    check_grounding_flags(asked, FLAGS)  # e.g. --match-threshold with --match-mode exact: no effect
    return asked


def print_notes(choice: Any, file: Any = None) -> None:
    """Print a ``data_prep.dataset.GroundingChoice``'s notes (fields that differ from the dataset's) on stderr."""
    for line in choice.notes():
        print(line, file=file or sys.stderr)
