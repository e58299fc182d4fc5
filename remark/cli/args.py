"""Argument types shared by the subcommands: a bad number is refused by argparse (exit 2, usage line,
the flag named), not found later as a traceback deep in a library (``diagnose --batch-size 0`` was a
ZeroDivisionError, ``eval run --temperature 0`` a sampling error after the model had loaded).

Plain ranges: ``positive_int``, ``nonneg_int``, ``positive_float``, ``probability``, ``open_unit``. The
ranking cut-off ``--k`` of ``remark eval`` has its own one check, ``remark.cli.eval.cutoff`` (1 to MAX_K).
"""

from __future__ import annotations

import argparse
import math


def _number(text: str, kind: type) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not {'an integer' if kind is int else 'a number'}"
        ) from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: use an integer of 1 or more")
    return value


def nonneg_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use an integer of 0 or more")
    return value


def positive_float(text: str) -> float:
    value = _number(text, float)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use a number > 0")
    return value


def probability(text: str) -> float:
    """A number in [0, 1]."""
    value = _number(text, float)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: use a number from 0 to 1")
    return value


def open_unit(text: str) -> float:
    """A number in (0, 1] (a nucleus mass, a fraction that cannot be 0)."""
    value = _number(text, float)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: use a number > 0 and <= 1")
    return value
