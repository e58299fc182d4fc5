"""The threads and pooled tables' column schemas and constants, what every reader returns
(:class:`Threads`), and how bad rows are reported (:class:`Report`, :func:`flag_rows`).

Bad input is reported through a :class:`Report`: by default the first bad row raises
``catalog.io.errors.InputError`` naming file, row and field; with ``skip=True`` (``--skip-bad-rows``) bad
rows are dropped and counted by reason, and the counts land in ``stats.json``. Checks are vectorised:
a boolean expression selects the bad rows, and only the first one is formatted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from catalog.io.errors import InputError

MESSAGE = pl.Struct({"role": pl.String, "content": pl.String})
MESSAGES = pl.List(MESSAGE)
IDS = pl.List(pl.String)

#: The threads frame (one row per responder mention). ``year`` may be null; ``split`` null = by hash.
THREADS_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "prompt": MESSAGES,
    "responder_id": pl.String(),
    "title": pl.String(),
    "year": pl.Int32(),
    "seen": IDS,
    "split": pl.String(),
}
#: Optional provenance columns of a threads frame.
PROVENANCE_SCHEMA: dict[str, pl.DataType] = {"file": pl.String(), "row": pl.UInt32()}
#: Optional data columns of a threads frame, kept when the input has them.
OPTIONAL_SCHEMA: dict[str, pl.DataType] = {"timestamp": pl.Datetime("us", "UTC")}

#: ``requests.parquet``: the pooled table of docs/architecture.md, in this column order.
REQUESTS_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "prompt": MESSAGES,
    "seen": IDS,
    "responders": pl.List(IDS),
    "n_responders": pl.UInt32(),
    "union": IDS,
    "counts": pl.List(pl.UInt32),
    "ungrounded": IDS,
    "split": pl.String(),
}

#: ``answers.parquet`` (optional; ProtoQA): each question's answers as its source file gives them, so that
#: evaluation can match a list against *its own* question's clusters as ProtoQA's evaluator does
#: (``eval.protoqa_match``): ``clusters`` in file order (``count``: the file's cluster count; ``answers``:
#: its strings as written) and ``raw`` (answer string -> respondents; empty when the file has none).
ANSWERS_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "clusters": pl.List(pl.Struct({"count": pl.UInt32(), "answers": pl.List(pl.String())})),
    "raw": pl.List(pl.Struct({"answer": pl.String(), "count": pl.UInt32()})),
}

#: ``responder_rows.parquet``: Rank-GRPO's rows, one per (request, responder), naming the request; the
#: request's own fields (prompt, seen, union, counts, every responder's list) stay in ``requests.parquet``
#: and are joined on ``request_id`` where the whole view is needed (``data_prep.pool.responder_view``).
#: Copying them onto every row made a request with n responders cost n x (n + union) list entries.
RESPONDER_ROWS_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "responder_id": pl.String(),
    "responder_index": pl.UInt32(),
    "items": IDS,
}

SPLITS = ("train", "valid", "test")
SPLIT_ALIASES = {"val": "valid", "validation": "valid", "dev": "valid", "training": "train", "eval": "test"}

#: Years outside this range are treated as garbage (a typo or a wrong column), not as data.
YEAR_MIN, YEAR_MAX = 1, 2100


@dataclass
class Threads:
    """What every reader returns: the threads frame, the source's own catalog (or None), and meta.

    ``meta`` holds at least ``source``, ``domain``, ``has_years`` and ``instruction_included``.
    ``answers`` (ProtoQA only, else None): one row per question in :data:`ANSWERS_SCHEMA`.
    """

    frame: pl.DataFrame
    catalog: Any  # catalog.Catalog or None (typed loosely: readers build it lazily)
    meta: dict[str, Any]
    answers: pl.DataFrame | None = None


@dataclass
class Report:
    """Collects what preparation skipped (with ``skip=True``) and what it noticed along the way.

    ``skipped`` counts dropped rows by reason; ``examples`` keeps the first message of each reason;
    ``notes`` holds counts that are not errors (e.g. mentions of seen items removed from the union).
    """

    skip: bool = False
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    notes: Counter = field(default_factory=Counter)

    def bad(self, error: InputError, *, reason: str, n: int = 1) -> None:
        """Raise ``error``, or (skip mode) count ``n`` bad rows under ``reason``."""
        if not self.skip:
            raise error
        self.skipped[reason] += n
        self.examples.setdefault(reason, str(error))

    def to_dict(self) -> dict[str, Any]:
        return {
            "skip_bad_rows": self.skip,
            "skipped": dict(sorted(self.skipped.items())),
            "skipped_examples": dict(sorted(self.examples.items())),
            "notes": dict(sorted(self.notes.items())),
        }


def flag_rows(
    df: pl.DataFrame,
    bad: pl.Expr,
    report: Report,
    *,
    reason: str,
    field: str | None,
    message: str,
    path: str | None = None,
    hint: str | None = None,
    show: str | None = None,
) -> pl.DataFrame:
    """Drop (or raise on) the rows of ``df`` where the boolean expression ``bad`` is true.

    The error names the first bad row through the ``file``/``row`` columns when present (else ``path``).
    ``message`` may contain ``{value}`` (repr) or ``{text}`` (str) of column ``show`` in the first bad
    row, and ``{n}``, the number of bad rows.
    """
    mask = df.select(bad.fill_null(False).alias("_bad"))["_bad"]
    n_bad = int(mask.sum())
    if n_bad == 0:
        return df
    first = df.filter(mask).row(0, named=True)
    value = first.get(show) if show else None
    where_file = first.get("file", path) or path
    error = InputError(
        message.format(value=_short(value), text=value, n=n_bad),
        path=where_file,
        row=first.get("row"),
        field=field,
        hint=hint,
    )
    report.bad(error, reason=reason, n=n_bad)
    return df.filter(~mask)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
