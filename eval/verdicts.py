"""Verdicts on a paired difference A - B that survive another test: the figures beside the bootstrap
interval, and the one rule that calls a difference resolved (docs/metrics.md, "Verdicts").

A BCa interval over requests can exclude 0 while the percentile interval of the same resamples, a paired
randomization test and the per-request wins and losses do not, and a handful of requests can carry the
whole mean. So beside the interval of ``eval.bootstrap`` every comparison reports, from per-request
differences ``d_r = v^A_r - v^B_r`` (seed-averaged with several seeds: ``d_r = sum_s d_sr / S``) and the
view's request weights ``w_r`` (``eval.views.weights_for``: responder rows per responder, else 1; 0 =
excluded from the view):

- :func:`percentile_interval`: the percentile bootstrap of ``sum_r w_r d_r / sum_r w_r``, on the resamples
  of ``eval.bootstrap.paired_difference`` with the same config (the drawn request indices depend only on
  the number of requests, the resamples and the seed), so it differs from the BCa only by the method;
- :func:`sign_flip_test`: the paired sign-flip randomization test of that weighted mean (two-sided p);
- :func:`wins_ties_losses`: requests where A is ahead, level, behind;
- :func:`macro_mean`: the unweighted mean over requests, beside the weighted one (:func:`weighted_mean`);
- :func:`top_influence_share`: the share of the weighted mean carried by the five requests with the largest
  ``abs(w_r d_r)``;
- :func:`verdict`: the rule, and every figure above in one JSON-able dict.

Each figure is a small vectorised function of ``d`` and ``w`` (no tables, no I/O), listed in
:data:`FIGURES`; :func:`request_differences` builds ``d`` and ``w`` from per-request tables and
:func:`table_verdicts` gives the verdict of each metric of a comparison (``remark eval compare``).
Shapes: ``S`` seeds, ``R`` requests, ``M`` metrics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from eval.bootstrap import DEFAULT_CI, BootstrapConfig, Interval, paired_difference
from eval.seeds import same_requests, seed_spread_S
from eval.views import weights_for

#: Seeds per side below which :func:`verdict` gives no verdict (a t-interval over 2 seeds has 1 df).
MIN_SEEDS = 3
#: Requests counted by :func:`top_influence_share`.
TOP_K = 5
#: Exact enumeration of the sign flips while ``2^R'`` (R' requests with ``w_r d_r != 0``) is at most this;
#: above, ``n_resamples`` random flips.
EXACT_FLIPS = 2**16
#: Sign-flip rows per vectorised batch (``(batch, R)`` signs at a time).
_FLIP_CELLS = 2_000_000
#: The tie tolerance of :func:`verdict`: differences of seed-averaged per-request values that cancel
#: leave float noise of this order, far below any metric step (a recall step is ``1 / abs(T)``).
VERDICT_TIE_TOLERANCE = 1e-12

#: The figures beside the interval, by key of :func:`verdict`'s dict: what each one is.
FIGURES: dict[str, str] = {
    "weighted_mean": "sum_r w_r d_r / sum_r w_r (the view's mean difference)",
    "macro_mean": "sum_r d_r / R over the view's requests (each request weight 1)",
    "percentile": "percentile bootstrap over requests of the weighted mean, on the interval's resamples",
    "sign_flip": "two-sided paired sign-flip randomization test of the weighted mean: P(abs(T*) >= abs(T))",
    "wins": "requests with d_r > tolerance (A ahead); ties: abs(d_r) <= tolerance; losses: d_r < -tolerance",
    "top_influence_share": "sum of w_r d_r over the 5 requests of largest abs(w_r d_r) / sum_r w_r d_r",
}


def _dw(d_R: Any, w_R: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(d, w)`` as float64 ``(R,)``; requests of weight 0 get ``d = 0`` (they are outside the view)."""
    d = np.asarray(d_R, dtype=np.float64)
    w = np.broadcast_to(np.asarray(1.0 if w_R is None else w_R, dtype=np.float64), d.shape)
    if d.ndim != 1:
        raise ValueError(f"per-request differences must have shape (R,), got {d.shape}")
    if (w < 0).any() or not np.isfinite(w).all():
        raise ValueError("request weights must be finite and >= 0")
    d = np.where(w > 0, d, 0.0)
    if not np.isfinite(d).all():
        raise ValueError("a request with a weight has no finite difference")
    return d, w


def weighted_mean(d_R: Any, w_R: Any = None) -> float:
    """``sum_r w_r d_r / sum_r w_r`` (NaN when every weight is 0). Shapes: ``d_R``, ``w_R`` (R,).

    >>> weighted_mean([1.0, -1.0, 2.0], [1.0, 1.0, 2.0])
    1.0
    """
    d, w = _dw(d_R, w_R)
    return float((w * d).sum() / w.sum()) if w.sum() > 0 else float("nan")


def macro_mean(d_R: Any, w_R: Any = None) -> float:
    """The unweighted mean of ``d_r`` over the requests in the view (``w_r > 0``): every request counts
    once, however many responders it has (NaN when none is in the view). Shapes: (R,).

    >>> macro_mean([1.0, -1.0, 2.0], [1.0, 1.0, 2.0])
    0.6666666666666666
    """
    d, w = _dw(d_R, w_R)
    inside = w > 0
    return float(d[inside].mean()) if inside.any() else float("nan")


def wins_ties_losses(d_R: Any, w_R: Any = None, tol: float = 0.0) -> dict[str, int]:
    """Requests in the view (``w_r > 0``) where A is ahead (``d_r > tol``), level (``abs(d_r) <= tol``)
    and behind (``d_r < -tol``): ``{"wins", "ties", "losses"}``. Shapes: (R,).

    >>> wins_ties_losses([1.0, -1.0, 2.0, 0.0])
    {'wins': 2, 'ties': 1, 'losses': 1}
    """
    if tol < 0:
        raise ValueError("the tie tolerance must be >= 0")
    d, w = _dw(d_R, w_R)
    d = d[w > 0]
    return {
        "wins": int((d > tol).sum()),
        "ties": int((np.abs(d) <= tol).sum()),
        "losses": int((d < -tol).sum()),
    }


def top_influence_share(d_R: Any, w_R: Any = None, k: int = TOP_K) -> float:
    """The share of the weighted mean difference carried by the ``k`` requests with the largest
    ``abs(c_r)``, ``c_r = w_r d_r``: ``sum_{r in top k} c_r / sum_r c_r`` (ties of ``abs(c_r)`` by request
    order). With ``k`` or fewer requests it is 1. It exceeds 1 when the other requests pull the other way,
    is negative when the top ``k`` point against the mean, and is NaN when ``sum_r c_r = 0``. Shapes: (R,).

    >>> top_influence_share([1.0, -1.0, 2.0], [1.0, 1.0, 2.0], k=1)
    1.0
    >>> top_influence_share([3.0, -1.0, -1.0], k=1)
    3.0
    """
    d, w = _dw(d_R, w_R)
    c = w * d
    total = c.sum()
    if total == 0:
        return float("nan")
    top = np.argsort(-np.abs(c), kind="stable")[:k]
    return float(c[top].sum() / total)


def percentile_interval(d_RM: Any, w_RM: Any = None, config: BootstrapConfig = DEFAULT_CI) -> Interval:
    """Percentile bootstrap over requests of ``sum_r w_rm d_rm / sum_r w_rm`` for each of M metrics.

    ``eval.bootstrap.paired_difference(w d, w, 0, w)`` with ``config.method`` set to ``percentile``: the
    statistic of ``eval.bootstrap.compare`` (a difference of ratios with equal weights on both sides) on
    the same resampled request indices as its BCa for the same ``config`` (the indices depend on the
    number of requests, ``n_resamples`` and ``seed`` only), so the two intervals differ only by the method.
    Shapes: ``d_RM`` (R,) or (R, M); ``w_RM`` broadcast to it (None: weight 1). Returns
    ``eval.bootstrap.Interval`` of shape (M,).
    """
    d = np.asarray(d_RM, dtype=np.float64)
    w = np.broadcast_to(np.asarray(1.0 if w_RM is None else w_RM, dtype=np.float64), d.shape)
    d = np.where(w > 0, d, 0.0)
    return paired_difference(w * d, w, np.zeros_like(d), w, replace(config, method="percentile"))


def _signs(n: int, rows: np.ndarray) -> np.ndarray:
    """Sign rows ``(len(rows), n)`` of the integers ``rows``: bit j of row i set -> -1 in column j."""
    bits = (rows[:, None] >> np.arange(n, dtype=np.int64)[None, :]) & 1
    return 1.0 - 2.0 * bits


def sign_flip_test(d_R: Any, w_R: Any = None, *, n_resamples: int = 9999, seed: int = 0) -> dict[str, Any]:
    """Paired sign-flip randomization test of the weighted mean difference over requests.

    Statistic ``T = sum_r w_r d_r / sum_r w_r``. Under no difference, A's and B's lists of a request are
    exchangeable, so each ``d_r`` is as likely as ``-d_r``: ``T* = sum_r e_r w_r d_r / sum_r w_r`` with
    independent signs ``e_r = +-1``. Two-sided ``p = P(abs(T*) >= abs(T))`` (``abs(T)`` less a relative
    ``1e-12``, so float noise does not break ties). Requests with ``w_r d_r = 0`` do not move ``T*``; over
    the R' others, when ``2^R' <= max(n_resamples, EXACT_FLIPS)`` every sign vector is enumerated (exact
    p, as ``scipy.stats.permutation_test(permutation_type="samples")`` on one sample); else
    ``n_resamples`` random sign vectors (``numpy.random.default_rng(seed)``) and ``p = (1 + #{abs(T*) >=
    abs(T)}) / (1 + n_resamples)`` (the observed signs counted once, so p > 0). Shapes: (R,). Returns
    ``{"statistic", "p", "exact", "n_resamples", "seed", "alternative"}``; ``n_resamples`` is the number of
    sign vectors used (``2^R'`` when exact).

    >>> sign_flip_test([1.0, -1.0, 2.0], [1.0, 1.0, 2.0])["p"]  # |T*| >= 1 for 6 of the 8 sign vectors
    0.75
    """
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    d, w = _dw(d_R, w_R)
    out = {"statistic": float("nan"), "p": float("nan"), "exact": True, "n_resamples": 0, "seed": seed}
    out["alternative"] = "two-sided"
    if w.sum() == 0:
        return out
    c = (w * d)[w * d != 0] / w.sum()
    t = float(c.sum())
    out["statistic"] = t
    bar = abs(t) * (1 - 1e-12)
    n = c.size
    exact = n < 63 and 2**n <= max(n_resamples, EXACT_FLIPS)
    total = 2**n if exact else n_resamples
    batch = max(1, _FLIP_CELLS // max(n, 1))
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, total, batch):
        size = min(batch, total - start)
        if exact:
            signs = _signs(n, np.arange(start, start + size, dtype=np.int64))
        else:
            signs = 1.0 - 2.0 * rng.integers(0, 2, (size, n))
        extreme += int((np.abs(signs @ c) >= bar).sum())
    p = extreme / total if exact else (1 + extreme) / (1 + total)
    out.update(p=float(p), exact=bool(exact), n_resamples=int(total))
    return out


def request_differences(
    frames_a: Sequence[pl.DataFrame], frames_b: Sequence[pl.DataFrame], key: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per-request differences ``d_sr = v^A_sr - v^B_sr`` of metric ``key`` and its request weights, from
    S paired per-request tables (run s of A with run s of B), rows sorted by ``request_id``.

    ``w_r = eval.views.weights_for(table, key)``: the view's weights depend on the dataset, not on the
    lists, so every table must give the same ones (ValueError otherwise: the runs were scored on other
    data); requests of weight 0 get ``d = 0``. Returns ``d_SR`` (S, R) and ``w_R`` (R,).
    """
    if len(frames_a) != len(frames_b) or not frames_a:
        raise ValueError(f"{len(frames_a)} runs of A and {len(frames_b)} of B: pairing needs as many of each")
    frames = same_requests([*frames_a, *frames_b])
    w = weights_for(frames[0], key)
    for f in frames[1:]:
        if not np.array_equal(weights_for(f, key), w):
            raise ValueError(f"the runs give {key} different request weights: scored on different data")
    values = np.stack([f[key].fill_null(0.0).to_numpy().astype(np.float64) for f in frames])
    s = len(frames_a)
    return np.where(w > 0, values[:s] - values[s:], 0.0), w


def table_verdicts(
    frames_a: Sequence[pl.DataFrame],
    frames_b: Sequence[pl.DataFrame],
    keys: Sequence[str],
    config: BootstrapConfig = DEFAULT_CI,
    names: tuple[str, str] = ("A", "B"),
    requests: Mapping[str, Mapping[str, float]] | None = None,
    seed_diffs: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, dict[str, Any]]:
    """:func:`verdict` of each metric key from S paired per-request tables (:func:`request_differences`;
    each seed's aggregate difference is ``sum_r w_r d_sr / sum_r w_r``, the paired difference of
    ``eval.bootstrap.compare``): ``{key: verdict dict}``. Figures already computed and printed beside, so
    that the verdict reports the same numbers: ``requests``, ``{key: interval cell}`` over requests
    (:func:`verdict`'s ``requests``), and ``seed_diffs``, ``{key: the S pairs' differences}`` (its
    ``seed_diffs_S``, e.g. ``eval.seeds.seed_differences``' ``seeds["values"]``). The percentile intervals
    of the M keys come from one bootstrap (:func:`percentile_interval` of ``(R, M)``)."""
    keys = list(keys)
    if not keys:
        return {}
    parts = {key: request_differences(frames_a, frames_b, key) for key in keys}
    d_RM = np.stack([parts[k][0].mean(axis=0) for k in keys], axis=1)
    w_RM = np.stack([parts[k][1] for k in keys], axis=1)
    perc = percentile_interval(d_RM, w_RM, config)
    return {
        key: verdict(
            *parts[key],
            (seed_diffs or {}).get(key),
            config=config,
            names=names,
            requests=(requests or {}).get(key),
            percentile={"ci_low": float(perc.low[m]), "ci_high": float(perc.high[m])},
        )
        for m, key in enumerate(keys)
    }


def _side(low: float, high: float) -> int:
    """+1 / -1 when ``[low, high]`` lies above / below 0, else 0 (NaN: 0)."""
    return 1 if low > 0 else -1 if high < 0 else 0


def _pts(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:+.2f}"


def _iv(low: float, high: float) -> str:
    return "n/a" if math.isnan(low) else f"[{100 * low:+.2f}, {100 * high:+.2f}]"


def _p(p: float) -> str:
    return "n/a" if math.isnan(p) else f"{p:.3g}"


def verdict(
    d_SR: Any,
    w_R: Any = None,
    seed_diffs_S: Any = None,
    *,
    config: BootstrapConfig = DEFAULT_CI,
    names: tuple[str, str] = ("A", "B"),
    tie_tol: float = VERDICT_TIE_TOLERANCE,
    top: int = TOP_K,
    requests: Mapping[str, float] | None = None,
    percentile: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Whether A - B is resolved, with every figure behind it.

    **The rule.** A difference is *resolved* only with at least three seeds per side, when the Student
    t-interval over the seeds' differences (at ``config.confidence_level``) *and* the two-sided sign-flip
    randomization test over requests of the seed-averaged per-request differences (``p < 1 -
    confidence_level``, i.e. ``p < 0.05`` at 95%) both exclude no difference, in the direction of the mean
    over seeds; ``resolved`` is then +1 (A ahead) or -1 (B ahead), else 0 ("not resolved"). With fewer than
    three seeds every figure is reported and the verdict is "no verdict (n seeds < 3)" (``resolved`` None).
    The bootstrap intervals over requests (``config.method``, BCa by default, and the percentile one) are
    reported, not voted: they treat the requests as the only source of variation.

    Inputs: ``d_SR`` (S, R) per-request differences A - B per seed (or (R,) for one seed; requests of weight
    0 are ignored), ``w_R`` (R,) the view's request weights (None: 1 each), ``seed_diffs_S`` (S,) each seed's
    difference of the aggregate metric (None: ``sum_r w_r d_sr / sum_r w_r``, which it equals when the
    weights are the view's). Per-request figures use ``d_r = sum_s d_sr / S``. ``names`` label A and B in
    ``text``; figures in ``text`` are points (x100). Resamples and seed of both the bootstrap and the sign
    flips: ``config.n_resamples``, ``config.seed``. ``requests``: the caller's interval over requests of the
    same difference with ``config`` (a cell ``{"ci_low", "ci_high", ...}`` of ``eval.bootstrap.compare`` or
    ``eval.seeds.seed_differences``' ``requests``), reported as given; None computes it from ``d`` and ``w``.
    The two agree but for rounding, except that BCa can move where many resamples tie the estimate (its
    bias correction counts the resamples below the estimate, and ``sum(w vA)/sum(w) - sum(w vB)/sum(w)``
    and ``sum(w d)/sum(w)`` round differently): pass the interval you print. ``percentile``: the
    :func:`percentile_interval` of ``d_r`` already computed (``{"ci_low", "ci_high"}``; :func:`table_verdicts`
    bootstraps every metric at once), None computes it.

    Returns a JSON-able dict: ``n_seeds``, ``n_requests`` (requests in the view), ``mean`` (over seeds),
    ``weighted_mean``, ``macro_mean``, ``seeds`` (``eval.seeds.seed_spread_S``: ``values``, ``mean``,
    ``sd``, ``ci_low``, ``ci_high``, ...), ``requests`` (``{"method", "ci_low", "ci_high"}``: the bootstrap
    of ``config.method``), ``percentile`` (``{"ci_low", "ci_high"}``), ``sign_flip``
    (:func:`sign_flip_test`), ``alpha``, ``wins``, ``ties``, ``losses``, ``tie_tolerance``,
    ``top_influence`` (``{"k", "share"}``), ``resolved`` (+1, -1, 0 or None), ``verdict`` ("resolved", "not
    resolved" or "no verdict (n seeds < 3)") and ``text`` (one sentence).
    """
    d = np.asarray(d_SR, dtype=np.float64)
    d = d[None, :] if d.ndim == 1 else d
    if d.ndim != 2 or d.shape[0] < 1:
        raise ValueError(f"per-request differences must have shape (S, R), got {np.shape(d_SR)}")
    n_seeds, n_req = d.shape
    w = np.broadcast_to(np.asarray(1.0 if w_R is None else w_R, dtype=np.float64), (n_req,))
    d = np.where(w > 0, d, 0.0)
    if seed_diffs_S is None:
        seed_diffs = (d @ w) / w.sum() if w.sum() > 0 else np.full(n_seeds, np.nan)
    else:
        seed_diffs = np.asarray(seed_diffs_S, dtype=np.float64).reshape(-1)
        if seed_diffs.shape != (n_seeds,):
            raise ValueError(
                f"{seed_diffs.size} per-seed differences for {n_seeds} seeds of per-request ones"
            )
    d_r = d.mean(axis=0)
    level = config.confidence_level
    alpha = round(1 - level, 12)
    seeds = seed_spread_S(seed_diffs, level)
    if percentile is None:
        iv = percentile_interval(d_r, w, config)
        percentile = {"ci_low": float(iv.low[0]), "ci_high": float(iv.high[0])}
    if requests is None and config.method == "percentile":
        requests = percentile
    if requests is None:
        iv = paired_difference(w * d_r, w, 0 * w, w, config)
        requests = {"ci_low": float(iv.low[0]), "ci_high": float(iv.high[0])}
    flip = sign_flip_test(d_r, w, n_resamples=config.n_resamples, seed=config.seed)
    wtl = wins_ties_losses(d_r, w, tie_tol)
    mean = seeds["mean"]
    direction = 0 if math.isnan(mean) else int(np.sign(mean))
    seed_side = _side(seeds["ci_low"], seeds["ci_high"])
    flip_side = int(np.sign(flip["statistic"])) if flip["p"] < alpha else 0
    a, b = names
    if n_seeds < MIN_SEEDS:
        resolved, word = None, f"no verdict (n seeds < {MIN_SEEDS})"
    else:
        resolved = direction if direction and seed_side == direction and flip_side == direction else 0
        word = "resolved" if resolved else "not resolved"
    out: dict[str, Any] = {
        "n_seeds": n_seeds,
        "n_requests": int((w > 0).sum()),
        "mean": mean,
        "weighted_mean": weighted_mean(d_r, w),
        "macro_mean": macro_mean(d_r, w),
        "seeds": seeds,
        "requests": {
            "method": config.method,
            "ci_low": float(requests["ci_low"]),
            "ci_high": float(requests["ci_high"]),
        },
        "percentile": {"ci_low": float(percentile["ci_low"]), "ci_high": float(percentile["ci_high"])},
        "sign_flip": flip,
        "alpha": alpha,
        **wtl,
        "tie_tolerance": tie_tol,
        "top_influence": {"k": top, "share": top_influence_share(d_r, w, top)},
        "resolved": resolved,
        "verdict": word,
    }
    out["text"] = _text(out, a, b)
    return out


def _text(v: dict[str, Any], a: str, b: str) -> str:
    """One sentence: the verdict, the difference and the figures that decided it."""
    seeds, flip = v["seeds"], v["sign_flip"]
    n, alpha, n_req = v["n_seeds"], v["alpha"], v["n_requests"]
    head = f"{a} - {b} = {_pts(v['mean'])} points"
    t_part = f"the t-interval over {n} seeds {_iv(seeds['ci_low'], seeds['ci_high'])}"
    p = _p(flip["p"])
    if v["resolved"] is None:
        seeds_text = "1 seed" if n == 1 else f"{n} seeds"
        counts = f"{a} ahead on {v['wins']}, level on {v['ties']}, behind on {v['losses']}"
        return f"{v['verdict']}: {head} ({seeds_text}; sign-flip p = {p} over {n_req} requests; {counts})."
    if v["resolved"]:
        ahead = a if v["resolved"] > 0 else b
        return (
            f"resolved, {ahead} ahead: {head} ({t_part} excludes 0 and sign-flip p = {p} < {alpha:g} over "
            f"{n_req} requests)."
        )
    reasons = []
    if _side(seeds["ci_low"], seeds["ci_high"]) == 0:
        reasons.append(f"{t_part} contains 0")
    if not flip["p"] < alpha:
        reasons.append(f"sign-flip p = {p} >= {alpha:g} over {n_req} requests")
    if not reasons:
        reasons.append("the t-interval over seeds and the sign-flip statistic point in opposite directions")
    return f"not resolved: {head} ({' and '.join(reasons)})."
