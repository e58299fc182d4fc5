"""Time-based splits: requests dated by their rows' timestamps fall into named, inclusive periods.

A spec names each split's period, e.g. Rank-GRPO's Reddit-v2 split (train up to October 2022,
validation November 2022, test December 2022)::

    train=..2022-10,valid=2022-11,test=2022-12        (also spelled: reddit-v2)

A period is ``P`` (all of it), ``..P`` (up to the end of P), ``P..`` (from the start of P on) or ``P..Q``
(from the start of P to the end of Q), where P and Q are ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD`` in
UTC. ``..2022-10`` ends before 2022-11-01T00:00Z and ``2022-11`` is [2022-11-01, 2022-12-01). Periods
may not overlap; a gap between them is allowed.

How a request gets its split (:func:`assign_time_splits`, called by ``data_prep.pool.pool_threads``
when ``SplitSpec.by_time`` is set):

- a split given on the request's rows (or by ``train=PATH`` on the command line) is kept;
- otherwise the request's time is the earliest ``timestamp`` on its rows (Reddit rows carry the
  submission's or the comment's time; the earliest is the closest to the request), and the period
  holding it names the split;
- a request with neither a split nor a timestamp, or dated outside every period, is bad input: it
  raises, or with ``--skip-bad-rows`` is dropped and counted (``no_timestamp``, ``outside_time_splits``).
  Time splits never fall back to the hash: a silent mix of both would leak future requests into train.

Rank-GRPO ships its Reddit-v2 splits as three files already cut by time (its rows carry no timestamps);
pass those as ``train=...``, ``valid=...``, ``test=...`` inputs instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise

import polars as pl

from data_prep.schema import SPLITS, Report, flag_rows

#: Named specs.
PRESETS: dict[str, str] = {"reddit-v2": "train=..2022-10,valid=2022-11,test=2022-12"}
_POINT = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$")


def _period(text: str) -> tuple[datetime, datetime]:
    """``"2022-11"`` -> (2022-11-01, 2022-12-01), both UTC; the end is exclusive."""
    m = _POINT.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a date of the form YYYY, YYYY-MM or YYYY-MM-DD")
    y, mo, d = int(m[1]), int(m[2] or 1), int(m[3] or 1)
    try:
        start = datetime(y, mo, d, tzinfo=UTC)
    except ValueError as err:
        raise ValueError(f"{text!r} is not a date ({err})") from None
    if m[3]:
        end = datetime.fromordinal(start.toordinal() + 1).replace(tzinfo=UTC)
    elif m[2]:
        end = datetime(y + (mo == 12), mo % 12 + 1, 1, tzinfo=UTC)
    else:
        end = datetime(y + 1, 1, 1, tzinfo=UTC)
    return start, end


@dataclass(frozen=True)
class TimeRange:
    """One split's period ``[start, end)`` (None = unbounded), as written in the spec."""

    split: str
    start: datetime | None
    end: datetime | None
    text: str

    def contains(self, t: pl.Expr) -> pl.Expr:
        ok = pl.lit(True)
        if self.start is not None:
            ok = ok & (t >= pl.lit(self.start))
        if self.end is not None:
            ok = ok & (t < pl.lit(self.end))
        return ok


@dataclass(frozen=True)
class TimeSplit:
    """Named periods, one per split; build with :meth:`parse`."""

    ranges: tuple[TimeRange, ...]

    @property
    def spec(self) -> str:
        """The spec in canonical form (``train=..2022-10,valid=2022-11,test=2022-12``)."""
        return ",".join(f"{r.split}={r.text}" for r in self.ranges)

    @classmethod
    def parse(cls, text: str) -> TimeSplit:
        """Read a spec or a preset name; a ValueError says what is wrong."""
        text = PRESETS.get(text.strip(), text)
        ranges = []
        for part in text.split(","):
            name, sep, period = (x.strip() for x in part.partition("="))
            if not sep or not period:
                raise ValueError(f"cannot read {part.strip()!r}; write SPLIT=PERIOD, e.g. valid=2022-11")
            if name not in SPLITS:
                raise ValueError(f"unknown split {name!r}; use {', '.join(SPLITS)}")
            lo, dots, hi = period.partition("..")
            if not dots:
                lo = hi = period
            if not lo and not hi:
                raise ValueError(f"{part.strip()!r}: a period needs a start, an end or both")
            start = _period(lo)[0] if lo else None
            end = _period(hi)[1] if hi else None
            if start is not None and end is not None and start >= end:
                raise ValueError(f"{part.strip()!r}: the period ends before it starts")
            ranges.append(TimeRange(name, start, end, period.replace(" ", "")))
        names = [r.split for r in ranges]
        if len(set(names)) != len(names):
            raise ValueError(f"a split is named twice in {text!r}")
        ordered = sorted(ranges, key=_start)
        for a, b in pairwise(ordered):
            if a.end is None or a.end > _start(b):
                raise ValueError(f"periods {a.split}={a.text} and {b.split}={b.text} overlap")
        return cls(tuple(ranges))

    def split_of(self, t: pl.Expr) -> pl.Expr:
        """The split whose period holds ``t`` (a UTC Datetime expression); null when none does."""
        out = pl.lit(None, pl.String)
        for r in reversed(self.ranges):
            out = pl.when(r.contains(t)).then(pl.lit(r.split)).otherwise(out)
        return out


def _start(r: TimeRange) -> datetime:
    return r.start or datetime.min.replace(tzinfo=UTC)


def assign_time_splits(frame: pl.DataFrame, time_split: TimeSplit, report: Report) -> pl.DataFrame:
    """Fill the null ``split`` of a threads frame's requests from their earliest ``timestamp``.

    Requests that already have a split keep it; requests with no timestamp, or dated outside every
    period, are reported (raise, or skip and count). Returns the frame with ``split`` filled.
    """
    if "timestamp" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, pl.Datetime("us", "UTC")).alias("timestamp"))
    rid = "request_id"
    frame = frame.with_columns(
        pl.col("split").drop_nulls().first().over(rid).alias("_given"),
        pl.col("timestamp").min().over(rid).alias("_t"),
    ).with_columns(time_split.split_of(pl.col("_t")).alias("_by_time"))
    frame = flag_rows(
        frame,
        pl.col("_given").is_null() & pl.col("_t").is_null(),
        report,
        reason="no_timestamp",
        field="timestamp",
        message="request {value} has no split and no timestamp, and --split-by-time needs one of them",
        show=rid,
        hint="give its rows a timestamp or a split, or pass --skip-bad-rows to drop such requests",
    )
    dated = pl.format("{} (dated {})", pl.col(rid), pl.col("_t").dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
    frame = flag_rows(
        frame.with_columns(dated.alias("_dated")),
        pl.col("_given").is_null() & pl.col("_by_time").is_null(),
        report,
        reason="outside_time_splits",
        field="timestamp",
        message=f"request {{text}} falls in no period of --split-by-time {time_split.spec}",
        show="_dated",
        hint="widen a period (e.g. test=2022-12..), or pass --skip-bad-rows to drop such requests",
    )
    n_by_time = frame.filter(pl.col("_given").is_null()).select(pl.col(rid).n_unique()).item()
    report.notes["requests_split_by_time"] += int(n_by_time)
    return frame.with_columns(pl.coalesce("_given", "_by_time").alias("split")).drop(
        "_given", "_t", "_by_time", "_dated"
    )
