"""The ranking metrics: one registered entry each (name, formula, note, per-row value, whether training
validation logs it), in the order every report lists them.

The command line's ``--metrics`` choices, the report tables' order, the trainer's validation metrics,
``eval.metrics.metrics_at_k`` and the table in docs/metrics.md ("The metrics") all read
:data:`METRIC_REGISTRY`, so a new metric is one :class:`Metric` here (and its test). This module imports
no numpy: ``remark --help`` reads it.

Notation of the formulas (docs/metrics.md): for one scored row with target set ``T`` (``abs(T) > 0``)
and the first ``k`` counted slots, ``hit_j = 1[counted slot j is eligible and its item is in T]``,
``c_k = sum_{j <= k} hit_j``, ``f`` the rank of the first ``j`` with ``hit_j = 1`` and
``d_j = 1 / log2(j + 1)`` (``d_1 = 1``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CutCounts:
    """A batch of rows at one cut-off ``k``: numpy arrays of shape ``(R,)`` (float64) and ``k``.

    ``hits`` = ``c_k``; ``n_targets`` = ``abs(T)`` (1 where ``T`` is empty: those rows are set to NaN
    afterwards); ``first`` = ``f - 1``, the 0-based index of the first hit (0 when there is none);
    ``dcg`` = ``sum_{j<=k} hit_j d_j``; ``idcg`` = ``sum_{j <= min(abs(T), k)} d_j``.
    """

    k: int
    hits: Any
    n_targets: Any
    first: Any
    dcg: Any
    idcg: Any


@dataclass(frozen=True)
class Metric:
    """One metric at ``k``: ``formula`` and ``note`` as docs/metrics.md prints them, ``value(counts)`` the
    per-row values ``(R,)`` from :class:`CutCounts` (arithmetic only), ``validated`` whether the trainer's
    validation logs it."""

    name: str
    formula: str
    note: str
    value: Callable[[CutCounts], Any]
    validated: bool = False


#: Every metric, in report order.
METRIC_REGISTRY: tuple[Metric, ...] = (
    Metric(
        "recall",
        "c_k / abs(T)",
        "denominator `abs(T)`, not `min(k, abs(T))`: with `abs(T) > k` a perfect list scores `k / abs(T)`",
        lambda c: c.hits / c.n_targets,
        validated=True,
    ),
    Metric(
        "ndcg",
        "sum_{j<=k} hit_j d_j / sum_{j <= min(abs(T), k)} d_j",
        "`d_1 = 1`, `d_j = 1 / log2(j + 1)`",
        lambda c: c.dcg / c.idcg,
        validated=True,
    ),
    Metric(
        "precision",
        "c_k / k",
        "`k` even when the list is shorter than `k`",
        lambda c: c.hits / c.k,
    ),
    Metric(
        "hit",
        "1[c_k > 0]",
        "at least one target in the top k",
        lambda c: (c.hits > 0) * 1.0,
    ),
    Metric(
        "mrr",
        "1 / f if f <= k, else 0",
        "the first target found; later ones do not add",
        lambda c: (c.hits > 0) / (c.first + 1.0),
    ),
)
_BY_NAME = {m.name: m for m in METRIC_REGISTRY}
#: The metric names, in report order.
METRICS: tuple[str, ...] = tuple(_BY_NAME)
#: The metrics the trainer's validation logs.
VALIDATION_METRICS: tuple[str, ...] = tuple(m.name for m in METRIC_REGISTRY if m.validated)


def metric(name: str) -> Metric:
    """The registered :class:`Metric` called ``name`` (``ValueError`` listing the valid names)."""
    if name not in _BY_NAME:
        raise ValueError(f"unknown metric {name!r}; valid: {', '.join(METRICS)}")
    return _BY_NAME[name]


def metric_rank(name: str) -> int:
    """Position of ``name`` in report order; an unregistered name sorts after every registered one."""
    return METRICS.index(name) if name in _BY_NAME else len(METRICS)


def validation_ks(k: int) -> tuple[int, ...]:
    """The cut-offs validation logs for lists of K items: 5, 10 and 20 where <= K, and K itself."""
    return tuple(sorted({c for c in (5, 10, 20) if c <= k} | {k}))


def metrics_table_markdown() -> str:
    """docs/metrics.md's table of the metrics (one row per entry, in report order)."""
    rows = ["| metric | formula | notes |", "|---|---|---|"]
    rows += [f"| `{m.name}@k` | `{m.formula}` | {m.note} |" for m in METRIC_REGISTRY]
    return "\n".join(rows)
