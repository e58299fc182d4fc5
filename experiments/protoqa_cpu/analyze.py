"""Analysis of the ProtoQA CPU experiment: paired CIs, steps-to-reach, curves, plots, a markdown report.

Reads the library's validation output (``remark.run.callbacks.ValidationCallback``, the eval-log contract of
docs/architecture.md) of every run ``<out>/runs/<method>_s<seed>/``:

- validation half of the held-out respondents: greedy at the run root (``eval_log.jsonl``,
  ``eval/step_*.parquet``), sampled under ``sampled/``;
- test half (when the config has one): the same under ``test/`` and ``test/sampled/``;
- the warm-up's validation (validation half) in ``<out>/sft_model/`` the same way.

Writes ``<out>/analysis/``:

- ``pooled/<side>/<method>/<mode>/``: a pseudo-run whose per-request values are the mean over seeds at
  each step (same questions and held-out respondents in every seed), read by the same ``eval.steps`` code;
- ``summary.json`` (every number below) and ``results.md`` (tables);
- ``curves.png`` (recall@10 per respondent and union, distinct items per list; greedy and sampled on
  the validation half, sampled on the test half), ``reach.png`` (the primary metric on the validation
  half with Rank-GRPO's final value and ReMaRk's crossing), ``warmup.png`` (the SFT warm-up's curve).

Statistics (all bootstraps resample questions, so a question's respondents move together):
paired differences ReMaRk - Rank-GRPO (``eval.bootstrap.compare``, BCa) at the final step and at each
run's best step, chosen by the primary metric on the validation half and read on both halves (the test
half's numbers are unbiased by the choice); steps-to-reach (``eval.steps.steps_to_reach``, percentile:
the first interpolated step at which ReMaRk reaches Rank-GRPO's final value, as a fraction of the final
step), on each half. Per seed and pooled over seeds (pooled intervals treat the seeds as fixed: the seed
spread is shown by the per-seed rows).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from catalog.io.outputs import atomic_write
from eval.bootstrap import BootstrapConfig, compare, intervals
from eval.steps import REACH_CI, read_eval_log, steps_to_reach, validation_curve
from eval.views import weighted_means

MODES = ("greedy", "sampled")
SIDES = ("valid", "test")
SIDE_NAMES = {"valid": "validation half", "test": "test half"}
KEYS = ("eval/recall@10/per_responder", "eval/recall@10/union")
MORE_KEYS = ("eval/recall@5/per_responder", "eval/ndcg@10/per_responder", "eval/recall@5/union")
LIST_COLS = ("list/length", "list/grounded", "list/distinct", "list/eligible")
NAMES = {"remark": "ReMaRk", "rank_grpo": "Rank-GRPO"}
TRAIN_KEYS = (
    "train/zero_signal_frac",
    "reward",
    "train/hits_per_list",
    "train/lines_per_list",
    "train/grounded_per_list",
    "completions/mean_length",
    "step_time",
)


def side_dir(run: Path, side: str, mode: str) -> Path:
    """Where ``ValidationCallback`` wrote a side's lists of one mode (see the module docstring)."""
    root = run if side == "valid" else run / side
    return root if mode == "greedy" else root / mode


def step_frame(d: Path, step: int) -> pl.DataFrame:
    return pl.read_parquet(d / "eval" / f"step_{step:06d}.parquet").sort("request_id")


def metric_keys(df: pl.DataFrame) -> list[str]:
    return [c for c in df.columns if c.startswith("eval/")]


# -- pooled pseudo-runs ---------------------------------------------------------------------------------
def build_pooled(dirs: list[Path], dest: Path) -> Path:
    """Mean over seeds of the per-request values at every step all seeds validated."""
    logs = [read_eval_log(d) for d in dirs]
    steps = sorted(set.intersection(*[{r["step"] for r in log} for log in logs]))
    (dest / "eval").mkdir(parents=True, exist_ok=True)
    records = []
    for step in steps:
        frames = [step_frame(d, step) for d in dirs]
        base = frames[0]
        cols = metric_keys(base) + [c for c in LIST_COLS if c in base.columns]
        mean = (
            pl.concat([f.select("request_id", *cols) for f in frames])
            .group_by("request_id", maintain_order=True)
            .agg(pl.col(cols).mean())
        )
        df = base.select("request_id", "n_rows", "n_responders").join(
            mean, on="request_id", maintain_order="left"
        )
        df.write_parquet(dest / "eval" / f"step_{step:06d}.parquet")
        recs = [next(r for r in log if r["step"] == step) for log in logs]
        rec = {
            "step": step,
            "samples": recs[0]["samples"],
            "gpu_hours": 0.0,
            "wall_s": float(np.mean([r["wall_s"] for r in recs])),
            **weighted_means(df, metric_keys(df)),
            **{c: float(df[c].mean()) for c in LIST_COLS if c in df.columns},
        }
        records.append(rec)
    with atomic_write(dest / "eval_log.jsonl") as tmp:
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    return dest


# -- statistics -----------------------------------------------------------------------------------------
def best_step(d: Path, key: str) -> int:
    log = [r for r in read_eval_log(d) if key in r]
    return max(log, key=lambda r: (r[key], -r["step"]))["step"]


def final_step(d: Path) -> int:
    return read_eval_log(d)[-1]["step"]


def level(d: Path, step: int, keys: tuple[str, ...], ci: BootstrapConfig) -> dict[str, Any]:
    df = step_frame(d, step)
    out = intervals(df, keys, ci)
    for c in LIST_COLS:
        out[c] = {"mean": float(df[c].mean())}
    return out


def paired(a_dir: Path, a_step: int, b_dir: Path, b_step: int, keys, ci, ids=None) -> dict[str, Any]:
    a, b = step_frame(a_dir, a_step), step_frame(b_dir, b_step)
    if ids is not None:
        a, b = a.filter(pl.col("request_id").is_in(ids)), b.filter(pl.col("request_id").is_in(ids))
    diff = compare(a, b, keys, ci)
    diff["n_requests"] = a.height
    return diff


def reach(a_dir: Path, b_dir: Path, key: str, step: int, n_resamples: int) -> dict[str, Any]:
    cfg = BootstrapConfig(method=REACH_CI.method, n_resamples=n_resamples, seed=REACH_CI.seed)
    return steps_to_reach(a_dir, b_dir, key=key, baseline_step=step, config=cfg)


def train_summary(run: Path) -> dict[str, Any]:
    path = run / "train_log.jsonl"
    if not path.is_file():
        return {}
    recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    recs = [r for r in recs if "train/zero_signal_frac" in r or "reward" in r]
    out: dict[str, Any] = {}
    for k in TRAIN_KEYS:
        vals = [float(r[k]) for r in recs if k in r]
        if vals:
            out[k] = {"mean": float(np.mean(vals)), "first": vals[0], "last": vals[-1]}
    return out


def load_summary(path: Path, since: float | None = None, until: float | None = None) -> dict[str, float]:
    if not path.is_file():
        return {}
    vals = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    vals = [
        v["load1"] for v in vals if (since is None or v["t"] >= since) and (until is None or v["t"] <= until)
    ]
    if not vals:
        return {}
    return {"mean": float(np.mean(vals)), "max": float(np.max(vals)), "n": len(vals)}


def warmup(out: Path, ci: BootstrapConfig) -> dict[str, Any]:
    """The SFT warm-up's validations (validation half): values with CIs at every validated step."""
    res: dict[str, Any] = {}
    for mode in MODES:
        d = side_dir(out / "sft_model", "valid", mode)
        if not (d / "eval_log.jsonl").is_file():
            return {}
        res[mode] = [{"step": r["step"], "values": level(d, r["step"], KEYS, ci)} for r in read_eval_log(d)]
    return res


# -- plots --------------------------------------------------------------------------------------------
COLORS = {"remark": "tab:blue", "rank_grpo": "tab:orange"}


def plot_all(out: Path, S: dict[str, Any], curves: dict, dirs: dict) -> None:
    from matplotlib.figure import Figure

    from eval.report import plot_curves

    A = out / "analysis"
    methods, seeds, sides, primary = S["methods"], S["seeds"], S["sides"], S["primary"]
    rows = [("valid", "greedy"), ("valid", "sampled")] + [
        ("test", m) for m in ("sampled",) if "test" in sides
    ]
    panels = [*KEYS, "list/distinct"]
    fig = Figure(figsize=(12, 3.2 * len(rows)))
    axes = fig.subplots(len(rows), 3, squeeze=False)
    for i, (side, mode) in enumerate(rows):
        for j, key in enumerate(panels):
            ax = axes[i][j]
            for m in methods:
                for s in seeds:
                    log = read_eval_log(dirs[(m, side, mode, f"seed {s}")])
                    ax.plot(
                        [r["step"] for r in log], [r[key] for r in log], color=COLORS[m], alpha=0.3, lw=0.8
                    )
                c = curves.get((m, side, mode, key))
                if c is not None:
                    ax.plot(
                        c.x, c.mean, color=COLORS[m], marker="o", ms=3, label=f"{NAMES[m]} (mean of seeds)"
                    )
                    ok = ~np.isnan(c.low)
                    if ok.any():
                        ax.fill_between(c.x[ok], c.low[ok], c.high[ok], color=COLORS[m], alpha=0.15, lw=0)
                else:
                    log = read_eval_log(dirs[(m, side, mode, "pooled")])
                    ax.plot(
                        [r["step"] for r in log],
                        [r[key] for r in log],
                        color=COLORS[m],
                        marker="o",
                        ms=3,
                        label=f"{NAMES[m]} (mean of seeds)",
                    )
            ax.set_title(f"{SIDE_NAMES[side]}, {mode}: {key.removeprefix('eval/')}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=8)
            if i == len(rows) - 1:
                ax.set_xlabel("GRPO step", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(
        "ProtoQA dev, held-out respondents: thin lines = seeds, band = 95% CI over questions", fontsize=10
    )
    fig.tight_layout()
    with atomic_write(A / "curves.png") as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    mode, key = primary
    plot_curves(
        [curves[(m, "valid", mode, key)] for m in methods],
        A / "reach.png",
        reach=S["reach"]["valid"][mode][key]["pooled"],
        title=f"validation half, {mode} {key.removeprefix('eval/')}: ReMaRk reaching Rank-GRPO's final value",
    )
    if S.get("warmup"):
        fig = Figure(figsize=(9, 3.4))
        axes = fig.subplots(1, 2, squeeze=False)[0]
        for ax, key in zip(axes, KEYS, strict=True):
            for mode, style in (("greedy", "--"), ("sampled", "-")):
                pts = S["warmup"][mode]
                x = [p["step"] for p in pts]
                y = [100 * p["values"][key]["mean"] for p in pts]
                lo = [100 * p["values"][key]["ci_low"] for p in pts]
                hi = [100 * p["values"][key]["ci_high"] for p in pts]
                ax.plot(x, y, style, marker="o", ms=3, color="tab:green", label=f"{mode} lists")
                ax.fill_between(x, lo, hi, color="tab:green", alpha=0.12 if mode == "sampled" else 0.06, lw=0)
            ax.set_title(f"warm-up (noisy SFT), validation half: {key.removeprefix('eval/')} (%)", fontsize=9)
            ax.set_xlabel("SFT step", fontsize=8)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=8)
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        with atomic_write(A / "warmup.png") as tmp:
            fig.savefig(tmp, format="png", dpi=90)


# -- report ---------------------------------------------------------------------------------------------
def pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}"


def cell(d: dict[str, float]) -> str:
    m, lo, hi = d["mean"], d.get("ci_low", math.nan), d.get("ci_high", math.nan)
    return f"{100 * m:.2f}" if math.isnan(lo) else f"{100 * m:.2f} [{100 * lo:.2f}, {100 * hi:.2f}]"


def dcell(d: dict[str, float]) -> str:
    return f"{100 * d['mean']:+.2f} [{100 * d['ci_low']:+.2f}, {100 * d['ci_high']:+.2f}]"


def rcell(r: dict[str, Any]) -> str:
    f, lo, hi = r["fraction"], r["ci_low"], r["ci_high"]
    if not math.isfinite(f):
        return f"not reached (target {100 * r['baseline_value']:.2f})"
    his = "never" if not math.isfinite(hi) else f"{hi:.2f}"
    return (
        f"{f:.2f} [{lo:.2f}, {his}] (step {r['step']:.0f} of {r['baseline_step']}; "
        f"target {100 * r['baseline_value']:.2f})"
    )


def markdown(S: dict[str, Any]) -> str:
    L: list[str] = []
    seeds = S["seeds"]
    rows = [f"seed {s}" for s in seeds] + ["pooled"]
    short = {k: k.removeprefix("eval/") for k in (*KEYS, *MORE_KEYS)}
    L += [
        "Sides: the held-out respondents of every question are split into a validation half (best-step "
        "choice, steps-to-reach as asked) and a test half (reported; unbiased by the choice). "
        f"Best step = best {S['primary'][0]} {short[S['primary'][1]]} on the validation half.",
        "",
    ]
    if S.get("warmup"):
        L += ["## Warm-up (noisy SFT) on the validation half (%, 95% BCa CI)", ""]
        L += [
            "| SFT step | "
            + " | ".join(f"{m} {short[k]}" for m in MODES for k in KEYS)
            + " | distinct/list (sampled) |"
        ]
        L += ["|---|" + "---|" * (2 * len(KEYS) + 1)]
        for i, p in enumerate(S["warmup"]["greedy"]):
            q = S["warmup"]["sampled"][i]
            vals = [cell(p["values"][k]) for k in KEYS] + [cell(q["values"][k]) for k in KEYS]
            L.append(
                f"| {p['step']} | " + " | ".join(vals) + f" | {q['values']['list/distinct']['mean']:.2f} |"
            )
        L.append("")
    for side in S["sides"]:
        L += [f"## Levels on the {SIDE_NAMES[side]} (%, 95% BCa CI over questions for the pooled rows)", ""]
        for mode in MODES:
            L += [
                f"### {mode} lists",
                "",
                "| method | step | " + " | ".join(short[k] for k in KEYS) + " | distinct/list |",
            ]
            L += ["|---|---|" + "---|" * (len(KEYS) + 1)]
            for m in S["methods"]:
                for tag in ("start", "final", "best"):
                    lv = S["levels"][side][mode][m]["pooled"][tag]
                    L.append(
                        f"| {NAMES[m]} (pooled) | {tag} {lv['step']} | "
                        + " | ".join(cell(lv["values"][k]) for k in KEYS)
                        + f" | {lv['values']['list/distinct']['mean']:.2f} |"
                    )
                for s in seeds:
                    for tag in ("final", "best"):
                        lv = S["levels"][side][mode][m][f"seed {s}"][tag]
                        L.append(
                            f"| {NAMES[m]} seed {s} | {tag} {lv['step']} | "
                            + " | ".join(pct(lv["values"][k]["mean"]) for k in KEYS)
                            + f" | {lv['values']['list/distinct']['mean']:.2f} |"
                        )
            L.append("")
    for tag in ("final", "best"):
        for side in S["sides"]:
            L += [
                f"## ReMaRk - Rank-GRPO at the {tag} step, {SIDE_NAMES[side]} (points, paired over questions, "
                "95% BCa CI)",
                "",
            ]
            for mode in MODES:
                keys = (*KEYS, *MORE_KEYS)
                L += [f"### {mode} lists", "", "| | " + " | ".join(short[k] for k in keys) + " |"]
                L += ["|---|" + "---|" * len(keys)]
                for r in rows:
                    d = S["paired"][tag][side][mode][r]
                    steps = f" (steps {d['steps'][0]} vs {d['steps'][1]})" if tag == "best" else ""
                    L.append(f"| {r}{steps} | " + " | ".join(dcell(d[k]) for k in keys) + " |")
                L.append("")
    main = S["main_side"]
    L += [f"## By source, final step, pooled over seeds, {SIDE_NAMES[main]} (points, paired, 95% BCa CI)", ""]
    for mode in MODES:
        L += [f"### {mode} lists", "", "| source | questions | " + " | ".join(short[k] for k in KEYS) + " |"]
        L += ["|---|---|" + "---|" * len(KEYS)]
        for src, d in S["by_source"][mode].items():
            L.append(f"| {src} | {d['n_requests']} | " + " | ".join(dcell(d[k]) for k in KEYS) + " |")
        L.append("")
    for side in S["sides"]:
        L += [
            f"## Steps-to-reach, {SIDE_NAMES[side]}: first step at which ReMaRk reaches Rank-GRPO's final "
            "value, as a fraction of the final step (95% percentile CI over questions)",
            "",
        ]
        L += ["| metric | " + " | ".join(rows) + " |", "|---|" + "---|" * len(rows)]
        for mode in MODES:
            for k in KEYS:
                L.append(
                    f"| {mode} {short[k]} | "
                    + " | ".join(rcell(S["reach"][side][mode][k][r]) for r in rows)
                    + " |"
                )
        L.append("")
        L += ["Reverse (Rank-GRPO reaching ReMaRk's final value), primary metric:", ""]
        L.append("| " + " | ".join(rows) + " |")
        L.append("|" + "---|" * len(rows))
        L.append("| " + " | ".join(rcell(S["reach_reverse"][side][r]) for r in rows) + " |")
        L.append("")
    L += ["## Training diagnostics (mean over logged steps; first -> last)", ""]
    L += ["| run | " + " | ".join(TRAIN_KEYS) + " |", "|---|" + "---|" * len(TRAIN_KEYS)]
    for name, t in S["train"].items():
        L.append(
            f"| {name} | "
            + " | ".join(
                f"{t[k]['mean']:.3g} ({t[k]['first']:.3g} -> {t[k]['last']:.3g})" if k in t else "-"
                for k in TRAIN_KEYS
            )
            + " |"
        )
    L.append("")
    L += ["## Wall times and load", ""]
    L += [
        "| run | wall (s) | train (s) | validation (s) | CPU s / wall s | peak RSS (MB) |",
        "|---|---|---|---|---|---|",
    ]
    for name, t in S["timings"]["runs"].items():
        L.append(
            f"| {name} | {t['wall_s']:.0f} | {t['train_s']:.0f} | {t['eval_s']:.0f} | "
            f"{t['cpu_s'] / t['wall_s']:.2f} | {t['peak_rss_mb']:.0f} |"
        )
    L.append("")
    L.append("```")
    L.append(json.dumps({k: v for k, v in S["timings"].items() if k != "runs"}, indent=1))
    L.append("```")
    return "\n".join(L) + "\n"


# -- main ---------------------------------------------------------------------------------------------
def analyze(cfg: dict[str, Any], out: Path) -> dict[str, Any]:
    if set(cfg["methods"]) != {"remark", "rank_grpo"}:
        raise ValueError(f"the analysis compares methods remark and rank_grpo, got {sorted(cfg['methods'])}")
    methods = ["remark", "rank_grpo"]
    seeds = list(cfg["seeds"])
    A = out / "analysis"
    A.mkdir(parents=True, exist_ok=True)
    n_res = int(cfg.get("analysis", {}).get("n_resamples", 9999))
    ci = BootstrapConfig(n_resamples=n_res)
    primary = tuple(cfg["analysis"]["primary"])
    sources = json.loads((out / "data" / "sources.json").read_text())
    run0 = out / "runs" / f"{methods[0]}_s{seeds[0]}"
    sides = [s for s in SIDES if (side_dir(run0, s, "greedy") / "eval_log.jsonl").is_file()]
    main = "test" if "test" in sides else "valid"

    dirs: dict[tuple[str, str, str, str], Path] = {}
    for side in sides:
        for mode in MODES:
            for m in methods:
                for s in seeds:
                    dirs[(m, side, mode, f"seed {s}")] = side_dir(out / "runs" / f"{m}_s{s}", side, mode)
                dirs[(m, side, mode, "pooled")] = build_pooled(
                    [dirs[(m, side, mode, f"seed {s}")] for s in seeds], A / "pooled" / side / m / mode
                )
    rows = [f"seed {s}" for s in seeds] + ["pooled"]
    S: dict[str, Any] = {
        "methods": methods,
        "seeds": seeds,
        "primary": primary,
        "sides": sides,
        "main_side": main,
        "ci": ci.as_dict(),
    }

    # best steps: by the primary metric on the validation half, per run (every table uses the same step)
    best = {(m, r): best_step(dirs[(m, "valid", primary[0], r)], primary[1]) for m in methods for r in rows}
    final = {(m, r): final_step(dirs[(m, "valid", MODES[0], r)]) for m in methods for r in rows}
    S["best_steps"] = {f"{NAMES[m]} {r}": best[(m, r)] for m in methods for r in rows}

    S["levels"] = {side: {mode: {m: {} for m in methods} for mode in MODES} for side in sides}
    for side in sides:
        for mode in MODES:
            for m in methods:
                for r in rows:
                    d = dirs[(m, side, mode, r)]
                    steps = {"start": 0, "final": final[(m, r)], "best": best[(m, r)]}
                    tags = steps if r == "pooled" else {"final": steps["final"], "best": steps["best"]}
                    keys = KEYS + MORE_KEYS if r == "pooled" else KEYS
                    S["levels"][side][mode][m][r] = {
                        tag: {"step": st, "values": level(d, st, keys, ci)} for tag, st in tags.items()
                    }
    S["paired"] = {"final": {}, "best": {}}
    for tag, which in (("final", final), ("best", best)):
        for side in sides:
            S["paired"][tag][side] = {}
            for mode in MODES:
                S["paired"][tag][side][mode] = {}
                for r in rows:
                    a, b = ("remark", r), ("rank_grpo", r)
                    d = paired(
                        dirs[("remark", side, mode, r)],
                        which[a],
                        dirs[("rank_grpo", side, mode, r)],
                        which[b],
                        KEYS + MORE_KEYS,
                        ci,
                    )
                    d["steps"] = [which[a], which[b]]
                    S["paired"][tag][side][mode][r] = d
    S["by_source"] = {}
    for mode in MODES:
        S["by_source"][mode] = {}
        for src in ("scraped", "crowdsourced"):
            ids = sorted(k for k, v in sources.items() if v == src)
            if ids:
                S["by_source"][mode][src] = paired(
                    dirs[("remark", main, mode, "pooled")],
                    final[("remark", "pooled")],
                    dirs[("rank_grpo", main, mode, "pooled")],
                    final[("rank_grpo", "pooled")],
                    KEYS,
                    ci,
                    ids,
                )
    S["reach"] = {side: {mode: {k: {} for k in KEYS} for mode in MODES} for side in sides}
    S["reach_reverse"] = {}
    for side in sides:
        for mode in MODES:
            for k in KEYS:
                for r in rows:
                    S["reach"][side][mode][k][r] = reach(
                        dirs[("remark", side, mode, r)],
                        dirs[("rank_grpo", side, mode, r)],
                        k,
                        final[("rank_grpo", r)],
                        n_res,
                    )
        S["reach_reverse"][side] = {
            r: reach(
                dirs[("rank_grpo", side, primary[0], r)],
                dirs[("remark", side, primary[0], r)],
                primary[1],
                final[("remark", r)],
                n_res,
            )
            for r in rows
        }
    S["warmup"] = warmup(out, ci)
    S["train"] = {
        f"{NAMES[m]} seed {s}": train_summary(out / "runs" / f"{m}_s{s}") for m in methods for s in seeds
    }

    runs_t = {}
    for m in methods:
        for s in seeds:
            p = out / "runs" / f"{m}_s{s}" / "done.json"
            if p.is_file():
                runs_t[f"{NAMES[m]} seed {s}"] = json.loads(p.read_text())
    timings: dict[str, Any] = {"runs": runs_t}
    for name, p in (("data", out / "data" / "done.json"), ("sft", out / "sft_model" / "done.json")):
        if p.is_file():
            t = json.loads(p.read_text())
            timings[name] = {
                k: t[k]
                for k in ("wall_s", "cpu_s", "peak_rss_mb", "examples", "n_params", "eval_s")
                if k in t
            }
    inv = out / "timings.jsonl"  # one line per run.py invocation (a re-run that reuses everything is short)
    if inv.is_file():
        timings["invocations"] = [json.loads(x) for x in inv.read_text().splitlines() if x.strip()]
    timings["load1_during_run"] = load_summary(out / "load.jsonl")
    S["timings"] = timings

    curves = {}
    for side in sides:
        for mode in MODES:
            for m in methods:
                for k in KEYS:
                    curves[(m, side, mode, k)] = validation_curve(
                        dirs[(m, side, mode, "pooled")], k, name=f"{NAMES[m]} (mean of seeds)"
                    )
    plot_all(out, S, curves, dirs)

    with atomic_write(A / "summary.json") as tmp:
        tmp.write_text(json.dumps(S, indent=1, default=float) + "\n")
    with atomic_write(A / "results.md") as tmp:
        tmp.write_text(markdown(S))
    return S
