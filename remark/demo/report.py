"""``report.md`` from ``summary.json``: headline, tables with CIs, steps-to-reach sentences, notes.

Everything here reads the summary only (no files, no models), so a report can be rebuilt from a saved
``summary.json``; the notes are computed from the numbers, nothing is hand-written per run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from remark.demo.settings import METHODS


def _num(x: Any) -> float:
    """A summary number (None stands for NaN/inf in the JSON) as a float."""
    return float("nan") if x is None else float(x)


def _cell(cell: dict[str, Any] | None, scale: float = 1.0, digits: int = 3) -> str:
    if not cell or not math.isfinite(_num(cell.get("mean"))):
        return "n/a"
    m, lo, hi = (_num(cell[k]) * scale for k in ("mean", "ci_low", "ci_high"))
    ci = f" [{lo:.{digits}f}, {hi:.{digits}f}]" if math.isfinite(lo) and math.isfinite(hi) else ""
    return f"{m:.{digits}f}{ci}"


def _reach_sentence(a: str, b: str, reach: dict[str, Any], start: float) -> str:
    """One steps-to-reach result as a sentence; ``start`` is the shared step-0 value of both runs."""
    target = _num(reach["baseline_value"])
    what = f"{b}'s step-{reach['baseline_step']} value ({target:.3f})"
    if not reach.get("reached"):
        return f"{a} did not reach {what} within the run."
    f, lo, hi = _num(reach["fraction"]), _num(reach["ci_low"]), _num(reach["ci_high"])
    hi_s = "never, in some resamples" if not math.isfinite(hi) else f"{hi:.0%}"
    ci = f" (95% CI [{lo:.0%}, {hi_s}])" if math.isfinite(lo) else ""
    text = f"{a} reached {what} in {f:.0%} of the steps (step {_num(reach['step']):.1f}){ci}."
    if math.isfinite(start) and target <= start:
        text += f" The target is not above the shared start ({start:.3f}), so this says nothing about speed."
    return text


def _headline(summary: dict[str, Any]) -> list[str]:
    """The result in a few sentences, from the primary (first) validation metric and the test split."""
    if not summary["steps_to_reach"]:
        return []
    lists, reach = next(iter(summary["steps_to_reach"].items()))
    curves = summary["curves"][lists]
    k = summary["settings"]["k"]
    a, b = curves["remark"], curves["rank_grpo"]
    r1 = reach["remark_reaches_rank_grpo"]
    text = (
        f"**In short.** Validation per-responder recall@{k} of {lists} lists went {_num(a['mean'][0]):.3f} -> "
        f"{_num(a['mean'][-1]):.3f} with ReMaRk and {_num(b['mean'][0]):.3f} -> {_num(b['mean'][-1]):.3f} with "
        f"Rank-GRPO in {summary['settings']['steps']} steps; "
        + _reach_sentence("ReMaRk", "Rank-GRPO", r1, _num(a["mean"][0]))
    )
    cell = summary["paired"]["remark_vs_rank_grpo"].get(lists, {}).get("per_responder", {}).get(f"recall@{k}")
    if cell:
        text += (
            f" On the test split, ReMaRk - Rank-GRPO = {_points(cell)} ({lists} lists, best checkpoints): "
            f"{_verdict(cell, 'ReMaRk', 'Rank-GRPO')}."
        )
    return [text, ""]


def report_markdown(summary: dict[str, Any]) -> str:
    """The demo's ``report.md`` from its ``summary.json``."""
    s = summary["settings"]
    k = s["k"]
    names = {"sft": "SFT start", **{m: METHODS[m][0] for m in METHODS}}
    ev = summary["test"]
    views = ("per_responder", "union", "single_mention")
    lines = [
        f"# remark demo: ReMaRk vs Rank-GRPO on {summary['data']['description']}",
        "",
        f"Finished in {summary['timing']['total_s'] / 60:.1f} min on {summary['machine']['cpus']} CPU cores "
        f"(load average {summary['machine']['load_start']:.1f} at the start, "
        f"{summary['machine']['load_end']:.1f} at the end); seed {s['seed']}"
        + (" -- **fast mode: tiny settings, numbers are meaningless**" if s["fast"] else "")
        + ".",
        "",
        *_headline(summary),
        "## What ran",
        "",
        f"- Data: {summary['data']['description']}; {summary['data']['stats_line']}.",
        f"- Model: Qwen2, {summary['model']['parameters'] / 1e6:.2f}M parameters (hidden {s['hidden_size']}, "
        f"{s['num_hidden_layers']} layers, FFN {s['intermediate_size']}), byte-level BPE tokenizer "
        f"({summary['model']['vocab']} tokens), both built locally.",
        f"- SFT warm-up: `{s['sft_targets']}` targets, {summary['sft']['steps']} steps, lr {s['sft_lr']:g} cosine, "
        f"batch {s['sft_batch']}; loss {summary['sft']['first_loss']:.3f} -> {summary['sft']['final_loss']:.3f}.",
        f"- RL, both methods from that warm-up: {s['steps']} steps, {s['prompts_per_step']} prompts x "
        f"G = {s['num_generations']} lists per step, K = {k}, lr {s['learning_rate']:g} constant, beta 0, "
        f"loss bnpo, per-rank group scaling, cap {s['max_completion_length']} tokens. "
        "ReMaRk: union rewards, requests sampled uniformly; Rank-GRPO: one responder's items, "
        "(request, responder) rows sampled.",
        f"- Validation every {s['validation_every']} steps on the valid split (greedy lists"
        + (
            f" and {s['validation_samples']} sampled lists per request, T = 1"
            if s["validation_samples"]
            else ""
        )
        + "); best checkpoint by "
        f"`{summary['metric']}`; final numbers on the test split ({ev['sft']['greedy']['n_requests']} "
        f"requests), greedy and {s['eval_samples']} sampled lists per request (T = 1); 95% BCa bootstrap CIs "
        f"over requests ({s['ci_resamples']} resamples).",
        "",
        f"## Test split: recall@{k}",
        "",
        "| model | best step | lists | " + " | ".join(views) + " | distinct items / list |",
        "|---|---|---|" + "---|" * len(views) + "---|",
    ]
    for name in ("sft", *METHODS):
        for lists in ("greedy", "sampled"):
            res = ev[name].get(lists)
            if res is None:
                continue
            step = "-" if name == "sft" else str(summary["runs"][name]["best_step"])
            cells = [_cell(res.get(v, {}).get(f"recall@{k}")) for v in views]
            lines.append(
                f"| {names[name]} | {step} | {lists} | "
                + " | ".join(cells)
                + f" | {res['lists']['distinct_mean']:.2f} |"
            )
    lines += ["", "## Paired differences on the same test requests (points of recall, x100)", ""]
    lines += ["| comparison | lists | " + " | ".join(views) + " |", "|---|---|" + "---|" * len(views)]
    for label, key in (
        ("ReMaRk - Rank-GRPO", "remark_vs_rank_grpo"),
        ("ReMaRk - SFT start", "remark_vs_sft"),
        ("Rank-GRPO - SFT start", "rank_grpo_vs_sft"),
    ):
        for lists, diff in summary["paired"][key].items():
            cells = [_cell(diff.get(v, {}).get(f"recall@{k}"), 100.0, 2) for v in views]
            lines.append(f"| {label} | {lists} | " + " | ".join(cells) + " |")
    lines += ["", "## Steps to reach and validation curves", ""]
    lines += [
        "Steps-to-reach: the first validation step (interpolated) at which one method reaches the other's "
        "value at its last step, as a fraction of the run; percentile bootstrap over validation requests "
        "(the whole curve and the target resampled together). An open upper end means some resamples never "
        "reach the target.",
    ]
    for lists, reach in summary["steps_to_reach"].items():
        r1, r2 = reach["remark_reaches_rank_grpo"], reach["rank_grpo_reaches_remark"]
        curves = summary["curves"][lists]
        first = curves["remark"]
        start = _num(first["mean"][0]) if first["x"] and first["x"][0] == 0 else float("nan")
        lines += [
            "",
            f"### {lists.capitalize()} lists: `{reach['metric']}` ({r1.get('n_requests')} validation requests)",
            "",
            "- " + _reach_sentence("ReMaRk", "Rank-GRPO", r1, start),
            "- " + _reach_sentence("Rank-GRPO", "ReMaRk", r2, start),
            "",
            f"![validation curves, {lists} lists]({summary['files']['plots'][lists]})",
            "",
            "| step | " + " | ".join(names[m] for m in METHODS) + " |",
            "|---|" + "---|" * len(METHODS),
        ]
        for st in sorted({int(x) for m in METHODS for x in curves[m]["x"]}):
            row = []
            for m in METHODS:
                c = curves[m]
                if st not in c["x"]:
                    row.append("-")
                    continue
                i = c["x"].index(st)
                row.append(_cell({"mean": c["mean"][i], "ci_low": c["low"][i], "ci_high": c["high"][i]}))
            lines.append(f"| {st} | " + " | ".join(row) + " |")
    lines += [
        "",
        "## Training signal",
        "",
        "| method | training reward, first 10 steps -> last 10 steps | zero-signal groups |",
        "|---|---|---|",
    ]
    for m in METHODS:
        d = summary["runs"][m]["train"]
        zs = d["zero_signal_frac_mean"]
        lines.append(
            f"| {names[m]} | {_num(d['reward_first']):.2f} -> {_num(d['reward_last']):.2f} | "
            + (f"{zs:.0%} |" if zs is not None else "n/a |")
        )
    lines += [
        "",
        "The training reward is each method's own (the sum over ranks of its rank rewards: union hits for "
        "ReMaRk, the drawn responder's hits for Rank-GRPO), so it is comparable within a row, not across rows. "
        "A zero-signal group is one where all G lists got the same rank rewards: it teaches nothing. "
        "Rank-GRPO scores a list against one responder's few items, so more of its groups are flat (docs/references.md#remark-the-method-remark-is-named-for).",
        "",
        "## Timing",
        "",
        "| stage | seconds |",
        "|---|---|",
    ]
    for stage, sec in summary["timing"]["stages"].items():
        lines.append(f"| {stage} | {sec:.0f} |")
    mach = summary["machine"]
    rl = (
        "side by side (two processes, one torch thread each)"
        if s["parallel"]
        else f"one after the other ({mach['threads_per_rl_run']} torch threads)"
    )
    lines.append(
        f"\nSFT and evaluation with {mach['threads_in_process']} torch thread(s); RL runs {rl}. On 2 cores, "
        "two runs side by side took 0.7x the time of the two one after the other with 2 threads each (measured "
        "for 30 steps at load ~1.3: 35 s vs 49 s)."
    )
    lines += ["", "## Reading this honestly", "", *summary["notes"], ""]
    return "\n".join(lines)


def _verdict(cell: dict[str, Any], a: str, b: str) -> str:
    lo, hi = _num(cell["ci_low"]), _num(cell["ci_high"])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "no interval (too few requests)"
    if lo > 0:
        return f"{a} is ahead (the 95% CI excludes 0)"
    if hi < 0:
        return f"{b} is ahead (the 95% CI excludes 0)"
    return "not resolved (the 95% CI contains 0)"


def _points(cell: dict[str, Any]) -> str:
    m, lo, hi = (_num(cell[x]) * 100 for x in ("mean", "ci_low", "ci_high"))
    return f"{m:+.2f} points [{lo:+.2f}, {hi:+.2f}]"


def report_notes(summary: dict[str, Any]) -> list[str]:
    """Plain sentences for the end of the report, computed from the numbers (nothing hand-written)."""
    s = summary["settings"]
    key = f"recall@{s['k']}"
    notes = []
    for pair, a, b in (
        ("remark_vs_rank_grpo", "ReMaRk", "Rank-GRPO"),
        ("remark_vs_sft", "ReMaRk", "the SFT start"),
        ("rank_grpo_vs_sft", "Rank-GRPO", "the SFT start"),
    ):
        for lists in ("sampled", "greedy"):
            cell = summary["paired"][pair].get(lists, {}).get("per_responder", {}).get(key)
            if cell:
                notes.append(
                    f"- Test per-responder {key}, {lists} lists: {a} - {b} = {_points(cell)}: "
                    f"{_verdict(cell, a, b)}."
                )
    lists = next(iter(summary["curves"]), None)
    for m in METHODS if lists else ():
        c = summary["curves"][lists][m]
        means = [_num(v) for v in c["mean"]]
        best = int(np.nanargmax(means)) if means and not all(math.isnan(v) for v in means) else None
        if best is not None and means[best] - means[-1] > max(0.005, 0.1 * (means[best] - means[0])):
            notes.append(
                f"- {METHODS[m][0]}'s {lists} validation peaked at step {c['x'][best]} ({means[best]:.3f}) and "
                f"ended at {means[-1]:.3f}: the tested checkpoint is the best one, not the last "
                "(docs/experiments.md#how-runs-are-compared: a run is judged at its best validation checkpoint)."
            )
    zs = {m: summary["runs"][m]["train"]["zero_signal_frac_mean"] for m in METHODS}
    if all(v is not None for v in zs.values()):
        notes.append(
            f"- Flat groups (all {s['num_generations']} lists scored the same, no learning signal): "
            f"{zs['rank_grpo']:.0%} of Rank-GRPO's, {zs['remark']:.0%} of ReMaRk's: the responder draw at work."
        )
    notes += [
        "- One seed and one warm-up with a ~1M-parameter model: this shows the pipeline and the direction of "
        "the effect at toy scale, not the paper's numbers. The CIs resample requests, not seeds, so seed-to-seed "
        "spread is not in them (experiments/protoqa_cpu runs several seeds).",
        "- Greedy lists of a tiny model repeat items (docs/experiments.md, pitfall 1; see the distinct-items "
        "column), so RL can lower greedy recall while it raises sampled recall: the sampled rows are the "
        "primary ones, chosen before running.",
        "- Each method's best checkpoint is chosen on the validation split by Rank-GRPO's headline metric "
        "(per-responder recall) and tested on a separate split.",
    ]
    return notes
