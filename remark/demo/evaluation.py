"""The demo's numbers: test evaluation with CIs, paired differences, steps-to-reach and validation curves.

- the SFT start and each method's best checkpoint on the test split (``eval.run.evaluate_model``):
  greedy lists *and* sampled lists, with bootstrap CIs over requests;
- paired differences on the same test requests (``eval.bootstrap.compare``);
- steps-to-reach and validation curves with CI bands (``eval.steps``) from each run's eval logs
  (``<run>/sampled`` for sampled lists, ``<run>`` for greedy ones), plotted with ``eval.report``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from remark.demo.settings import METHODS, DemoSettings


def _ks(k: int) -> tuple[int, ...]:
    return tuple(sorted({min(5, k), k}))


def evaluate_models(
    s: DemoSettings, data_dir: Path, models: dict[str, Path], out: Path, on_done: Callable[[str], None]
) -> dict[str, dict[str, Any]]:
    """``eval.run.evaluate_model`` on the test split for each model: greedy + sampled lists, CIs."""
    from eval.bootstrap import BootstrapConfig
    from eval.generate import GenerationConfig
    from eval.run import evaluate_model

    gen = GenerationConfig(
        k=s.k,
        max_new_tokens=s.max_completion_length,
        batch_size=64,
        num_samples=s.eval_samples,
        temperature=1.0,
        seed=s.seed,
        engine="transformers",
    )
    ci = BootstrapConfig(n_resamples=s.ci_resamples, seed=s.seed)
    results = {}
    for name, model_dir in models.items():
        results[name] = evaluate_model(
            model_dir,
            data_dir,
            out / name,
            split="test",
            generation=gen,
            ks=_ks(s.k),
            metrics=("recall", "ndcg"),
            config=ci,
        )
        on_done(name)
    return results


def _by_view(flat: dict[str, dict[str, float]], n_requests: int) -> dict[str, Any]:
    """``{"eval/recall@5/union": cell}`` -> ``{"union": {"recall@5": cell}, "n_requests": n}``."""
    from eval.views import split_key

    out: dict[str, Any] = {"n_requests": n_requests}
    for key, cell in flat.items():
        metric, view = split_key(key)
        out.setdefault(view, {})[metric] = cell
    return out


def paired(eval_dir: Path, a: str, b: str, s: DemoSettings) -> dict[str, Any]:
    """Paired differences ``a - b`` on the same test requests, greedy and sampled (``eval.bootstrap.compare``)."""
    import polars as pl

    from eval.bootstrap import BootstrapConfig, compare

    ci = BootstrapConfig(n_resamples=s.ci_resamples, seed=s.seed)
    out = {}
    for lists, name in (("greedy", "per_request.parquet"), ("sampled", "per_request_sampled.parquet")):
        pa, pb = eval_dir / a / name, eval_dir / b / name
        if not (pa.is_file() and pb.is_file()):
            continue
        fa, fb = pl.read_parquet(pa), pl.read_parquet(pb)
        keys = [c for c in fa.columns if c.startswith("eval/")]
        out[lists] = _by_view(compare(fa, fb, keys, ci), fa.height)
    return out


def validation_results(s: DemoSettings, out: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """Steps-to-reach both ways and both runs' validation curves, per validation lists (sampled first);
    writes one plot each (``curves.png`` for the primary lists). Returns ``(reach, curves, plots)``, the
    curves as JSON-ready dicts (``x``, ``mean``, ``low``, ``high``)."""
    from eval.report import plot_curves
    from eval.steps import CURVE_CI, REACH_CI, steps_to_reach, validation_curve

    reach_cfg = dataclasses.replace(REACH_CI, n_resamples=s.ci_resamples, seed=s.seed)
    curve_cfg = dataclasses.replace(
        CURVE_CI, n_resamples=min(CURVE_CI.n_resamples, s.ci_resamples), seed=s.seed
    )
    logs = s.validation_logs()
    plots = {lists: "curves.png" if i == 0 else f"curves_{lists}.png" for i, lists in enumerate(logs)}
    reach: dict[str, Any] = {}
    curves: dict[str, Any] = {}
    key = s.greedy_metric  # the eval log's name of the metric, in greedy and sampled logs alike
    for lists, (sub, metric) in logs.items():
        runs = {m: out / m / sub for m in METHODS}
        reach[lists] = {
            "metric": metric,
            "remark_reaches_rank_grpo": steps_to_reach(
                runs["remark"], runs["rank_grpo"], key=key, config=reach_cfg
            ),
            "rank_grpo_reaches_remark": steps_to_reach(
                runs["rank_grpo"], runs["remark"], key=key, config=reach_cfg
            ),
        }
        curves[lists] = {
            m: validation_curve(runs[m], key, name=METHODS[m][0], config=curve_cfg) for m in METHODS
        }
        plot_curves(
            list(curves[lists].values()),
            out / plots[lists],
            reach=reach[lists]["remark_reaches_rank_grpo"],
            title=f"validation {metric.removeprefix('eval/')}, 95% CI bands",
        )
    as_json = {
        lists: {
            m: {
                "name": c.name,
                "key": c.key,
                "x": [int(v) for v in c.x],
                "mean": c.mean.tolist(),
                "low": c.low.tolist(),
                "high": c.high.tolist(),
            }
            for m, c in by_method.items()
        }
        for lists, by_method in curves.items()
    }
    return reach, as_json, plots
