"""Readers for the planning tools' inputs: training eval logs, per-request pass rates, cost profiles.

The formats are the cross-package contracts in ``docs/architecture.md``:

- **Training eval log** ``<run_dir>/eval_log.jsonl``: one JSON object per validation with ``step``,
  ``samples``, ``gpu_hours``, ``wall_s`` and ``eval/<metric>@<k>/<view>`` keys.
- **Pass rates**: parquet or JSON lines with ``request_id`` (str), ``pass_rate`` in [0, 1], optional
  ``n_samples`` (positive int).
- **Cost profile**: JSON ``{"device", "model", "points": [{"G", "peak_mem_gb", "step_s", ...}]}``.

Every problem is an :class:`InputError` naming the file, the 1-based line (or row) and the field.
Nothing here fits anything: the pure math lives in :mod:`.curves` and :mod:`.group_size`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from catalog.io.errors import InputError
from catalog.io.files import iter_jsonl, read_json

#: ``--x`` choice -> key in the eval log.
X_KEYS = {"steps": "step", "samples": "samples", "gpu_hours": "gpu_hours"}
DEFAULT_METRIC = "eval/recall@20/union"
EVAL_LOG_NAME = "eval_log.jsonl"


def resolve_log_path(path: str | Path) -> Path:
    """A run directory (-> its ``eval_log.jsonl``) or the log file itself."""
    p = Path(path)
    if p.is_dir():
        p = p / EVAL_LOG_NAME
    if not p.is_file():
        raise InputError(
            "no training eval log here",
            path=p,
            hint=f"pass a run directory holding {EVAL_LOG_NAME} or the file",
        )
    return p


def _read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """Non-blank lines of a JSON-lines file as (1-based line number, object)."""
    return list(iter_jsonl(path))


def _number(value, *, path, row, field) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"{value!r} is not a finite number", path=path, row=row, field=field)
    return float(value)


@dataclass(frozen=True)
class Series:
    """(compute, score) points read from one eval log, with the log lines they came from."""

    path: Path
    x: str
    metric: str
    c: np.ndarray
    r: np.ndarray
    lines: list[int]


def read_eval_log(
    path: str | Path, *, x: str = "steps", metric: str = DEFAULT_METRIC, min_x: float | None = None
) -> Series:
    """Read one metric against one compute axis from a training eval log, validated for a curve fit.

    ``x`` is ``steps``, ``samples`` or ``gpu_hours``; ``metric`` a key such as ``eval/recall@20/union``
    (``recall@20/union`` is accepted too). Points with compute < ``min_x`` are dropped (ScaleRL starts
    fits after the first stretch of training). Errors name the line and field: a missing key (listing the
    keys the log has), a non-number, compute that does not increase, a score outside [0, 1], fewer than 3
    points.
    """
    p = resolve_log_path(path)
    if x not in X_KEYS:
        raise InputError(f"unknown compute axis {x!r}", field="x", hint=f"use one of {sorted(X_KEYS)}")
    x_key = X_KEYS[x]
    rows = _read_jsonl(p)
    if not rows:
        raise InputError("the eval log is empty", path=p, hint="run at least 3 validations before fitting")
    keys = sorted({k for _, obj in rows for k in obj if k.startswith("eval/")})
    if metric not in keys and f"eval/{metric}" in keys:
        metric = f"eval/{metric}"
    c, r, lines = [], [], []
    for lineno, obj in rows:
        for key in (x_key, metric):
            if key not in obj:
                hint = f"metrics in this log: {', '.join(keys) or 'none'}" if key == metric else None
                raise InputError(f"missing key {key!r}", path=p, row=lineno, field=key, hint=hint)
        cx = _number(obj[x_key], path=p, row=lineno, field=x_key)
        if min_x is not None and cx < min_x:
            continue
        c.append(cx)
        r.append(_number(obj[metric], path=p, row=lineno, field=metric))
        lines.append(lineno)
    if len(c) < 3:
        raise InputError(
            f"a curve fit needs at least 3 validations, the log has {len(c)}"
            + (f" with {x_key} >= {min_x:g}" if min_x is not None else ""),
            path=p,
            field=metric,
            hint="validate more often or wait for more steps",
        )
    for i in range(1, len(c)):
        if c[i] <= c[i - 1]:
            raise InputError(
                f"compute is not increasing: {x_key} = {c[i]:g} after {c[i - 1]:g} (line {lines[i - 1]})",
                path=p,
                row=lines[i],
                field=x_key,
                hint="a resumed run may log a step twice: keep one line per step, in order",
            )
    for ci, ri, lineno in zip(c, r, lines):
        if not 0.0 <= ri <= 1.0:
            raise InputError(
                f"score {ri:g} is outside [0, 1]",
                path=p,
                row=lineno,
                field=metric,
                hint="curves are fitted to rates in [0, 1]; a percentage must be divided by 100",
            )
        if ci < 0:
            raise InputError(f"compute {ci:g} is negative", path=p, row=lineno, field=x_key)
    return Series(path=p, x=x, metric=metric, c=np.array(c), r=np.array(r), lines=lines)


@dataclass(frozen=True)
class PassRates:
    """Per-request pass rates: ``request_id`` (n,), ``pass_rate`` (n,) in [0, 1], ``n_samples`` (n,) or None."""

    request_id: list[str]
    pass_rate: np.ndarray
    n_samples: np.ndarray | None


def read_pass_rates(path: str | Path) -> PassRates:
    """Read the "Pass rates" contract from parquet (``.parquet``), CSV (``.csv``) or JSON lines (anything else).

    Rows must have a string ``request_id`` (unique), ``pass_rate`` in [0, 1] and, when the column is
    present, a positive integer ``n_samples`` on every row.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(
            "pass-rates file not found", path=p, hint="write it with remark diagnose --pass-rates-out"
        )
    if p.suffix in (".parquet", ".csv"):
        import polars as pl

        from catalog.io.files import read_table

        try:
            df = (
                read_table(p, format="parquet")
                if p.suffix == ".parquet"
                else pl.read_csv(p, schema_overrides={"request_id": pl.String})
            )
        except Exception as err:  # polars raises several types for a broken file
            raise InputError(f"cannot read {p.suffix[1:]}: {err}", path=p) from None
        rows = list(enumerate(df.to_dicts(), start=1))
    else:
        rows = _read_jsonl(p)
    if not rows:
        raise InputError("no pass rates in the file", path=p)
    has_n = "n_samples" in rows[0][1]
    ids, rates, ns, seen = [], [], [], {}
    for row, obj in rows:
        rid = obj.get("request_id")
        if not isinstance(rid, str) or not rid:
            raise InputError(
                f"request_id must be a non-empty string, got {rid!r}", path=p, row=row, field="request_id"
            )
        if rid in seen:
            raise InputError(
                f"request_id {rid!r} repeats row {seen[rid]}",
                path=p,
                row=row,
                field="request_id",
                hint="one pass rate per request: merge repeated measurements first",
            )
        seen[rid] = row
        if "pass_rate" not in obj:
            raise InputError("missing pass_rate", path=p, row=row, field="pass_rate")
        rate = _number(obj["pass_rate"], path=p, row=row, field="pass_rate")
        if not 0.0 <= rate <= 1.0:
            raise InputError(f"pass_rate {rate:g} is outside [0, 1]", path=p, row=row, field="pass_rate")
        if has_n:
            n = obj.get("n_samples")
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise InputError(
                    f"n_samples must be a positive integer on every row, got {n!r}",
                    path=p,
                    row=row,
                    field="n_samples",
                )
            ns.append(n)
        ids.append(rid)
        rates.append(rate)
    return PassRates(ids, np.array(rates), np.array(ns) if has_n else None)


def read_profile(path: str | Path) -> list[dict]:
    """Read the "Cost profile" contract: -> its points, each with float ``G``, ``peak_mem_gb``, ``step_s``.

    Needs at least 2 points with at least 2 distinct G (a line has two parameters), G a positive integer,
    memory >= 0 and step time > 0. Other keys (``tokens_per_s``, ``gen_s``, ...) are kept as given.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError("cost profile not found", path=p, hint="write one with bench/gpu_check.py")
    doc = read_json(
        p,
        schema={"points": list},
        optional={"device": (str, None), "model": (str, None)},
        what="cost profile",
        hint='expected {"device", "model", "points": [{"G", "peak_mem_gb", "step_s"}, ...]}',
    )
    points = doc["points"]
    if len(points) < 2:
        raise InputError(
            f"a cost model needs at least 2 profile points, got {len(points)}",
            path=p,
            field="points",
            hint="profile at least two group sizes (e.g. G = 4 and G = 16)",
        )
    out = []
    for i, pt in enumerate(points, start=1):
        where = f"points[{i - 1}]"
        if not isinstance(pt, dict):
            raise InputError("each point must be an object", path=p, field=where)
        for key in ("G", "peak_mem_gb", "step_s"):
            if key not in pt:
                raise InputError(f"missing {key!r}", path=p, field=f"{where}.{key}")
        g = pt["G"]
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            raise InputError(f"G must be a positive integer, got {g!r}", path=p, field=f"{where}.G")
        mem = _number(pt["peak_mem_gb"], path=p, row=None, field=f"{where}.peak_mem_gb")
        step = _number(pt["step_s"], path=p, row=None, field=f"{where}.step_s")
        if mem < 0 or step <= 0:
            raise InputError(
                f"need peak_mem_gb >= 0 and step_s > 0, got {mem:g} and {step:g}", path=p, field=where
            )
        out.append(pt | {"G": float(g), "peak_mem_gb": mem, "step_s": step})
    if len({pt["G"] for pt in out}) < 2:
        raise InputError(
            "all profile points have the same G", path=p, field="points", hint="profile two or more G"
        )
    return out
