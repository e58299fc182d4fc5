"""Across training runs (seeds): the spread of per-seed results, and request-bootstrap intervals of the
seed average.

Two different questions, two intervals (reports say which is which):

- **What varies between training runs** (seeds of one recipe, on the same test requests):
  :func:`seed_spread_S` gives the per-seed values' mean, SD, range and a t-interval for the mean over
  seeds. It does not cover which test requests were drawn.
- **What varies between requests** (for these training runs): :func:`pooled_sums` adds each request's
  weighted values over the seeds, so that the bootstrap over requests (``eval.bootstrap``) gives an
  interval for the seed-averaged metric. It does not cover training variance: three seeds are three
  draws, not the population of runs.

Weights are per request (``eval.views.weights_for``: responder rows for per-responder views, else 1), the
same for every seed, so the pooled ratio of sums equals the mean of the per-seed metrics.
:func:`seed_differences` gives both for the paired difference A - B of two methods with S runs each
(``remark eval compare A1 A2 A3 --vs B1 B2 B3``): run s of A is paired with run s of B.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from eval.bootstrap import BootstrapConfig, bootstrap_sums, compare, paired_difference, ratio_of_sums
from eval.steps import first_crossing, read_eval_log, read_step_values
from eval.views import weights_for

#: Baseline values steps-to-reach can target: its last validation value, or its best.
TARGETS = ("final", "best")


def seed_spread_S(values_S: Sequence[float], level: float = 0.95) -> dict[str, Any]:
    """Mean, SD, range and t-interval of S per-seed values.

    ``mean = sum_s v_s / S``, ``sd = sqrt(sum_s (v_s - mean)^2 / (S - 1))``, interval
    ``mean +- t_{(1+level)/2, S-1} * sd / sqrt(S)`` (Student t: the seeds are treated as independent draws
    of a training run; with S = 3, t = 4.30, so the interval is wide). Shapes: ``values_S`` (S,).

    >>> r = seed_spread_S([1.0, 2.0, 3.0])
    >>> r["mean"], r["sd"], r["min"], r["max"], round(r["ci_low"], 3), round(r["ci_high"], 3)
    (2.0, 1.0, 1.0, 3.0, -0.484, 4.484)
    """
    v = np.asarray(values_S, dtype=np.float64)
    n = v.size
    mean = float(v.mean()) if n else float("nan")
    sd = float(v.std(ddof=1)) if n > 1 else float("nan")
    if n > 1 and sd > 0:
        lo, hi = stats.t.interval(level, n - 1, loc=mean, scale=sd / np.sqrt(n))
    elif n > 1:
        lo = hi = mean
    else:
        lo = hi = float("nan")
    return {
        "values": v.tolist(),
        "n": n,
        "mean": mean,
        "sd": sd,
        "min": float(v.min()) if n else float("nan"),
        "max": float(v.max()) if n else float("nan"),
        "ci_low": float(lo),
        "ci_high": float(hi),
        "level": level,
        "interval": f"Student t over {n} seeds (df {n - 1})",
    }


def same_requests(frames: Sequence[pl.DataFrame]) -> list[pl.DataFrame]:
    """The tables sorted by ``request_id``; ValueError unless every one holds the same request ids."""
    frames = [f.sort("request_id") for f in frames]
    ids = frames[0]["request_id"]
    for f in frames[1:]:
        if not f["request_id"].equals(ids):
            raise ValueError("per-request tables of different seeds cover different requests")
    return frames


def pooled_sums_NM(frames: Sequence[pl.DataFrame], keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per request and key, ``(sum_s w_s * v_s, sum_s w_s)`` over S per-request tables of the same requests.

    Rows are aligned by ``request_id`` (sorted); every table must hold the same request set (ValueError).
    ``w_s = weights_for(frame_s, key)`` (0 where the value is null, which then counts as 0). Shapes:
    ``(N, M)`` each, M = ``len(keys)``.
    """
    frames = same_requests(frames)
    n = frames[0].height
    num = np.zeros((n, len(keys)))
    den = np.zeros((n, len(keys)))
    for f in frames:
        for m, key in enumerate(keys):
            w = weights_for(f, key)
            num[:, m] += w * f[key].fill_null(0.0).to_numpy().astype(np.float64)
            den[:, m] += w
    return num, den


def pooled_sums(frames: Sequence[pl.DataFrame], key: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pooled_sums_NM` of one key: shapes ``(N,)`` each."""
    num, den = pooled_sums_NM(frames, [key])
    return num[:, 0], den[:, 0]


def pooled_interval(frames: Sequence[pl.DataFrame], key: str, config: BootstrapConfig) -> dict[str, float]:
    """The seed-averaged metric and its bootstrap interval over requests."""
    num, den = pooled_sums(frames, key)
    iv = ratio_of_sums(num[:, None], den[:, None], config)
    return {"mean": float(iv.estimate[0]), "ci_low": float(iv.low[0]), "ci_high": float(iv.high[0])}


def pooled_differences(
    frames_a: Sequence[pl.DataFrame],
    frames_b: Sequence[pl.DataFrame],
    keys: Sequence[str],
    config: BootstrapConfig,
) -> dict[str, dict[str, float]]:
    """Seed-averaged A - B on the same requests, bootstrap over requests (both sides resampled together).

    ``sum_i numA_i / sum_i denA_i - sum_i numB_i / sum_i denB_i`` per key, from :func:`pooled_sums_NM` of
    each side (``eval.bootstrap.paired_difference``: one bootstrap for the M keys). Every table of both
    sides must hold the same request set (ValueError). Returns ``{key: {"mean", "ci_low", "ci_high"}}``.
    """
    keys = list(keys)
    same_requests([*frames_a, *frames_b])
    na, da = pooled_sums_NM(frames_a, keys)
    nb, db = pooled_sums_NM(frames_b, keys)
    iv = paired_difference(na, da, nb, db, config)
    return {
        k: {"mean": float(iv.estimate[m]), "ci_low": float(iv.low[m]), "ci_high": float(iv.high[m])}
        for m, k in enumerate(keys)
    }


def pooled_difference(
    frames_a: Sequence[pl.DataFrame], frames_b: Sequence[pl.DataFrame], key: str, config: BootstrapConfig
) -> dict[str, float]:
    """:func:`pooled_differences` of one key."""
    return pooled_differences(frames_a, frames_b, [key], config)[key]


def seed_differences(
    frames_a: Sequence[pl.DataFrame],
    frames_b: Sequence[pl.DataFrame],
    keys: Sequence[str],
    config: BootstrapConfig,
) -> dict[str, dict[str, Any]]:
    """A - B over S paired runs: per pair, the spread over pairs, and the request bootstrap of the average.

    ``frames_a[s]`` is paired with ``frames_b[s]`` (equal lengths; a shared baseline is passed S times).
    Per key: ``per_seed`` (S cells ``{"mean", "ci_low", "ci_high"}``: ``eval.bootstrap.compare`` of pair
    s, bootstrap over requests), ``seeds`` (:func:`seed_spread_S` of the S paired means, at the bootstrap's
    confidence level) and ``requests`` (:func:`pooled_differences`). With equal per-request weights in
    every run, ``requests["mean"] == seeds["mean"]`` (the mean of the per-pair differences).
    """
    if len(frames_a) != len(frames_b) or not frames_a:
        raise ValueError(f"{len(frames_a)} runs of A and {len(frames_b)} of B: pairing needs as many of each")
    keys = list(keys)
    pairs = [compare(a, b, keys, config) for a, b in zip(frames_a, frames_b, strict=True)]
    pooled = pooled_differences(frames_a, frames_b, keys, config)
    return {
        k: {
            "per_seed": [p[k] for p in pairs],
            "seeds": seed_spread_S([p[k]["mean"] for p in pairs], config.confidence_level),
            "requests": pooled[k],
        }
        for k in keys
    }


def _run_sums(runs: Sequence[Path], key: str, steps: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Pooled per-request sums of ``key`` over ``runs`` (seeds) at each of ``steps``: ``(N, T)`` twice."""
    parts = []
    for step in steps:
        frames = [read_step_values(r, step, key) for r in runs]
        if any(f is None for f in frames):
            raise ValueError(f"per-request validation values missing at step {step}")
        parts.append(pooled_sums(frames, key))
    return np.stack([p[0] for p in parts], axis=1), np.stack([p[1] for p in parts], axis=1)


def validation_steps(runs: Sequence[Path], key: str) -> list[int]:
    """The validation steps logged with ``key`` by every run (they are the same in the demo)."""
    per_run = [[r["step"] for r in read_eval_log(run) if key in r] for run in runs]
    common = sorted(set(per_run[0]).intersection(*per_run[1:]))
    if not common:
        raise ValueError(f"no validation step with {key!r} common to every run")
    return common


def pooled_curve(runs: Sequence[Path], key: str, config: BootstrapConfig) -> dict[str, list[float]]:
    """The seed-averaged validation curve (``x``, ``mean``, ``low``, ``high``; bootstrap over requests)."""
    steps = validation_steps(runs, key)
    num, den = _run_sums(runs, key, steps)
    iv = ratio_of_sums(num, den, config)
    return {"x": steps, "mean": iv.estimate.tolist(), "low": iv.low.tolist(), "high": iv.high.tolist()}


def pooled_steps_to_reach(
    runs: Sequence[Path],
    baselines: Sequence[Path],
    key: str,
    config: BootstrapConfig,
    *,
    target: str = "final",
) -> dict[str, Any]:
    """Steps-to-reach on the seed-averaged curves: the first (interpolated) validation step at which the
    runs' mean curve reaches the baselines' mean value at the target step, as a fraction of that step.

    ``target``: ``final`` is the baselines' last validation step; ``best`` the step where their mean curve
    peaks (first of ties). As ``eval.steps.steps_to_reach`` for one pair, with every per-request value summed
    over seeds first; the percentile bootstrap resamples validation requests, recomputing the whole curve
    and the target value (at the fixed target step).
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    steps = validation_steps([*runs, *baselines], key)
    last = steps[-1]
    if target == "best":
        num, den = _run_sums(baselines, key, steps)
        curve = num.sum(axis=0) / den.sum(axis=0)
        last = steps[int(np.argmax(curve))]
    if last <= 0:
        raise ValueError("steps-to-reach needs a validation target after step 0")
    num_a, den_a = _run_sums(runs, key, steps)
    num_b, den_b = _run_sums(baselines, key, [last])
    t = len(steps)
    cols = np.concatenate([num_b, num_a, den_b, den_a], axis=1)  # (N, 2(T+1))
    steps_arr = np.asarray(steps, dtype=np.float64)

    def statistic(sums: np.ndarray) -> np.ndarray:
        ratios = sums[:, : t + 1] / sums[:, t + 1 :]
        return (first_crossing(steps_arr, ratios[:, 1:], ratios[:, 0]) / last)[:, None]

    iv = bootstrap_sums(cols, statistic, config)
    fraction = float(iv.estimate[0])
    return {
        "metric": key,
        "baseline_step": last,
        "baseline_value": float(num_b.sum() / den_b.sum()),
        "step": fraction * last,
        "fraction": fraction,
        "ci_low": float(iv.low[0]),
        "ci_high": float(iv.high[0]),
        "reached": bool(np.isfinite(fraction)),
        "n_requests": int(num_b.shape[0]),
        "n_seeds": len(runs),
        "target": target,
    }
