"""Markdown tables and PNG plots for scores, paired comparisons and validation curves.

Plots use matplotlib's object API on the Agg canvas (``matplotlib.figure.Figure``; no pyplot, no global
backend state), in the format their extension names (``.png``, ``.pdf``, ``.svg``; any other is refused),
written atomically: ``catalog.io.outputs.atomic_write`` inside an output folder, or, given a ``kind``,
as an owned single file (``atomic_file``: never an input, an existing file only when remark wrote it as that
kind, or with ``force``). Tables say how the numbers were
made (compaction, matching, CI method), since Rank-GRPO-comparable and union numbers differ. Slot-filter
variants (``"per_responder/drop_ooc"``, docs/metrics.md) get their own tables, one per view, after the main
one; the plots show the plain views only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from catalog.io.outputs import PLOT_FORMATS, atomic_file, atomic_write, file_format
from catalog.io.versions import versions_line
from eval.metric_registry import metric_rank
from eval.steps import Curve
from eval.views import ALL_VIEWS

Table = Mapping[str, Mapping[str, Mapping[str, float]]]  # view -> "recall@10" -> {mean, ci_low, ci_high}


def _fmt(cell: Mapping[str, float] | None, scale: float = 1.0, digits: int = 4) -> str:
    if cell is None:
        return "-"
    m, lo, hi = (cell[k] * scale for k in ("mean", "ci_low", "ci_high"))
    if math.isnan(m):
        return "n/a"
    ci = "" if math.isnan(lo) else f" [{lo:.{digits}f}, {hi:.{digits}f}]"
    return f"{m:.{digits}f}{ci}"


def _metric_order(names: Sequence[str]) -> list[str]:
    """``metric@k`` names in the registry's order (``eval.metric_registry``), then by k."""

    def sort_key(name: str) -> tuple[int, int]:
        metric, k = name.split("@")
        return (metric_rank(metric), int(k))

    return sorted(set(names), key=sort_key)


def _variants(result: Mapping[str, Any]) -> dict[str, list[str]]:
    """Slot-filter variants present in a result, per plain view: ``{"union": ["union/drop_ooc", ...]}``."""
    out: dict[str, list[str]] = {}
    for key in result:
        view, _, name = key.partition("/")
        if view in ALL_VIEWS and name:
            out.setdefault(view, []).append(key)
    return {v: out[v] for v in ALL_VIEWS if v in out}


def _variant_tables(result: Mapping[str, Any], fmt: Any) -> list[str]:
    lines: list[str] = []
    for view, keys in _variants(result).items():
        names = _metric_order([m for v in keys for m in result[v]])
        filters = [k.partition("/")[2] for k in keys]
        lines += ["", f"Slot filters, {view} (docs/metrics.md):", ""]
        lines += ["| metric | " + " | ".join(filters) + " |", "|---|" + "---|" * len(filters)]
        for name in names:
            lines.append(f"| {name} | " + " | ".join(fmt(result[v].get(name)) for v in keys) + " |")
    return lines


def metrics_markdown(result: Mapping[str, Any], *, title: str = "Scores") -> str:
    """A markdown table: one row per metric, one column per view, ``mean [ci_low, ci_high]``; then one
    table per view with its slot-filter variants, if any; counts, warnings, the lists' collapse figures
    (``eval.collapse.collapse_lines``), the split's overlap with the training split
    (``eval.leakage.overlap_lines``) and versions when the result has them."""
    views = [v for v in ALL_VIEWS if v in result]
    names = _metric_order([m for v in views for m in result[v]])
    lines = [f"## {title}", ""]
    settings = result.get("settings", {})
    if settings:
        lines += [
            "Settings: " + ", ".join(f"{k} = {v}" for k, v in settings.items() if not isinstance(v, dict)),
            "",
        ]
    ci = result.get("ci")
    if ci:
        lines += [
            f"CIs: {ci.get('confidence_level', 0.95):.0%} bootstrap over requests ({ci.get('method')}, "
            f"{ci.get('n_resamples')} resamples, seed {ci.get('seed')}).",
            "",
        ]
    lines += ["| metric | " + " | ".join(views) + " |", "|---|" + "---|" * len(views)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(_fmt(result[v].get(name)) for v in views) + " |")
    lines += _variant_tables(result, _fmt)
    counts = result.get("counts")
    if counts:
        lines += ["", "Counts: " + ", ".join(f"{k} = {v}" for k, v in counts.items())]
    warnings = result.get("warnings")
    if warnings:
        lines += ["", "Warnings: " + "; ".join(f"{k}: {v}" for k, v in warnings.items())]
    if result.get("collapse"):
        from eval.collapse import collapse_lines

        lines += ["", *collapse_lines(result["collapse"])]
    if result.get("split_overlap"):
        from eval.leakage import overlap_lines

        lines += ["", *overlap_lines(result["split_overlap"])]
    if result.get("versions"):
        lines += ["", "Versions: " + versions_line(result["versions"])]
    return "\n".join(lines) + "\n"


def compare_markdown(diff: Mapping[str, Any], *, name_a: str = "A", name_b: str = "B") -> str:
    """Paired differences ``A - B`` in points (x100), one row per metric, one column per view."""
    views = [v for v in ALL_VIEWS if v in diff]
    names = _metric_order([m for v in views for m in diff[v]])
    lines = [f"## {name_a} - {name_b} (paired on {diff.get('n_requests', '?')} requests, points)", ""]
    lines += ["| metric | " + " | ".join(views) + " |", "|---|" + "---|" * len(views)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(_fmt(diff[v].get(name), 100.0, 2) for v in views) + " |")
    lines += _variant_tables(diff, lambda cell: _fmt(cell, 100.0, 2))
    ci = diff.get("ci")
    if ci:
        lines += [
            "",
            f"CIs: {_ci_text(ci, diff.get('n_requests', '?'))}: they cover which requests were drawn, for these "
            "two runs, not what varies between training runs (compare several runs per side for that).",
        ]
    if diff.get("verdicts"):
        lines += verdict_lines(diff["verdicts"], ci or {})
        lines += [
            "",
            'Verdict: none with one run per side; the rule (docs/metrics.md, "Verdicts") needs at least 3 runs '
            "per side: `remark eval compare A1 A2 A3 --vs B1 B2 B3`.",
        ]
    return "\n".join(lines) + "\n"


def _ci_text(ci: Mapping[str, Any], n_requests: Any) -> str:
    return (
        f"{ci.get('confidence_level', 0.95):.0%} bootstrap over the {n_requests} requests ({ci.get('method')}, "
        f"{ci.get('n_resamples')} resamples, seed {ci.get('seed')})"
    )


def seeds_compare_markdown(diff: Mapping[str, Any]) -> str:
    """Paired differences ``A - B`` over S pairs of runs (``eval.seeds.seed_differences`` per view and
    metric, in points, x100): one table per view (slot-filter variants included), one row per metric with
    the mean of the pairs' differences, its t-interval over the pairs, the bootstrap interval over requests
    of the run-averaged difference, the SD and range over pairs, and each pair's difference with its own
    bootstrap interval."""
    views = [v for v in ALL_VIEWS if v in diff] + [v for keys in _variants(diff).values() for v in keys]
    pairs = diff.get("pairs", [])
    n_req, level = diff.get("n_requests", "?"), diff.get("seed_interval", {}).get("confidence_level", 0.95)
    n = len(pairs)
    ci = diff.get("ci", {})
    lines = [
        f"## A - B over {n} pairs of runs (paired on {n_req} requests, points)",
        "",
        f"Pairs: {', '.join(pairs)}. Mean: of the {n} pairs' differences. Over seeds: {level:.0%} Student t "
        f"interval over the {n} pairs ({n - 1} df): what varies between training runs, on these requests. "
        f"Over requests: {_ci_text(ci, n_req)} of the seed-averaged difference: what varies between requests, "
        "for these runs. Per pair: its difference [bootstrap over requests].",
    ]
    seed_cols = " | ".join(f"pair {i + 1}" for i in range(n))
    for view in views:
        names = _metric_order(list(diff[view]))
        lines += ["", f"### {view}", ""]
        lines += [
            f"| metric | mean | over seeds | over requests | SD | range | {seed_cols} |",
            "|---|" + "---|" * (5 + n),
        ]
        for name in names:
            cell = diff[view][name]
            seeds, reqs = cell["seeds"], cell["requests"]
            cells = [
                f"{100 * seeds['mean']:.2f}",
                _interval(seeds),
                _interval(reqs),
                "n/a" if math.isnan(seeds["sd"]) else f"{100 * seeds['sd']:.2f}",
                f"{100 * seeds['min']:.2f} to {100 * seeds['max']:.2f}",
                *(_fmt(c, 100.0, 2) for c in cell["per_seed"]),
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if diff.get("verdicts"):
        lines += verdict_lines(diff["verdicts"], ci, sentences=True)
    return "\n".join(lines) + "\n"


#: How the tables name a bootstrap method.
_METHOD_NAMES = {"bca": "BCa", "percentile": "percentile", "basic": "basic"}


def _signed(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:+.2f}"


def _signed_interval(cell: Mapping[str, Any]) -> str:
    lo, hi = cell["ci_low"], cell["ci_high"]
    return "n/a" if math.isnan(lo) else f"[{100 * lo:+.2f}, {100 * hi:+.2f}]"


def verdict_lines(
    verdicts: Mapping[str, Mapping[str, Mapping[str, Any]]], ci: Mapping[str, Any], *, sentences: bool = False
) -> list[str]:
    """The figures of ``eval.verdicts.verdict`` beside the interval over requests (points, x100): one table
    per view (``verdicts[view][metric]``, slot-filter variants included), one row per metric, a legend,
    and with ``sentences`` each metric's verdict sentence (its ``text``) under its view's table."""
    views = [v for v in ALL_VIEWS if v in verdicts] + [
        v for keys in _variants(verdicts).values() for v in keys
    ]
    if not views:
        return []
    from eval.verdicts import EXACT_FLIPS

    first = next(iter(verdicts[views[0]].values()))
    method = _METHOD_NAMES.get(first["requests"]["method"], first["requests"]["method"])
    lines = [
        "",
        "### Beside the interval over requests (eval.verdicts, points)",
        "",
        "Of the seed-averaged per-request differences d_r = A - B with the view's weights w_r: mean = sum w_r d_r "
        "/ sum w_r; macro mean = the unweighted mean over the requests; "
        f"{method} and percentile = {ci.get('confidence_level', 0.95):.0%} bootstrap intervals over requests "
        f"on the same {ci.get('n_resamples')} resamples (seed {ci.get('seed')}); sign-flip p = two-sided paired "
        f"sign-flip randomization test of the mean ({ci.get('n_resamples')} random sign vectors, seed "
        f"{ci.get('seed')}; exact, over every sign vector, where the requests with d_r != 0 have at most "
        f"{max(EXACT_FLIPS, int(ci.get('n_resamples') or 0))}); ahead / level / behind = requests with d_r above, "
        f"within, below +-{first['tie_tolerance']:g}; top-{first['top_influence']['k']} share = the share of the "
        "mean carried by the requests with the largest abs(w_r d_r) (above 100%, or negative, when the others "
        "pull the other way).",
    ]
    for view in views:
        names = _metric_order(list(verdicts[view]))
        k = first["top_influence"]["k"]
        lines += ["", f"#### {view}", ""]
        lines += [
            f"| metric | mean | macro mean | {method} | percentile | sign-flip p | A ahead / level / behind "
            f"| top-{k} share |",
            "|---|" + "---|" * 7,
        ]
        for name in names:
            v = verdicts[view][name]
            p, share = v["sign_flip"]["p"], v["top_influence"]["share"]
            cells = [
                _signed(v["weighted_mean"]),
                _signed(v["macro_mean"]),
                _signed_interval(v["requests"]),
                _signed_interval(v["percentile"]),
                "n/a" if math.isnan(p) else f"{p:.3g}" + (" (exact)" if v["sign_flip"]["exact"] else ""),
                f"{v['wins']} / {v['ties']} / {v['losses']}",
                "n/a" if math.isnan(share) else f"{100 * share:.0f}%",
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        if sentences:
            lines += [""] + [f"- {name}: {verdicts[view][name]['text']}" for name in names]
    return lines


def _interval(cell: Mapping[str, float]) -> str:
    lo, hi = cell["ci_low"], cell["ci_high"]
    return "n/a" if math.isnan(lo) else f"[{100 * lo:.2f}, {100 * hi:.2f}]"


def baselines_markdown(result: Mapping[str, Any]) -> str:
    """Reference levels (``eval.baselines.baseline_levels``): one row per (level, metric), one column per
    view, ``mean [ci_low, ci_high]``; then what each level's lists are, the notes, and the split's
    overlap with the training split (``eval.leakage.overlap_lines``) when the result has one."""
    levels = result["levels"]
    views = [v for v in ALL_VIEWS if any(v in lv for lv in levels.values())]
    n_req = result.get("n_requests", "?")
    lines = [
        f"## Reference levels: split {result.get('split')}, {n_req} requests, {result.get('n_items')} catalog items",
        "",
    ]
    if result.get("ci"):
        lines += [f"CIs: {_ci_text(result['ci'], n_req)}.", ""]
    lines += ["| level | metric | " + " | ".join(views) + " |", "|---|---|" + "---|" * len(views)]
    for name, level in levels.items():
        for metric in _metric_order([m for v in views for m in level.get(v, {})]):
            cells = [_fmt(level.get(v, {}).get(metric)) for v in views]
            lines.append(f"| {name} | {metric} | " + " | ".join(cells) + " |")
    lines += [""] + [f"- {name}: {level['description']}" for name, level in levels.items()]
    lines += [f"- {note}" for note in result.get("notes", [])]
    if result.get("split_overlap"):
        from eval.leakage import overlap_lines

        lines += ["", *overlap_lines(result["split_overlap"])]
    return "\n".join(lines) + "\n"


def _save(
    fig: Any,
    path: str | Path,
    inputs: Sequence[str | Path] = (),
    *,
    kind: str | None = None,
    force: bool = False,
    field: str = "--out",
) -> Path:
    """Write ``fig`` to ``path`` in its extension's format: an owned single file of ``kind``, or (no kind)
    a plain atomic write for a file inside a folder the caller writes whole."""
    fmt = file_format(path, PLOT_FORMATS, field=field)
    if kind is None:
        writing = atomic_write(path, inputs=inputs, field=field)
    else:
        writing = atomic_file(path, kind, formats=PLOT_FORMATS, inputs=inputs, force=force, field=field)
    with writing as tmp:
        fig.savefig(tmp, format=fmt, dpi=120, bbox_inches="tight")
    return Path(path)


def plot_metrics(result: Table, path: str | Path, *, title: str = "") -> Path:
    """One panel per metric family, the value against k per view, with CI error bars."""
    from matplotlib.figure import Figure

    views = [v for v in ALL_VIEWS if v in result]
    families = list(dict.fromkeys(m.split("@")[0] for v in views for m in _metric_order(list(result[v]))))
    fig = Figure(figsize=(4.2 * len(families), 3.4))
    axes = fig.subplots(1, len(families), squeeze=False)[0]
    for ax, fam in zip(axes, families):
        for view in views:
            names = [m for m in _metric_order(list(result[view])) if m.startswith(fam + "@")]
            ks = [int(m.split("@")[1]) for m in names]
            mean = np.array([result[view][m]["mean"] for m in names])
            lo = np.array([result[view][m]["ci_low"] for m in names])
            hi = np.array([result[view][m]["ci_high"] for m in names])
            err = np.nan_to_num(np.vstack([mean - lo, hi - mean]))
            ax.errorbar(ks, mean, yerr=err, marker="o", capsize=3, label=view)
        ax.set_xlabel("k")
        ax.set_ylabel(fam)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_curves(
    curves: Sequence[Curve],
    path: str | Path,
    *,
    reach: Mapping[str, Any] | None = None,
    title: str = "",
    inputs: Sequence[str | Path] = (),
    kind: str | None = None,
    force: bool = False,
    field: str = "--out",
) -> Path:
    """Validation curves with CI bands (one line per run); optionally the steps-to-reach target.

    ``inputs`` (the run folders read): ``path`` equal to one of them or inside one is refused (InputError).
    ``kind``: write ``path`` as an owned single file of that kind (see the module docstring).
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.subplots()
    for c in curves:
        (line,) = ax.plot(c.x, c.mean, marker=".", label=c.name)
        ok = ~np.isnan(c.low)
        if ok.any():
            ax.fill_between(c.x[ok], c.low[ok], c.high[ok], color=line.get_color(), alpha=0.2, linewidth=0)
    if reach is not None and math.isfinite(reach.get("baseline_value", math.nan)):
        ax.axhline(
            reach["baseline_value"],
            color="grey",
            linestyle="--",
            linewidth=1,
            label=f"baseline at step {reach['baseline_step']}",
        )
        if reach.get("reached"):
            ax.axvline(reach["step"], color="grey", linestyle=":", linewidth=1)
    key = curves[0].key if curves else ""
    ax.set_xlabel(curves[0].x_name if curves else "step")
    ax.set_ylabel(re.sub(r"^eval/", "", key))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return _save(fig, path, inputs, kind=kind, force=force, field=field)
