"""Steps-to-reach and validation curves from training eval logs, with bootstrap CIs over requests.

Reads the "Training eval log" contract (docs/architecture.md): ``<run>/eval_log.jsonl`` (one JSON object
per validation with ``step`` and ``eval/<metric>@<k>/<view>`` values) and per-request values at
``<run>/eval/step_{step:06d}.parquet`` (``request_id``, one column per metric key, ``n_rows``).

Steps-to-reach (docs/experiments.md#how-runs-are-compared): the first step at which run A's validation metric reaches baseline B's value
at step S, linearly interpolated between A's validations, as a fraction of S. The paper's claim
("Rank-GRPO's 2000-step R@20 in 25-53% of the steps") is this number. Its CI resamples requests once and
recomputes A's whole curve *and* B's target on the same resample (the validation set is shared), then the
crossing; the crossing is not smooth, so percentile intervals are the default. A resample where A never
reaches the target gives ``inf`` (an open upper end), never a silently dropped resample.

Metric names (:func:`resolve_metric`): the eval log's keys (``eval/recall@5/per_responder``), the same
without ``eval/``, and the names the training config's ``validation_metric`` and the demo report use for
the sampled validation lists (``sampled/recall@5/per_responder``: the key ``eval/recall@5/per_responder``
of ``<run>/sampled/eval_log.jsonl``; the run may be given with or without its ``/sampled``). A name that
no run logs is an error listing the names that are logged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from catalog.io.errors import InputError
from catalog.io.files import iter_jsonl
from eval.bootstrap import BootstrapConfig, bootstrap_sums, intervals
from eval.views import split_key, weight_column, weights_for

#: defaults: the crossing is not smooth (percentile); curve bands are drawn, not reported (2000 resamples).
REACH_CI = BootstrapConfig(method="percentile")
CURVE_CI = BootstrapConfig(method="percentile", n_resamples=2000)


#: what each line of a training eval log must hold, and may (docs/architecture.md, "Training eval log")
EVAL_LOG_SCHEMA = {"step": int}
EVAL_LOG_OPTIONAL = {"samples": (int, None), "gpu_hours": (float, None), "wall_s": (float, None)}
LOG_HINT = "the eval log is damaged; each line is one validation's JSON object"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_eval_log(run_dir: str | Path) -> list[dict[str, Any]]:
    """``<run_dir>/eval_log.jsonl`` -> records sorted by step (a repeated step keeps the last record)."""
    path = Path(run_dir) / "eval_log.jsonl"
    if not path.is_file():
        raise InputError("no eval log here", path=path, hint="pass a training run directory")
    records: dict[int, dict[str, Any]] = {}
    for line_no, rec in iter_jsonl(path, schema=EVAL_LOG_SCHEMA, optional=EVAL_LOG_OPTIONAL):
        step = rec["step"]
        if step < 0:
            raise InputError(f"step {step} is negative", path=path, row=line_no, field="step")
        for key, value in rec.items():
            if key.startswith("eval/") and value is not None and not _is_number(value):
                raise InputError(
                    f"expected a number, got {value!r}", path=path, row=line_no, field=key, hint=LOG_HINT
                )
        records[step] = rec
    if not records:
        raise InputError("the eval log is empty", path=path)
    return [records[s] for s in sorted(records)]


SAMPLED = "sampled"


def logged_metrics(run_dir: str | Path) -> list[str]:
    """Every metric name :func:`resolve_metric` accepts for ``run_dir``: ``eval/...`` from its eval log,
    ``sampled/...`` from ``<run_dir>/sampled/eval_log.jsonl`` (when there is one)."""
    run = Path(run_dir)
    out: list[str] = []
    for prefix, log in (("eval/", run / "eval_log.jsonl"), (f"{SAMPLED}/", run / SAMPLED / "eval_log.jsonl")):
        if not log.is_file():
            continue
        keys: dict[str, None] = {}
        for rec in read_eval_log(log.parent):
            keys.update(dict.fromkeys(k for k in rec if _is_key(k)))
        out += [prefix + k.removeprefix("eval/") for k in sorted(keys)]
    return out


def _is_key(key: str) -> bool:
    try:
        split_key(key)
    except ValueError:
        return False
    return True


def resolve_metric(runs: Sequence[str | Path], metric: str) -> list[tuple[Path, str]]:
    """``metric`` as a user writes it -> (the run folder whose eval log holds it, its eval-log key), per run.

    ``sampled/<m>@<k>/<view>`` reads ``<run>/sampled`` (or ``<run>`` itself when it already ends in
    ``sampled``); ``eval/<m>@<k>/<view>`` and ``<m>@<k>/<view>`` read ``<run>``. Raises ``InputError``
    listing the logged names when a run does not log the metric.
    """
    name = metric.strip()
    sampled = name.startswith(f"{SAMPLED}/")
    rest = name.removeprefix(f"{SAMPLED}/") if sampled else name
    key = rest if rest.startswith("eval/") else f"eval/{rest}"
    if not _is_key(key):
        raise InputError(
            f"{metric!r} is not a metric name",
            field="--metric",
            hint="write <metric>@<k>/<view> with an optional eval/ or sampled/ prefix, e.g. "
            "sampled/recall@5/per_responder",
        )
    out = []
    for run_dir in runs:
        run = Path(run_dir)
        folder = run / SAMPLED if sampled and run.name != SAMPLED else run
        log = folder / "eval_log.jsonl"
        logged = any(key in rec for rec in read_eval_log(folder)) if log.is_file() else False
        if not logged:
            top = run.parent if run.name == SAMPLED else run
            names = logged_metrics(top)
            raise InputError(
                f"metric {metric!r} is not logged" + ("" if log.is_file() else f" (no {log})"),
                path=top,
                field="--metric",
                hint="logged: " + (", ".join(names) if names else "none (is this a training run folder?)"),
            )
        out.append((folder, key))
    return out


def step_values_path(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / "eval" / f"step_{step:06d}.parquet"


def read_step_values(run_dir: str | Path, step: int, key: str) -> pl.DataFrame | None:
    """Per-request values of ``key`` at ``step`` (None when the run did not write them)."""
    from catalog.io.files import read_table

    path = step_values_path(run_dir, step)
    if not path.is_file():
        return None
    df = read_table(path, format="parquet")
    weight = weight_column(key)
    need = ["request_id", key] + ([weight] if weight else [])
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise InputError(f"missing column(s) {missing}", path=path, hint="re-run validation with this metric")
    return df.select(need).sort("request_id")


def first_crossing(steps_T: np.ndarray, values_BT: np.ndarray, target_B: np.ndarray) -> np.ndarray:
    """First (interpolated) step at which each curve reaches its target; ``inf`` when it never does.

    ``steps_T`` increasing steps, ``values_BT`` B curves over them, ``target_B`` one target per curve.
    With ``j`` the first index where ``v_j >= t``: ``s = s_j`` if ``j = 0``, else
    ``s_{j-1} + (t - v_{j-1}) / (v_j - v_{j-1}) * (s_j - s_{j-1})``. Shapes: ``(T,)``, ``(B, T)``, ``(B,)``.

    >>> first_crossing(np.array([0, 100, 200]), np.array([[0.1, 0.2, 0.4]]), np.array([0.3]))
    array([150.])
    """
    steps = np.asarray(steps_T, dtype=np.float64)
    values = np.asarray(values_BT, dtype=np.float64)
    target = np.asarray(target_B, dtype=np.float64)
    reached = values >= target[:, None]
    j = np.argmax(reached, axis=1)
    rows = np.arange(values.shape[0])
    prev = np.maximum(j - 1, 0)
    v0, v1 = values[rows, prev], values[rows, j]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(j > 0, (target - v0) / (v1 - v0), 0.0)
    s = steps[prev] + frac * (steps[j] - steps[prev])
    return np.where(reached.any(axis=1), s, np.inf)


def _aligned(frames: Sequence[pl.DataFrame], where: Sequence[str]) -> None:
    ids = frames[0]["request_id"]
    for df, name in zip(frames[1:], where[1:]):
        if not df["request_id"].equals(ids):
            raise InputError(
                f"per-request values cover other requests than {where[0]}",
                path=name,
                hint="steps-to-reach needs every validation on the same request set",
            )


def _num_den(df: pl.DataFrame, key: str) -> tuple[np.ndarray, np.ndarray]:
    w = weights_for(df, key)
    return w * df[key].fill_null(0.0).to_numpy().astype(np.float64), w


def steps_to_reach(
    run: str | Path,
    baseline: str | Path,
    *,
    key: str = "eval/recall@20/per_responder",
    baseline_step: int | None = None,
    config: BootstrapConfig = REACH_CI,
) -> dict[str, Any]:
    """How many of the baseline's steps ``run`` needs to reach the baseline's value at ``baseline_step``.

    Returns ``{"metric", "baseline_step", "baseline_value", "step", "fraction", "ci_low", "ci_high",
    "reached", "n_requests", "n_steps", "ci"}``; ``fraction = step / baseline_step`` (``inf`` if never
    reached). CIs need the per-request parquet files; without them they are NaN and ``ci`` says why.
    """
    split_key(key)
    log_b, log_a = read_eval_log(baseline), read_eval_log(run)
    b_steps = [r["step"] for r in log_b]
    s_ref = b_steps[-1] if baseline_step is None else int(baseline_step)
    if s_ref not in b_steps:
        raise InputError(
            f"no validation at step {s_ref} (steps: {b_steps})", path=Path(baseline) / "eval_log.jsonl"
        )
    if s_ref <= 0:
        raise InputError("the baseline step must be > 0 to express a fraction of it", field="baseline_step")
    a_steps = [r["step"] for r in log_a if key in r]
    frames_a = [read_step_values(run, s, key) for s in a_steps]
    frame_b = read_step_values(baseline, s_ref, key)
    result: dict[str, Any] = {"metric": key, "baseline_step": s_ref, "n_steps": len(a_steps)}
    if frame_b is None or any(f is None for f in frames_a):
        # Point estimate from the logged means only; no per-request values, so no interval.
        target = log_b[b_steps.index(s_ref)].get(key)
        if target is None or not a_steps:
            raise InputError(f"metric {key!r} not logged in both runs", path=Path(run) / "eval_log.jsonl")
        curve = np.array([[r[key] for r in log_a if key in r]], dtype=np.float64)
        step = float(first_crossing(np.array(a_steps), curve, np.array([target]))[0])
        ci = {"available": False, "reason": "per-request values (eval/step_*.parquet) missing"}
        return result | {
            "baseline_value": float(target),
            "step": step,
            "fraction": step / s_ref,
            "ci_low": float("nan"),
            "ci_high": float("nan"),
            "reached": bool(np.isfinite(step)),
            "n_requests": None,
            "ci": ci,
        }
    frames = [frame_b, *frames_a]
    _aligned(
        frames, [str(step_values_path(baseline, s_ref))] + [str(step_values_path(run, s)) for s in a_steps]
    )
    parts = [_num_den(f, key) for f in frames]
    t = len(a_steps)
    cols = np.stack([p[0] for p in parts] + [p[1] for p in parts], axis=1)  # (N, 2(T+1))
    steps_arr = np.asarray(a_steps, dtype=np.float64)

    def statistic(sums: np.ndarray) -> np.ndarray:
        ratios = sums[:, : t + 1] / sums[:, t + 1 :]
        return (first_crossing(steps_arr, ratios[:, 1:], ratios[:, 0]) / s_ref)[:, None]

    iv = bootstrap_sums(cols, statistic, config)
    fraction = float(iv.estimate[0])
    return result | {
        "baseline_value": float(parts[0][0].sum() / parts[0][1].sum()),
        "step": fraction * s_ref,
        "fraction": fraction,
        "ci_low": float(iv.low[0]),
        "ci_high": float(iv.high[0]),
        "reached": bool(np.isfinite(fraction)),
        "n_requests": frame_b.height,
        "ci": {"available": True, **config.as_dict()},
    }


@dataclass
class Curve:
    """One run's validation curve: arrays of shape ``(T,)``; ``low``/``high`` NaN without per-request data."""

    name: str
    key: str
    x: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    x_name: str = "step"


def validation_curve(
    run: str | Path,
    key: str,
    *,
    x: str = "step",
    name: str | None = None,
    config: BootstrapConfig = CURVE_CI,
) -> Curve:
    """Mean and CI of ``key`` at every validation of ``run``, against ``x`` (``step``, ``samples``, ...)."""
    split_key(key)
    log = [r for r in read_eval_log(run) if key in r]
    if not log:
        raise InputError(f"metric {key!r} never logged", path=Path(run) / "eval_log.jsonl")
    if any(x not in r for r in log):
        raise InputError(f"some validations lack {x!r}", path=Path(run) / "eval_log.jsonl", field=x)
    xs, mean, low, high = [], [], [], []
    for rec in log:
        df = read_step_values(run, rec["step"], key)
        if df is None:
            m, lo, hi = float(rec[key]), float("nan"), float("nan")
        else:
            ci = intervals(df, [key], config)[key]
            m, lo, hi = ci["mean"], ci["ci_low"], ci["ci_high"]
        xs.append(float(rec[x]))
        mean.append(m)
        low.append(lo)
        high.append(hi)
    arr = [np.asarray(v, dtype=np.float64) for v in (xs, mean, low, high)]
    return Curve(name or Path(run).name, key, *arr, x_name=x)
