"""Grounding settings: the one object that says how titles are grounded (``catalog.match.Matcher``).

:class:`GroundingSettings` (``match_mode``, ``year_tolerance``, ``match_threshold``, ``match_scorer``) is
what ``remark prep`` writes into a dataset's ``meta.json["grounding"]`` and what the reward, the
validation and ``remark eval`` read back; the same four names are the CLI flags and the config fields.
``catalog.match`` re-exports everything here (``from catalog.match import GroundingSettings`` is the
documented import); the rules these settings select are described in ``catalog.match``.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from rapidfuzz import fuzz

from catalog.io.errors import InputError

__all__ = ["DEFAULT_SCORER", "DEFAULT_THRESHOLD", "MATCH_MODES", "SCORERS", "GroundingSettings"]

Mode = Literal["exact", "normalized", "fuzzy"]
MATCH_MODES: tuple[str, ...] = ("exact", "normalized", "fuzzy")
SCORERS = {
    "ratio": fuzz.ratio,
    "token_sort_ratio": fuzz.token_sort_ratio,
    "token_set_ratio": fuzz.token_set_ratio,
    "WRatio": fuzz.WRatio,
    "partial_ratio": fuzz.partial_ratio,
}
#: Chosen with bench/grounding.py (see bench/RESULTS.md, "Grounding").
DEFAULT_SCORER = "ratio"
DEFAULT_THRESHOLD = 90.0


def _grounding_problem(values: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """The first invalid grounding field in ``values`` as (field, message, hint); None when all are valid."""
    mode = values.get("match_mode", "fuzzy")
    if not isinstance(mode, str) or mode not in MATCH_MODES:
        return "match_mode", f"unknown match_mode {mode!r}", f"use one of {', '.join(MATCH_MODES)}"
    tol = values.get("year_tolerance", 0)
    if isinstance(tol, bool) or not isinstance(tol, numbers.Integral) or tol < 0:
        return "year_tolerance", f"year_tolerance={tol!r} is not an integer >= 0", "use 0 or more"
    thr = values.get("match_threshold", DEFAULT_THRESHOLD)
    if isinstance(thr, bool) or not isinstance(thr, numbers.Real) or not 0 <= thr <= 100:
        return "match_threshold", f"match_threshold={thr!r} is not a score in [0, 100]", "use 0 to 100"
    scorer = values.get("match_scorer", DEFAULT_SCORER)
    if not isinstance(scorer, str) or scorer not in SCORERS:
        return "match_scorer", f"unknown match_scorer {scorer!r}", f"use one of {', '.join(SCORERS)}"
    return None


@dataclass(frozen=True, slots=True)
class GroundingSettings:
    """How generated or mentioned titles are grounded; one name per field in the API, CLI and config.

    - ``match_mode``: ``exact`` (Rank-GRPO's verbatim lookup), ``normalized`` (rule 1 only) or ``fuzzy``;
    - ``year_tolerance``: the largest |year difference| that still matches (int >= 0; unused by ``exact``
      grounding; Rank-GRPO's reward slots, ``catalog.published``, use it for their year rule in any mode);
    - ``match_threshold``: the fuzzy rule's minimum score in [0, 100];
    - ``match_scorer``: the rapidfuzz scorer of the fuzzy rule (a key of ``SCORERS``).

    Invalid values raise ``InputError`` naming the field.
    """

    match_mode: Mode = "fuzzy"
    year_tolerance: int = 2
    match_threshold: float = DEFAULT_THRESHOLD
    match_scorer: str = DEFAULT_SCORER

    def __post_init__(self) -> None:
        problem = _grounding_problem(self.to_dict())
        if problem is not None:
            name, message, hint = problem
            raise InputError(message, field=name, hint=hint)
        object.__setattr__(self, "year_tolerance", int(self.year_tolerance))
        object.__setattr__(self, "match_threshold", float(self.match_threshold))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The field names, in order: ``match_mode, year_tolerance, match_threshold, match_scorer``."""
        return tuple(f.name for f in fields(cls))

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.names()}

    @classmethod
    def from_dict(cls, data: Any, *, path: str | None = None, prefix: str = "grounding") -> GroundingSettings:
        """Read a ``to_dict`` object (e.g. ``meta.json["grounding"]``); errors name ``path`` and the field.

        Every field must be there and no other: a record that lacks one says less than what grounded with it.
        """
        if not isinstance(data, Mapping):
            raise InputError(
                f"expected an object with {', '.join(cls.names())}, got {type(data).__name__}",
                path=path,
                field=prefix,
            )
        unknown = sorted(set(data) - set(cls.names()))
        if unknown:
            raise InputError(
                f"unknown key(s) {unknown}", path=path, field=prefix, hint=f"valid: {', '.join(cls.names())}"
            )
        missing = [n for n in cls.names() if n not in data]
        if missing:
            raise InputError(
                f"missing key(s) {missing}",
                path=path,
                field=f"{prefix}.{missing[0]}",
                hint="re-run remark prep",
            )
        problem = _grounding_problem(data)
        if problem is not None:
            name, message, hint = problem
            raise InputError(message, path=path, field=f"{prefix}.{name}", hint=hint)
        return cls(**dict(data))

    def with_overrides(self, overrides: Mapping[str, Any]) -> GroundingSettings:
        """A copy with the fields of ``overrides`` that are not None (unknown names are errors)."""
        unknown = sorted(set(overrides) - set(self.names()))
        if unknown:
            raise InputError(
                f"unknown grounding field(s) {unknown}", hint=f"valid: {', '.join(self.names())}"
            )
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def differences(self, other: GroundingSettings) -> dict[str, tuple[Any, Any]]:
        """``{field: (self's value, other's value)}`` for every field where the two differ."""
        return {
            n: (getattr(self, n), getattr(other, n))
            for n in self.names()
            if getattr(self, n) != getattr(other, n)
        }

    def describe(self) -> str:
        """``"match_mode=fuzzy, year_tolerance=2, match_threshold=90, match_scorer=ratio"``."""
        return ", ".join(
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.to_dict().items()
        )
