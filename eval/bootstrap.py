"""Bootstrap confidence intervals over requests (``scipy.stats.bootstrap``), and paired differences.

Every statistic we report is a smooth function of *column sums over requests*: a union mean is
``sum(v) / N``, a per-responder mean is the ratio of sums ``sum(n_rows * v) / sum(n_rows)`` (a request's
responders move together), a paired difference is a difference of two such ratios, and a point of a
validation curve or a steps-to-reach fraction is a function of per-step sums. So one core,
:func:`bootstrap_sums`, resamples request *indices* with scipy (percentile, basic or BCa, seeded) and
evaluates the statistic from the resampled column sums ``counts_BN @ columns_NC``: a bincount and one BLAS
matmul per batch, however many metrics (M) are bootstrapped together on the same resamples. Memory: the
batches are bounded, the bootstrap distribution is M x B floats; a B whose distribution would not fit
(:func:`bootstrap_memory`, ``catalog.io.memory``) is refused before resampling.

Rank-GRPO reports no CIs; this module is new. Degenerate cases: when a statistic's bootstrap distribution
is constant (e.g. every request scores 0), BCa is undefined and the interval is set to the point
(``[x, x]``); with fewer than 2 requests no interval exists and NaN is returned.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl
from scipy import stats

from eval.views import split_key, weights_for

Method = Literal["bca", "percentile", "basic"]
METHODS: tuple[Method, ...] = ("bca", "percentile", "basic")
#: Resamples are processed in batches of about this many counts: small batches stay in cache when there
#: are few columns; with many columns a bigger matmul amortises BLAS threading (a thin product's threads
#: cost more than its arithmetic on a busy machine: bench/RESULTS.md).
_BATCH_CELLS_FEW, _BATCH_CELLS_MANY = 250_000, 2_000_000
#: bytes per (statistic, resample) at the peak of ``scipy.stats.bootstrap``: the bootstrap distribution
#: (float64), its batches before they are joined and the percentiles' sorted copy (measured 2.2 to 2.8
#: times 8 bytes for 2 to 40 statistics and 0.5 to 1 million resamples, BCa and percentile)
BYTES_PER_DRAW = 32
#: the resampled counts of one batch (``_BATCH_CELLS_MANY`` float64 cells and their indices), and slack
BOOTSTRAP_BASE_BYTES = 64_000_000


@dataclass(frozen=True)
class BootstrapConfig:
    """How intervals are computed."""

    method: Method = "bca"
    """``bca`` (default; bias-corrected and accelerated), ``percentile`` or ``basic`` (scipy's names)."""
    n_resamples: int = 9999
    """Bootstrap resamples of the requests (scipy's default)."""
    confidence_level: float = 0.95
    """Two-sided coverage of each interval."""
    seed: int = 0
    """Seed of the resampling (``numpy.random.default_rng(seed)``): same seed, same intervals."""
    batch: int | None = None
    """Resamples per vectorised batch; None picks one (see ``_BATCH_CELLS_FEW``)."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"bootstrap method {self.method!r} unknown; valid: {', '.join(METHODS)}")
        if self.n_resamples < 1:
            raise ValueError("n_resamples must be >= 1")
        if not 0 < self.confidence_level < 1:
            raise ValueError("confidence_level must be in (0, 1), e.g. 0.95")

    def as_dict(self) -> dict[str, object]:
        return {
            "method": self.method,
            "n_resamples": self.n_resamples,
            "confidence_level": self.confidence_level,
            "seed": self.seed,
            "unit": "request",
        }


#: the default: BCa, 9999 resamples, 95%, seed 0.
DEFAULT_CI = BootstrapConfig()


@dataclass
class Interval:
    """Point estimates and intervals, each of shape ``(M,)``."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    standard_error: np.ndarray


def counts_from_indices(idx: np.ndarray, n: int) -> np.ndarray:
    """Resampled indices ``(B, n')`` (or ``(n',)``) -> multiplicities ``(B, n)`` float64 (or ``(n,)``)."""
    idx = np.asarray(idx)
    flat = idx.reshape(-1, idx.shape[-1]) if idx.ndim else idx.reshape(1, 1)
    b = flat.shape[0]
    offsets = (np.arange(b, dtype=np.int64) * n)[:, None]
    counts = np.bincount((flat + offsets).ravel(), minlength=b * n).reshape(b, n)
    return counts.reshape(*idx.shape[:-1], n).astype(np.float64)


def bootstrap_memory(n_statistics: int, n_resamples: int) -> int:
    """Peak bytes of :func:`bootstrap_sums` for M statistics and B resamples:
    ``BYTES_PER_DRAW x M x B + BOOTSTRAP_BASE_BYTES`` (the batches of counts are bounded by design)."""
    return BYTES_PER_DRAW * n_statistics * n_resamples + BOOTSTRAP_BASE_BYTES


def bootstrap_sums(
    columns_NC: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    config: BootstrapConfig = DEFAULT_CI,
) -> Interval:
    """Bootstrap, over the N rows, a statistic of column sums.

    ``columns_NC``: one row per request, C columns. ``statistic(sums_BC) -> (B, M)`` maps column sums
    (``sums_BC = counts_BN @ columns_NC`` for resample multiplicities ``counts``) to M statistics; it must
    be vectorised over the leading axis. Returns the estimate on the data (counts all 1) and the interval.
    """
    cols = np.asarray(columns_NC, dtype=np.float64)
    if cols.ndim != 2:
        raise ValueError(f"columns_NC must be 2-D (N requests, C columns), got shape {cols.shape}")
    n = cols.shape[0]
    estimate = np.asarray(statistic(cols.sum(0, keepdims=True)), dtype=np.float64)[0]
    from catalog.io.memory import check_fits

    check_fits(
        bootstrap_memory(estimate.size, config.n_resamples),
        what=f"a bootstrap of {config.n_resamples} resamples x {estimate.size} statistics",
        field="--resamples",
        hint="lower --resamples (the default is 9999)",
    )
    if n < 2:
        nan = np.full_like(estimate, np.nan)
        return Interval(estimate, nan, nan.copy(), nan.copy())

    def stat(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        counts = counts_from_indices(idx, n)  # (..., n)
        lead = counts.shape[:-1]
        out = np.asarray(statistic(counts.reshape(-1, n) @ cols), dtype=np.float64)  # (b, M)
        return np.moveaxis(out.reshape(*lead, out.shape[-1]), -1, 0)  # (M, ...): resamples last

    cells = _BATCH_CELLS_FEW if cols.shape[1] <= 8 else _BATCH_CELLS_MANY
    batch = config.batch or max(1, min(config.n_resamples, cells // n))
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.bootstrap(
            (np.arange(n),),
            stat,
            n_resamples=config.n_resamples,
            batch=batch,
            vectorized=True,
            confidence_level=config.confidence_level,
            method=config.method,
            rng=np.random.default_rng(config.seed),
        )
    low = np.atleast_1d(np.asarray(res.confidence_interval.low, dtype=np.float64))
    high = np.atleast_1d(np.asarray(res.confidence_interval.high, dtype=np.float64))
    dist = res.bootstrap_distribution
    constant = np.nanmax(dist, axis=-1) == np.nanmin(dist, axis=-1)
    low = np.where(constant, estimate, low)
    high = np.where(constant, estimate, high)
    se = np.atleast_1d(np.asarray(res.standard_error, dtype=np.float64))
    return Interval(estimate, low, high, se)


def _as_2d(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x[:, None] if x.ndim == 1 else x


def ratio_of_sums(num_NM: np.ndarray, den_NM: np.ndarray, config: BootstrapConfig = DEFAULT_CI) -> Interval:
    """CIs of ``sum_i num[i, m] / sum_i den[i, m]`` for each of M statistics, resampling rows together."""
    num = _as_2d(num_NM)
    den = np.broadcast_to(_as_2d(den_NM), num.shape)
    m = num.shape[1]
    cols = np.concatenate([num, den], axis=1)
    return bootstrap_sums(cols, lambda s: s[:, :m] / s[:, m:], config)


def paired_difference(
    num_a: np.ndarray,
    den_a: np.ndarray,
    num_b: np.ndarray,
    den_b: np.ndarray,
    config: BootstrapConfig = DEFAULT_CI,
) -> Interval:
    """CIs of ``ratio_A - ratio_B`` (shapes ``(N, M)``), both resampled on the *same* request indices."""
    parts = [_as_2d(x) for x in (num_a, den_a, num_b, den_b)]
    m = parts[0].shape[1]
    cols = np.concatenate([np.broadcast_to(p, parts[0].shape) for p in parts], axis=1)
    return bootstrap_sums(
        cols, lambda s: s[:, :m] / s[:, m : 2 * m] - s[:, 2 * m : 3 * m] / s[:, 3 * m :], config
    )


def _num_den(per_request: pl.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    w = np.stack([weights_for(per_request, k) for k in keys], axis=1)
    v = np.stack([per_request[k].fill_null(0.0).to_numpy().astype(np.float64) for k in keys], axis=1)
    return w * v, w


def _as_table(keys: Sequence[str], iv: Interval) -> dict[str, dict[str, float]]:
    return {
        k: {"mean": float(iv.estimate[i]), "ci_low": float(iv.low[i]), "ci_high": float(iv.high[i])}
        for i, k in enumerate(keys)
    }


def intervals(
    per_request: pl.DataFrame, keys: Sequence[str], config: BootstrapConfig = DEFAULT_CI
) -> dict[str, dict[str, float]]:
    """``{key: {"mean", "ci_low", "ci_high"}}`` for metric columns of a per-request table (one bootstrap)."""
    keys = list(keys)
    for k in keys:
        split_key(k)
    num, den = _num_den(per_request, keys)
    return _as_table(keys, ratio_of_sums(num, den, config))


def compare(
    a: pl.DataFrame, b: pl.DataFrame, keys: Sequence[str], config: BootstrapConfig = DEFAULT_CI
) -> dict[str, dict[str, float]]:
    """Paired differences A - B on the same requests: ``{key: {"mean", "ci_low", "ci_high"}}``.

    Both tables must hold exactly the same ``request_id`` set (no silent subset); rows are aligned by id.
    """
    ids_a, ids_b = set(a["request_id"].to_list()), set(b["request_id"].to_list())
    if ids_a != ids_b:
        raise ValueError(
            f"the two runs were scored on different requests: {len(ids_a - ids_b)} only in A, "
            f"{len(ids_b - ids_a)} only in B; score both on the same split"
        )
    b = a.select("request_id").join(b, on="request_id", how="left", maintain_order="left")
    keys = list(keys)
    na, da = _num_den(a, keys)
    nb, db = _num_den(b, keys)
    return _as_table(keys, paired_difference(na, da, nb, db, config))
