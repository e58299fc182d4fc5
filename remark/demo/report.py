"""``report.md`` from ``summary.json``: the test result and its verdict first, then steps-to-reach, tables.

Everything here reads the summary only (no files, no models), so a report can be rebuilt from a saved
``summary.json``; the notes are computed from the numbers, nothing is hand-written per run.

Two intervals stand beside every seed-averaged number, and the report says what each covers: the
t-interval over RL seeds (what varies between training runs from the same warm-up, on these test
requests) and the bootstrap over test requests (what varies between requests, for these runs). A
difference is called resolved only when both exclude 0 on the same side.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from catalog.io.versions import versions_line
from remark.demo.settings import METHODS

LABELS = {"sft": "SFT start", **{m: METHODS[m][0] for m in METHODS}}
PAIR_LABELS = {
    "remark_vs_rank_grpo": ("ReMaRk", "Rank-GRPO"),
    "remark_vs_sft": ("ReMaRk", "the SFT start"),
    "rank_grpo_vs_sft": ("Rank-GRPO", "the SFT start"),
}
VIEWS = ("per_responder", "union", "single_mention")


def _num(x: Any) -> float:
    """A summary number (None stands for NaN/inf in the JSON) as a float."""
    return float("nan") if x is None else float(x)


def _seed_range(seeds: dict[str, Any]) -> str:
    """``min to max`` over seeds, or n/a where the metric has no value (a view the data cannot score)."""
    lo, hi = _num(seeds.get("min")), _num(seeds.get("max"))
    return f"{lo:.3f} to {hi:.3f}" if math.isfinite(lo) and math.isfinite(hi) else "n/a"


def _cell(cell: dict[str, Any] | None, scale: float = 1.0, digits: int = 3, sign: bool = False) -> str:
    if not cell or not math.isfinite(_num(cell.get("mean"))):
        return "n/a"
    m, lo, hi = (_num(cell[k]) * scale for k in ("mean", "ci_low", "ci_high"))
    f = f"+.{digits}f" if sign else f".{digits}f"
    ci = f" [{lo:{f}}, {hi:{f}}]" if math.isfinite(lo) and math.isfinite(hi) else ""
    return f"{m:{f}}{ci}"


def _side(cell: dict[str, Any]) -> int:
    """+1 / -1 when the interval excludes 0 above / below, 0 when it contains 0 or does not exist."""
    lo, hi = _num(cell.get("ci_low")), _num(cell.get("ci_high"))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return 0
    return 1 if lo > 0 else -1 if hi < 0 else 0


def resolution(diff: dict[str, Any]) -> int | None:
    """The one meaning of "resolved" (``eval.verdicts.verdict``): +1 / -1 when the difference is resolved
    above / below 0, 0 when not, None when there is no verdict (fewer than three RL seeds).

    Resolved needs at least three seeds, and the t-interval over seeds *and* the paired sign-flip test over
    requests both excluding no difference, in the mean's direction; the bootstrap intervals over requests
    are reported beside it, not voted. The headline (:func:`headline_block`), the README table and every
    verdict sentence read this function. A cell without the verdict figures (a view other than the
    headline's) gets the same rule from its seed interval alone, and no verdict below three seeds.
    """
    if "verdict" in diff:
        return diff["verdict"]["resolved"]
    seeds = diff["seeds"]
    if (seeds.get("n") or 0) < 3:
        return None
    return _side(seeds)


def verdict(diff: dict[str, Any], a: str, b: str) -> str:
    """:func:`resolution` in words, with the figures that decided it."""
    side = resolution(diff)
    v = diff.get("verdict")
    figures = ""
    if v:
        p = _num(v["sign_flip"]["p"])
        figures = (
            f"; sign-flip test over requests p = {p:.3f}, requests ahead / level / behind "
            f"{v['wins']} / {v['ties']} / {v['losses']}, percentile interval "
            f"{_cell({'mean': v['mean'], **v['percentile']}, 100, 2, True)}, the five most influential "
            f"requests carry {_num(v['top_influence']['share']):.0%} of the difference"
        )
    if side is None:
        return f"**no verdict** (fewer than three RL seeds{figures})"
    if side:
        return (
            f"**resolved: {a if side > 0 else b} is ahead** (the t-interval over seeds and the sign-flip test "
            f"both exclude no difference{figures})"
        )
    return f"**not resolved** (the t-interval over seeds or the sign-flip test does not exclude 0{figures})"


def _points_line(diff: dict[str, Any], a: str, b: str, lists: str, k: int, n_req: int) -> str:
    seeds, reqs = diff["seeds"], diff["requests"]
    per_seed = ", ".join(f"{100 * v:+.2f}" for v in seeds["values"])
    if seeds["n"] == 1:
        return (
            f"{a} - {b}, test per-responder recall@{k} of {lists} lists: **{100 * _num(reqs['mean']):+.2f} "
            f"points** (one RL seed); 95% bootstrap interval over the {n_req} test requests "
            f"{_cell(reqs, 100, 2, True)} (what varies between requests, for this run; not training "
            f"variance). {verdict(diff, a, b)}."
        )
    return (
        f"{a} - {b}, test per-responder recall@{k} of {lists} lists: **{100 * _num(reqs['mean']):+.2f} points** "
        f"(mean of {seeds['n']} RL seeds; per seed {per_seed}; SD {100 * _num(seeds['sd']):.2f}). "
        f"95% interval over seeds {_cell(seeds, 100, 2, True)} (t, {seeds['n'] - 1} df: what varies between "
        f"training runs from this warm-up); 95% bootstrap interval over the {n_req} test requests "
        f"{_cell(reqs, 100, 2, True)} (what varies between requests, for these runs). {verdict(diff, a, b)}."
    )


TARGET_TEXT = {"final": "final", "best": "best"}


def _reach_sentence(a: str, b: str, reach: dict[str, Any], start: float, pooled: bool) -> str:
    target_name = TARGET_TEXT[reach.get("target", "final")]
    if reach.get("undefined"):
        return f"Against {b}'s {target_name} validation value: undefined ({reach['undefined']})."
    target = _num(reach["baseline_value"])
    whose = f"{b}'s {target_name} validation value (step {reach['baseline_step']}" + (
        ", mean of seeds)" if pooled else ")"
    )
    what = f"{whose}, {target:.3f},"
    if not reach.get("reached"):
        return f"{a} did not reach {what} within the run."
    f, lo, hi = _num(reach["fraction"]), _num(reach["ci_low"]), _num(reach["ci_high"])
    hi_s = "never, in some resamples" if not math.isfinite(hi) else f"{hi:.0%}"
    ci = f" (95% CI over validation requests [{lo:.0%}, {hi_s}])" if math.isfinite(lo) else ""
    text = f"{a} reached {what} at step {_num(reach['step']):.1f}, {f:.0%} of {b}'s steps to it{ci}."
    if math.isfinite(start) and target <= start:
        text += f" The target is not above the shared start ({start:.3f}), so this says nothing about speed."
    return text


def _headline(summary: dict[str, Any]) -> list[str]:
    s = summary["settings"]
    k = s["k"]
    seeds = summary["across_seeds"]["paired"]["remark_vs_rank_grpo"]
    n_req = summary["test"]["sft"]["greedy"]["n_requests"]
    lines = ["## Result on the test split", ""]
    first = next((lists for lists in ("sampled", "greedy") if lists in seeds), None)
    for lists in ("sampled", "greedy"):
        if lists in seeds:
            primary = " (primary: chosen before running)" if lists == "sampled" else ""
            lines += [
                f"- {lists.capitalize()} lists{primary}: "
                + _points_line(seeds[lists]["per_responder"], "ReMaRk", "Rank-GRPO", lists, k, n_req),
                "",
            ]
            if lists == first:
                lines += _without_outliers_lines(seeds[lists]["per_responder"], lists)
    lists = next(iter(summary["validation"]))
    v = summary["validation"][lists]
    start = _num(v["curves"]["remark"]["pooled"]["mean"][0])
    lines += _protocol_lines(summary)
    lines += _scale_lines(summary)
    lines += ["## Steps to reach, on the validation questions", ""]
    for target, pooled in v["pooled"]["remark_reaches_rank_grpo"].items():
        per_seed = ", ".join(
            f"seed {name.removeprefix('seed')} " + _fraction_text(r["remark_reaches_rank_grpo"][target])
            for name, r in v["per_seed"].items()
        )
        lines += [
            f"- Against the {target} value ({lists} lists, per-responder recall@{k}, seed-averaged curves): "
            + _reach_sentence("ReMaRk", "Rank-GRPO", pooled, start, True)
            + f" Per seed: {per_seed}.",
        ]
    return [*lines, ""]


def _without_outliers_lines(diff: dict[str, Any], lists: str) -> list[str]:
    """The headline difference without the flagged test requests (``without_outliers`` of the cell,
    ``remark.demo.evaluation``): one line, or none when the cell has no such key or it is None."""
    w = diff.get("without_outliers")
    if not w:
        return []
    ids, n, rule = ", ".join(w["removed"]), w["n_removed"], w.get("rule", "data_prep.outliers")
    return [
        f"- Without the {n} flagged test request{'s' if n != 1 else ''} ({ids}; rule: {rule}), "
        f"{lists} lists: ReMaRk - Rank-GRPO {_cell(w['requests'], 100, 2, True)} points; "
        f"{verdict(w, 'ReMaRk', 'Rank-GRPO')}.",
        "",
    ]


def _fraction_text(reach: dict[str, Any]) -> str:
    if reach.get("undefined"):
        return "undefined"
    return f"{_num(reach['fraction']):.0%}" if reach["reached"] else "not reached"


def headline_block(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary.json``'s ``headline``: ReMaRk - Rank-GRPO on the test split, in points of the primary metric.

    The primary lists are the sampled ones (greedy when the demo validates on greedy lists only); levels
    and the difference are seed means; ``ci`` is the 95% BCa bootstrap interval over test requests of the
    seed-averaged difference (``eval.seeds.pooled_difference``: which questions were drawn, for these runs).
    ``verdict`` and ``resolved`` follow the one rule (:func:`resolution`, ``eval.verdicts.verdict``): at
    least three seeds, and the t-interval over seeds and the sign-flip test over requests both exclude no
    difference; ``resolved`` is None with fewer than three seeds (no verdict). ``figures`` holds what the
    verdict rests on and what stands beside it (percentile interval, sign-flip p, requests ahead / level /
    behind, question-macro mean, the five most influential requests' share).
    """
    s = summary["settings"]
    lists = "sampled" if s["validation_samples"] else "greedy"
    models = summary["across_seeds"]["models"]
    d = summary["across_seeds"]["paired"]["remark_vs_rank_grpo"][lists]["per_responder"]
    reqs, seeds = d["requests"], d["seeds"]
    lo, hi = _num(reqs["ci_low"]), _num(reqs["ci_high"])
    n_seeds, n_req = seeds["n"], summary["test"]["sft"]["greedy"]["n_requests"]
    side = resolution(d)
    v = d.get("verdict") or {}
    block: dict[str, Any] = {
        "data": s["data"],
        "metric": f"test per-responder recall@{s['k']}, {lists} lists",
        "remark": _num(models["remark"][lists]["per_responder"]["requests"]["mean"]),
        "rank_grpo": _num(models["rank_grpo"][lists]["per_responder"]["requests"]["mean"]),
        "difference": 100 * _num(reqs["mean"]),
        "ci": [100 * lo, 100 * hi],
        "resolved": None if side is None else side != 0,
        "verdict": "no verdict (fewer than three RL seeds)"
        if side is None
        else ("resolved: " + ("ReMaRk" if side > 0 else "Rank-GRPO") + " ahead")
        if side
        else "not resolved",
        "interval": f"95% BCa bootstrap over the {n_req} test requests, for these runs",
        "resolved_means": "at least three RL seeds, and the t-interval over seeds and the paired sign-flip test "
        "over requests (p < 0.05) both exclude no difference, in the direction of the mean",
        "figures": {
            "percentile": [100 * _num(v["percentile"]["ci_low"]), 100 * _num(v["percentile"]["ci_high"])],
            "sign_flip_p": _num(v["sign_flip"]["p"]),
            "ahead_level_behind": [v["wins"], v["ties"], v["losses"]],
            "macro_mean": 100 * _num(v["macro_mean"]),
            "top5_share": _num(v["top_influence"]["share"]),
        }
        if v
        else None,
        "protocol": _protocol_block(summary),
        "seeds": {
            "n": n_seeds,
            "differences": [100 * x for x in seeds["values"]],
            "ci": [100 * _num(seeds["ci_low"]), 100 * _num(seeds["ci_high"])] if n_seeds > 1 else None,
        },
    }
    block["sentence"] = _headline_sentence(block, summary["data"]["description"], n_req)
    return block


def _headline_sentence(h: dict[str, Any], data: str, n_req: int) -> str:
    lo, hi = h["ci"]
    text = (
        f"On {data}: ReMaRk {h['remark']:.3f} vs Rank-GRPO {h['rank_grpo']:.3f} ({h['metric']}), a difference "
        f"of **{h['difference']:+.2f} points** (95% BCa interval over the {n_req} test requests "
        f"[{lo:+.2f}, {hi:+.2f}]"
    )
    f = h.get("figures")
    if f:
        a, t, b = f["ahead_level_behind"]
        text += (
            f"; percentile [{f['percentile'][0]:+.2f}, {f['percentile'][1]:+.2f}]; paired sign-flip test "
            f"p = {f['sign_flip_p']:.3f}; ReMaRk ahead on {a} questions, level on {t}, behind on {b}; "
            f"question-macro mean {f['macro_mean']:+.2f}; the five most influential questions carry "
            f"{f['top5_share']:.0%} of it"
        )
    text += ")"
    seeds = h["seeds"]
    if seeds["n"] > 1:
        per_seed = ", ".join(f"{v:+.2f}" for v in seeds["differences"])
        s_lo, s_hi = seeds["ci"]
        ci = f"[{s_lo:+.2f}, {s_hi:+.2f}]" if math.isfinite(s_lo) and math.isfinite(s_hi) else "n/a"
        text += f"; over {seeds['n']} RL seeds (per seed {per_seed}) the t-interval is {ci}"
    return text + f": **{h['verdict']}**."


def _level_text(name: str) -> str:
    from eval.baselines import LEVELS

    return LEVELS.get(name, name)


def _protocol_block(summary: dict[str, Any]) -> dict[str, Any]:
    """What makes the comparison hold: disjoint requests, and each method's rate chosen on validation."""
    ov = summary.get("split_overlap") or {}
    p = summary.get("protocol", {})
    tuning = p.get("tuning", {})
    return {
        "split": p.get("split"),
        "test_requests_in_train": ov.get("exact_prompt"),
        "near_duplicate_test_prompts": ov.get("near_duplicate_prompt"),
        "learning_rate": {
            m: {
                "grid": t["grid"],
                "validation": {f"{r['learning_rate']:g}": r["best_value"] for r in t["validation"]},
                "chosen": t["chosen"],
            }
            for m, t in tuning.items()
        },
    }


def _protocol_lines(summary: dict[str, Any]) -> list[str]:
    """The protocol in words: the split and its overlap check, the grid and the rates chosen on validation."""
    from eval.leakage import overlap_lines

    p = summary.get("protocol")
    if not p:
        return []
    k = summary["settings"]["k"]
    lines = ["## Protocol", ""]
    lines += [f"- Split {p['split']}. " + " ".join(overlap_lines(summary["split_overlap"]))]
    lines += [
        f"- Learning rate per method chosen on the validation questions (best validation value of "
        f"`{summary['metric']}` over a full run of {summary['settings']['steps']} steps, seed "
        f"{next(iter(p['tuning'].values()))['seed']}), written to `tuning.json` before the test questions were "
        "read; the test questions are read once, by the final evaluation:",
        "",
        "| method | " + " | ".join(f"lr {lr:g}" for lr in summary["settings"]["lr_grid"]) + " | chosen |",
        "|---|" + "---|" * (len(summary["settings"]["lr_grid"]) + 1),
    ]
    for m, t in p["tuning"].items():
        vals = [
            f"{_num(r['best_value']):.3f} (step {r['best_step']})" if r["best_value"] is not None else "n/a"
            for r in t["validation"]
        ]
        lines.append(f"| {LABELS[m]} | " + " | ".join(vals) + f" | {t['chosen']:g} |")
    lines += [
        "",
        f"(validation per-responder recall@{k}, the value that also picks each run's checkpoint)",
        "",
    ]
    return lines


def _scale_lines(summary: dict[str, Any]) -> list[str]:
    """The SFT start and both methods, greedy and sampled, beside the reference levels (``eval.baselines``)."""
    levels = summary.get("reference_levels")
    if not levels:
        return []
    k, ev, seeds = summary["settings"]["k"], summary["test"], summary["across_seeds"]["models"]
    ref = "; ".join(f"{n} ({_level_text(n)}) {_num(v['per_responder']):.3f}" for n, v in levels.items())
    got = "; ".join(
        f"{LABELS[m]} "
        + ", ".join(
            f"{lists} {_num(seeds[m][lists]['per_responder']['requests']['mean']):.3f}"
            for lists in ("sampled", "greedy")
            if lists in seeds[m]
        )
        for m in ("sft", *METHODS)
        if m in seeds
    )
    line = (
        f"For scale, test per-responder recall@{k} on the same {ev['sft']['greedy']['n_requests']} requests "
        f"and metric: {ref}. Models (seed means): {got}."
    )
    named = {n: _num(v["per_responder"]) for n, v in levels.items() if n != "seen_request"}
    strongest = summary.get("strongest_baseline") or {}
    best_name = strongest.get("name") if strongest.get("name") in named else None
    if best_name is not None:
        line += (
            f" The strongest simple baseline, chosen on the validation questions before the test was read, is "
            f"{best_name} ({_retrieval_text(strongest)}validation {_num(strongest['validation'][best_name]):.3f}"
            f", test {named[best_name]:.3f})."
        )
    sft = seeds.get("sft", {})
    start = {lists: _num(sft[lists]["per_responder"]["requests"]["mean"]) for lists in sft}
    below = best_name is not None and start.get("sampled", math.inf) < named[best_name]
    if below:
        line += (
            f" The SFT start's sampled lists ({start['sampled']:.3f}) are below the strongest simple baseline "
            f"({best_name} {named[best_name]:.3f}): on requests it never saw, the warm-up has not learned "
            "more than that baseline, and the comparison is between two ways of improving a weak start."
        )
        if start.get("greedy", -math.inf) >= named[best_name]:
            line += f" Its greedy lists ({start['greedy']:.3f}) are above it."
    return [line, ""]


def _retrieval_text(strongest: dict[str, Any]) -> str:
    """``tfidf_char over 3 neighbours; `` when the strongest baseline is the retrieval one, else nothing."""
    r = strongest.get("retrieval") or {}
    if strongest.get("name") != "retrieval" or not r:
        return ""
    return f"{r['variant']} over {r['neighbours']} neighbours; "


def readme_table(summary: dict[str, Any]) -> str:
    """The README's demo table: per-responder recall@K on each test set, baselines, the SFT start, both
    methods (seed means) and their difference, every cell with its 95% interval over test requests.
    ``tests/test_readme_demo.py`` compares the README with this table of the demo CI just ran."""
    k = summary["settings"]["k"]
    sets_by_name = {"test": summary} | {
        name: {
            "test": t["models"],
            "across_seeds": t["across_seeds"],
            "reference_levels": t["reference_levels"],
        }
        for name, t in summary.get("test_sets", {}).items()
    }
    sets = list(sets_by_name.values())
    names = {"test": "held-out scraped questions", "crowd": "crowdsourced questions"}
    header = ["row"] + [
        f"{names.get(n, n)} ({lists})" for n in sets_by_name for lists in ("sampled", "greedy")
    ]
    rows = [f"| {' | '.join(header)} |", "|---" * len(header) + "|"]
    level_names = list(summary.get("reference_levels") or {})
    for level in level_names:
        cells = []
        for t in sets:
            v = (t.get("reference_levels") or {}).get(level)
            cells += [f"{_num(v['per_responder']):.3f}" if v else "n/a"] * 2
        rows.append(f"| {level} | " + " | ".join(cells) + " |")
    for m in ("sft", *METHODS):
        cells = []
        for t in sets:
            by = t["across_seeds"]["models"][m]
            cells += [
                _cell(by[lists]["per_responder"]["requests"]) if lists in by else "n/a"
                for lists in ("sampled", "greedy")
            ]
        rows.append(f"| {LABELS[m]} | " + " | ".join(cells) + " |")
    cells = []
    for t in sets:
        d = t["across_seeds"]["paired"]["remark_vs_rank_grpo"]
        cells += [
            _cell(d[lists]["per_responder"]["requests"], 100, 2, True) if lists in d else "n/a"
            for lists in ("sampled", "greedy")
        ]
    rows.append(f"| {DIFF_ROW} | " + " | ".join(cells) + " |")
    cells = []
    for t in sets:
        d = t["across_seeds"]["paired"]["remark_vs_rank_grpo"]
        cells += [
            _verdict_word(d[lists]["per_responder"]) if lists in d else "n/a"
            for lists in ("sampled", "greedy")
        ]
    rows.append(f"| {VERDICT_ROW} | " + " | ".join(cells) + " |")
    n_seeds = len(summary["settings"]["rl_seeds"])
    host = host_class(summary.get("machine", {}))
    return (
        f"Per-responder recall@{k} [95% interval over test requests], {_seeds_text(n_seeds)}; made on a host: "
        f"{host}.\n\n" + "\n".join(rows) + "\n" + protoqa_table(summary) + collapse_table(summary)
    )


#: The first cell of every row of the ProtoQA-matching table.
PROTOQA_ROW = "ProtoQA matching:"


def protoqa_rows(summary: dict[str, Any]) -> dict[str, list[dict[str, float] | None]]:
    """Per model, per README column (test set x lists): ProtoQA's own per-question matching
    (``eval.protoqa_match``: each line against its own question's answer clusters), per-responder
    recall@K (``protoqa.per_responder["recall@K"]`` of each run's evaluation): the mean over the RL seeds, its
    standard deviation and range, or None where the data carry no answer clusters."""
    sets = [summary.get("test", {})] + [t["models"] for t in summary.get("test_sets", {}).values()]
    k = summary["settings"]["k"]
    out: dict[str, list[dict[str, float] | None]] = {}
    for m in ("sft", *METHODS):
        names = ["sft"] if m == "sft" else [f"{m}-seed{x}" for x in summary["settings"]["rl_seeds"]]
        cells: list[dict[str, float] | None] = []
        for models in sets:
            for lists in ("sampled", "greedy"):
                vals = [
                    _num(
                        ((models.get(n, {}).get(lists) or {}).get("protoqa") or {})
                        .get("per_responder", {})
                        .get(f"recall@{k}", {})
                        .get("mean")
                    )
                    for n in names
                ]
                vals = [v for v in vals if math.isfinite(v)]
                if len(vals) != len(names):
                    cells.append(None)
                    continue
                mean = sum(vals) / len(vals)
                sd = (
                    math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
                    if len(vals) > 1
                    else math.nan
                )
                cells.append({"mean": mean, "sd": sd, "min": min(vals), "max": max(vals), "n": len(vals)})
        out[f"{PROTOQA_ROW} {LABELS[m]}"] = cells
    return out


def protoqa_table(summary: dict[str, Any]) -> str:
    """:func:`protoqa_rows` as markdown rows under the README table (nothing when no cell has a value)."""
    rows = protoqa_rows(summary)
    if not any(c for cells in rows.values() for c in cells):
        return ""
    k = summary["settings"]["k"]
    lines = [
        "",
        f"ProtoQA's own matching (each line against its own question's answer clusters, as ProtoQA's evaluator "
        f"does), per-responder recall@{k}, mean over the runs (range over seeds); same columns:",
        "",
        "| model | " + " | ".join("" for _ in next(iter(rows.values()))) + " |",
        "|---" * (1 + len(next(iter(rows.values())))) + "|",
    ]
    for label, cells in rows.items():
        shown = [
            "n/a"
            if c is None
            else f"{c['mean']:.3f}" + (f" ({c['min']:.3f} to {c['max']:.3f})" if c["n"] > 1 else "")
            for c in cells
        ]
        lines.append(f"| {label} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


#: The collapse figures the README and the report show, in this order (``eval.collapse``).
COLLAPSE_SHOWN = {
    "coverage": "catalog coverage",
    "distinct_per_list": "distinct per list",
    "same_list_share": "same-list share",
    "repeat_share": "repeats",
    "popularity_lift": "popularity lift",
    "head_hit_share": "hits from the top K",
}
#: The first cell of every collapse row starts with this (``host_tolerances`` leaves them out).
COLLAPSE_ROW = "lists of"


def collapse_rows(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per model and lists on the held-out test questions: each :data:`COLLAPSE_SHOWN` figure averaged over
    the RL seeds (``eval.collapse.collapse_report`` of each run's lists) and the collapse warnings of any
    seed (``eval.collapse.collapse_warning``)."""
    out: dict[str, dict[str, Any]] = {}
    test = summary.get("test", {})
    for m in ("sft", *METHODS):
        names = ["sft"] if m == "sft" else [f"{m}-seed{x}" for x in summary["settings"]["rl_seeds"]]
        for lists in ("greedy", "sampled"):
            reports = [(test.get(n, {}).get(lists) or {}).get("collapse") for n in names]
            reports = [r for r in reports if r]
            if not reports:
                continue
            figures = {}
            for key in COLLAPSE_SHOWN:
                vals = [_num(r.get(key)) for r in reports]
                figures[key] = sum(vals) / len(vals)
            warnings = [w for r in reports if (w := r.get("warning"))]
            out[f"{LABELS[m]}, {lists}"] = {"figures": figures, "warnings": warnings, "runs": len(reports)}
    return out


def collapse_table(summary: dict[str, Any]) -> str:
    """The collapse table under the README's demo table: :func:`collapse_rows` as markdown, a plain
    "COLLAPSED" where any run's lists trip ``eval.collapse.collapse_warning``."""
    rows = collapse_rows(summary)
    if not rows:
        return ""
    k = summary["settings"]["k"]
    lines = [
        "",
        f"List collapse on the held-out scraped questions (first {k} grounded items of each list; mean over the "
        "runs; `eval.collapse`):",
        "",
        "| lists | " + " | ".join(COLLAPSE_SHOWN.values()) + " | collapse warning |",
        "|---|" + "---|" * (len(COLLAPSE_SHOWN) + 1),
    ]
    for label, row in rows.items():
        cells = [f"{v:.2f}" if math.isfinite(v) else "n/a" for v in row["figures"].values()]
        flag = f"COLLAPSED ({len(row['warnings'])} of {row['runs']} runs)" if row["warnings"] else "no"
        lines.append(f"| {COLLAPSE_ROW} {label} | " + " | ".join(cells) + f" | {flag} |")
    return "\n".join(lines) + "\n"


#: The README table's row of the paired difference and of its verdict.
DIFF_ROW = "ReMaRk - Rank-GRPO (points)"
VERDICT_ROW = "verdict"


def _verdict_word(diff: dict[str, Any]) -> str:
    """The verdict of one table column in a word or three (:func:`resolution`)."""
    side = resolution(diff)
    if side is None:
        return "no verdict (< 3 seeds)"
    return "ReMaRk ahead" if side > 0 else "Rank-GRPO ahead" if side < 0 else "not resolved"


def _model_line(summary: dict[str, Any]) -> str:
    """The report's model line: the tiny model's shape and tokenizer, or the pretrained base's folder."""
    s, m = summary["settings"], summary["model"]
    gen = "; lists generated by vLLM" if s.get("use_vllm") else ""
    if s.get("base_model"):
        return (
            f"- Model: pretrained `{Path(s['base_model']).name}`, {m['parameters']:,} parameters, its own "
            f"tokenizer ({m['vocab']} tokens) and chat template{gen}."
        )
    return (
        f"- Model: Qwen2 with {m['parameters']:,} parameters (hidden {s['hidden_size']}, "
        f"{s['num_hidden_layers']} layers, FFN {s['intermediate_size']}, tied embeddings), byte-level BPE "
        f"tokenizer ({m['vocab']} tokens), both built locally{gen}."
    )


def report_markdown(summary: dict[str, Any]) -> str:
    """The demo's ``report.md`` from its ``summary.json``."""
    s = summary["settings"]
    k = s["k"]
    n_seeds = len(s["rl_seeds"])
    ev = summary["test"]
    mach, timing = summary["machine"], summary["timing"]
    load = mach.get("load_1min", {})
    lines = [
        f"# remark demo: ReMaRk vs Rank-GRPO on {summary['data']['description']}",
        "",
        *([summary["headline"]["sentence"], ""] if "headline" in summary else []),
        f"{_seeds_text(n_seeds)} ({', '.join(str(x) for x in s['rl_seeds'])}) per method from one SFT warm-up "
        f"(seed {s['seed']})"
        + (" -- **fast mode: tiny settings, numbers are meaningless**" if s["fast"] else "")
        + f". Finished in {timing['total_s'] / 60:.1f} min on {mach['cpus']} CPU cores (1-minute load average "
        f"{_num(load.get('start')):.1f} at the start, mean {_num(load.get('mean')):.1f}, max "
        f"{_num(load.get('max')):.1f}).",
        "",
        *_headline(summary),
        "## What ran",
        "",
        f"- Data: {summary['data']['description']}; {summary['data']['stats_line']}.",
        *([f"- Versions: {versions_line(summary['versions'])}."] if summary.get("versions") else []),
        _model_line(summary),
        f"- SFT warm-up: `{s['sft_targets']}` targets, {summary['sft']['steps']} steps, lr {s['sft_lr']:g} "
        f"{s['sft_scheduler']}, batch {s['sft_batch']}; loss {summary['sft']['first_loss']:.3f} -> "
        f"{summary['sft']['final_loss']:.3f}.",
        f"- RL, every run from that warm-up: {s['steps']} steps, {s['prompts_per_step']} prompts x "
        f"G = {s['num_generations']} lists per step, K = {k}, lr chosen per method on validation (ReMaRk "
        f"{_chosen(summary, 'remark'):g}, Rank-GRPO {_chosen(summary, 'rank_grpo'):g}) constant, beta 0, "
        f"loss bnpo, per-rank group scaling, cap {s['max_completion_length']} tokens. "
        "ReMaRk: union rewards, requests sampled uniformly; Rank-GRPO: one responder's items, "
        "(request, responder) rows sampled. The RL seed sets sampling, request order and validation samples.",
        f"- Validation every {s['validation_every']} steps on the valid split (greedy lists"
        + (
            f" and {s['validation_samples']} sampled lists per request, T = 1"
            if s["validation_samples"]
            else ""
        )
        + f"); best checkpoint by `{summary['metric']}`; tested on the test split "
        f"({ev['sft']['greedy']['n_requests']} requests), greedy and {s['eval_samples']} sampled lists per "
        f"request (T = 1, the same sampling seed for every model); BCa bootstrap over requests "
        f"({s['ci_resamples']} resamples).",
        f"- Threads: {summary['threads'].get('warmup', summary['threads']['per_process'])} in the warm-up "
        f"process, which runs alone, and {summary['threads']['per_process']} per process in every later stage "
        f"(torch, OpenMP/MKL, polars, rayon; `PYTHONHASHSEED=0`), {summary['threads']['processes_at_once']} "
        "processes at once. "
        "The thread count is a setting like the seed: it changes the numbers, the load does not.",
        "",
    ]
    lines += _tables(summary)
    lines += ["", "## Reading this honestly", "", *summary["notes"], ""]
    return "\n".join(lines)


#: The lines around the demo table in the README (``readme_table``'s output, verbatim).
README_MARKERS = ("<!-- demo-table:start -->", "<!-- demo-table:end -->")
#: How many standard deviations of the difference of two S-seed means a number may move on another host.
HOST_TOLERANCE_SDS = 4.0
#: The least tolerance of a recall cell (its last printed digit) and of a difference cell, in points.
HOST_TOLERANCE_FLOOR = {"recall": 0.002, "points": 0.2}


def host_class(machine: dict[str, Any]) -> str:
    """The class of hosts that give the demo bit-identical numbers: CPU vendor and the widest vector set.

    The stage processes pin torch's, oneDNN's and MKL's code paths (``remark.demo.worker_env``), yet a run on
    an AMD host with AVX-512 and one on an Intel host trained one stage apart (``docs/setup.md``, "Hosts"):
    the README names the class its table was made on, and :func:`readme_table_problem` asks for identity on
    that class only.
    """
    isa = set(machine.get("vector_isa") or ())
    width = "AVX-512" if "avx512f" in isa else "AVX2" if machine.get("has_avx2") else "no AVX2"
    return f"{machine.get('vendor') or 'unknown vendor'} with {width}"


_NUMBER = re.compile(r"[-+]?\d+\.\d+")


def _table_cells(table: str) -> dict[str, list[str]]:
    """A markdown table's rows by their first cell (header and rule rows skipped)."""
    rows: dict[str, list[str]] = {}
    for line in table.splitlines():
        if (
            not line.startswith("|")
            or line.startswith("|---")
            or line.startswith(("| row |", "| lists |", "| model |"))
        ):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def host_tolerances(summary: dict[str, Any]) -> dict[str, list[float | None]]:
    """Per README row label, per column: how far a number may move on a host of another class.

    A host of another class trains like another draw of the RL seeds (the runs part after the first
    rounding difference), so a seed mean may move by the difference of two S-seed means:
    ``tol = HOST_TOLERANCE_SDS * sd * sqrt(2 / S)`` with ``sd`` the per-seed standard deviation of that
    cell (points x100 for the difference row), at least :data:`HOST_TOLERANCE_FLOOR`. The SFT start has
    no seeds: it gets the widest tolerance of the RL rows of its column. Reference levels train nothing:
    tolerance 0 (they must be equal). ``None``: no tolerance can be given (one RL seed).
    """
    sets = [summary] + [
        {"across_seeds": t["across_seeds"], "reference_levels": t["reference_levels"]}
        for t in summary.get("test_sets", {}).values()
    ]
    tol: dict[str, list[float | None]] = {}
    for level in summary.get("reference_levels") or {}:
        tol[level] = [0.0] * (2 * len(sets))

    def one(seeds: dict[str, Any] | None, floor: float, scale: float) -> float | None:
        if not seeds or seeds.get("n", 1) < 2 or seeds.get("sd") is None:
            return None
        sd = _num(seeds["sd"]) * scale
        return max(floor, HOST_TOLERANCE_SDS * sd * math.sqrt(2 / seeds["n"]))

    for m in METHODS:
        tol[LABELS[m]] = [
            one(t["across_seeds"]["models"][m].get(lists, {}).get("per_responder", {}).get("seeds"),
                HOST_TOLERANCE_FLOOR["recall"], 1.0)
            for t in sets
            for lists in ("sampled", "greedy")
        ]  # fmt: skip
    rl = [tol[LABELS[m]] for m in METHODS]
    tol[LABELS["sft"]] = [
        None if any(v is None for v in col) else max(col)  # type: ignore[type-var]
        for col in zip(*rl, strict=True)
    ]
    for label, cells in protoqa_rows(summary).items():
        tol[label] = [None if c is None else one({"n": c["n"], "sd": c["sd"]}, HOST_TOLERANCE_FLOOR["recall"], 1.0)
                      for c in cells]  # fmt: skip
    rl_pq = [tol.get(f"{PROTOQA_ROW} {LABELS[m]}") for m in METHODS]
    if all(rl_pq) and f"{PROTOQA_ROW} {LABELS['sft']}" in tol:
        tol[f"{PROTOQA_ROW} {LABELS['sft']}"] = [
            None if any(v is None for v in col) else max(col)  # type: ignore[type-var]
            for col in zip(*rl_pq, strict=True)
        ]
    tol[DIFF_ROW] = [
        one(t["across_seeds"]["paired"]["remark_vs_rank_grpo"].get(lists, {}).get("per_responder", {}).get("seeds"),
            HOST_TOLERANCE_FLOOR["points"], 100.0)
        for t in sets
        for lists in ("sampled", "greedy")
    ]  # fmt: skip
    return tol


def readme_table_problem(readme: str, summary: dict[str, Any]) -> str | None:
    """None when ``readme``'s demo table (between :data:`README_MARKERS`) holds for the demo ``summary``; else
    what differs, with both tables, for the test that ties the README to the demo CI just ran.

    On the host class the table names (:func:`host_class`) it must be :func:`readme_table` of ``summary``
    verbatim. On a host of another class every number must lie within :func:`host_tolerances` of the
    README's (interval bounds within twice that) and every verdict must be the same: the README says so
    beside the table.
    """
    start, end = README_MARKERS
    if readme.count(start) != 1 or readme.count(end) != 1:
        return f"the README needs exactly one {start} ... {end} block"
    shown = readme.split(start, 1)[1].split(end, 1)[0].strip()
    made = readme_table(summary).strip()
    if shown == made:
        return None
    both = f"\n--- README\n{shown}\n--- demo\n{made}\n"
    here = host_class(summary.get("machine", {}))
    if f"made on a host: {here}." in shown:
        return f"the README's demo table differs from this demo's, on the host class it was made on ({here}):{both}"
    shown_rows, made_rows, tol = _table_cells(shown), _table_cells(made), host_tolerances(summary)
    problems = []
    for label, cells in made_rows.items():
        if label.startswith(COLLAPSE_ROW):  # descriptive: on another host class each run's lists differ
            continue
        theirs = shown_rows.get(label)
        if theirs is None or len(theirs) != len(cells):
            problems.append(f"row {label!r}: missing or of another shape in the README")
            continue
        for i, (a, b) in enumerate(zip(theirs, cells, strict=True)):
            na, nb = [float(x) for x in _NUMBER.findall(a)], [float(x) for x in _NUMBER.findall(b)]
            if not na and not nb:
                if a != b:
                    problems.append(f"row {label!r}, column {i + 1}: {a!r} in the README, {b!r} here")
                continue
            limit = tol.get(label, [None] * len(cells))[i]
            if limit is None or len(na) != len(nb):
                problems.append(
                    f"row {label!r}, column {i + 1}: {a!r} in the README, {b!r} here (no tolerance)"
                )
                continue
            worst = max(
                abs(x - y) / (1 if j == 0 else 2) for j, (x, y) in enumerate(zip(na, nb, strict=True))
            )
            if worst > limit + 1e-9:
                problems.append(
                    f"row {label!r}, column {i + 1}: {a} in the README, {b} here (tolerance {limit:.4g})"
                )
    if not problems:
        return None
    return (
        f"the README's demo table does not hold on this host ({here}; the README's was made on another "
        "class): " + "; ".join(problems) + both
    )


def _chosen(summary: dict[str, Any], method: str) -> float:
    return summary["runs"][method][f"seed{summary['settings']['rl_seeds'][0]}"]["learning_rate"]


def _tables(summary: dict[str, Any]) -> list[str]:
    s = summary["settings"]
    k, metric = s["k"], f"recall@{s['k']}"
    across = summary["across_seeds"]
    one = len(s["rl_seeds"]) == 1
    lines = [
        f"## Test split: recall@{k}, " + ("one RL seed" if one else f"mean of {len(s['rl_seeds'])} seeds"),
        "",
        "Each cell: the value [95% bootstrap over test requests]."
        if one
        else "Each cell: the seed average [95% bootstrap over test requests]; below it, the range over seeds.",
        "",
        "| model | lists | " + " | ".join(VIEWS) + " |",
        "|---|---|" + "---|" * len(VIEWS),
    ]
    for m in ("sft", *METHODS):
        for lists, by_view in across["models"][m].items():
            cells = [_cell(by_view[v]["requests"]) for v in VIEWS]
            lines.append(f"| {LABELS[m]} | {lists} | " + " | ".join(cells) + " |")
            if m != "sft" and not one:
                ranges = [_seed_range(by_view[v]["seeds"]) for v in VIEWS]
                lines.append("| | range over seeds | " + " | ".join(ranges) + " |")
    lines += ["", "## Paired differences (points of recall, x100)", ""]
    lines += [
        "| comparison | lists | seed | " + " | ".join(VIEWS) + " |",
        "|---|---|---|" + "---|" * len(VIEWS),
    ]
    for pair, (a, b) in PAIR_LABELS.items():
        for lists, by_view in across["paired"][pair].items():
            lines.append(
                f"| {a} - {b} | {lists} | mean [over requests] | "
                + " | ".join(_cell(by_view[v]["requests"], 100, 2, True) for v in VIEWS)
                + " |"
            )
            if not one:
                lines.append(
                    "| | | mean [t over seeds] | "
                    + " | ".join(_cell(by_view[v]["seeds"], 100, 2, True) for v in VIEWS)
                    + " |"
                )
            for seed_name, diff in summary["paired"][pair].items() if pair == "remark_vs_rank_grpo" else ():
                cells = [_cell(diff[lists].get(v, {}).get(metric), 100, 2, True) for v in VIEWS]
                lines.append(
                    f"| | | {seed_name.replace('seed', 'seed ')} [over requests] | "
                    + " | ".join(cells)
                    + " |"
                )
    lines += ["", "## Per seed: best checkpoints and training signal", ""]
    window = summary["runs"][next(iter(METHODS))][f"seed{s['rl_seeds'][0]}"]["train"].get("reward_window", 10)
    lines += [
        "| method | seed | lr | best step | best validation value | test, sampled | test, greedy | "
        f"reward, first {window} -> last {window} steps | zero-signal groups |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in METHODS:
        for seed in s["rl_seeds"]:
            run = summary["runs"][m][f"seed{seed}"]
            d = run["train"]
            test = summary["test"][f"{m}-seed{seed}"]
            zs = d["zero_signal_frac_mean"]
            lines.append(
                f"| {LABELS[m]} | {seed} | {run['learning_rate']:g} | {run['best_step']} | "
                f"{_num(run['best_value']):.3f} | "
                f"{_cell(test['sampled']['per_responder'].get(metric))} | "
                f"{_cell(test['greedy']['per_responder'].get(metric))} | "
                f"{_num(d['reward_first']):.2f} -> {_num(d['reward_last']):.2f} | "
                + (f"{zs:.0%} |" if zs is not None else "n/a |")
            )
    lines += [
        "",
        "The training reward is each method's own (the sum over ranks of its rank rewards: union hits for "
        "ReMaRk, the drawn responder's hits for Rank-GRPO), so it is comparable within a method, not across. "
        "A zero-signal group is one where all G lists got the same rank rewards: it teaches nothing.",
    ]
    for lists, v in summary["validation"].items():
        lines += ["", f"## Validation curves, {lists} lists (`{v['metric']}`)", ""]
        curves = v["curves"]
        start = _num(curves["remark"]["pooled"]["mean"][0])
        for direction, (a, b) in (
            ("remark_reaches_rank_grpo", ("ReMaRk", "Rank-GRPO")),
            ("rank_grpo_reaches_remark", ("Rank-GRPO", "ReMaRk")),
        ):
            for reach in v["pooled"][direction].values():
                lines.append("- " + _reach_sentence(a, b, reach, start, True))
        lines += ["", f"![validation curves, {lists} lists]({summary['files']['plots'][lists]})", ""]
        lines += [
            "| step | " + " | ".join(f"{LABELS[m]} (mean of seeds)" for m in METHODS) + " |",
            "|---|" + "---|" * len(METHODS),
        ]
        xs = curves["remark"]["pooled"]["x"]
        for i, st in enumerate(xs):
            row = [
                _cell(
                    {
                        "mean": c["pooled"]["mean"][i],
                        "ci_low": c["pooled"]["low"][i],
                        "ci_high": c["pooled"]["high"][i],
                    }
                )
                for c in (curves[m] for m in METHODS)
            ]
            lines.append(f"| {st} | " + " | ".join(row) + " |")
    for name, t in summary.get("test_sets", {}).items():
        lines += ["", f"## Second test set: {name} ({t['n_requests']} requests, none trained on)", ""]
        lines += [" ".join(_overlap_text(t["split_overlap"])), ""]
        d = t["across_seeds"]["paired"]["remark_vs_rank_grpo"]
        for lists in d:
            lines.append(
                f"- {lists.capitalize()} lists: "
                + _points_line(d[lists]["per_responder"], "ReMaRk", "Rank-GRPO", lists, k, t["n_requests"])
            )
    lines += ["", "## All test sets", "", readme_table(summary)]
    timing = summary["timing"]
    cpu = _stage_cpu(timing.get("jobs", {}))
    lines += ["", "## Timing", "", "| stage | wall seconds |", "|---|---|"]
    for stage, sec in timing["stages"].items():
        lines.append(f"| {stage} | {sec:.0f} |")
    lines += [
        "",
        "CPU seconds of the stage processes: "
        + ", ".join(f"{n} {c:.0f}" for n, c in cpu.items())
        + (
            f". Peak resident memory of one process: {timing['peak_rss_mb']:,.0f} MiB"
            if timing.get("peak_rss_mb")
            else ""
        )
        + ".",
    ]
    lines += [
        "",
        "Wall time depends on the machine's load (see the load average above); CPU seconds much less so. "
        "Neither changes a number in this report.",
    ]
    return lines


def _overlap_text(overlap: dict[str, Any]) -> list[str]:
    from eval.leakage import overlap_lines

    return overlap_lines(overlap)


def _stage_cpu(jobs: dict[str, Any]) -> dict[str, float]:
    """CPU seconds per stage (warm-up, RL runs, evaluations), summed over the stage's processes."""
    groups = {"warmup": 0.0, "rl": 0.0, "eval": 0.0}  # stage names: see pipeline._run_stages
    for name, j in jobs.items():
        kind = "warmup" if name == "warmup" else "eval" if name.startswith("eval-") else "rl"
        groups[kind] += _num(j.get("cpu_s"))
    return groups


def _seeds_text(n: int) -> str:
    return "1 RL seed" if n == 1 else f"{n} RL seeds"


def report_notes(summary: dict[str, Any]) -> list[str]:
    """Plain sentences for the end of the report, computed from the numbers (nothing hand-written)."""
    s = summary["settings"]
    n = len(s["rl_seeds"])
    notes = []
    across = summary["across_seeds"]["paired"]
    for pair, (a, b) in PAIR_LABELS.items():
        for lists, by_view in across[pair].items():
            d = by_view["per_responder"]
            spread = (
                f"; seed range {100 * _num(d['seeds']['min']):+.2f} to {100 * _num(d['seeds']['max']):+.2f} points"
                if n > 1
                else ""
            )
            notes.append(
                f"- Test per-responder recall@{s['k']}, {lists} lists: {a} - {b}: {verdict(d, a, b)}{spread}."
            )
    zs = {
        m: [summary["runs"][m][f"seed{x}"]["train"]["zero_signal_frac_mean"] for x in s["rl_seeds"]]
        for m in METHODS
    }
    if all(v is not None for vals in zs.values() for v in vals):
        notes.append(
            f"- Flat groups (all {s['num_generations']} lists scored the same, no learning signal): "
            f"{100 * sum(zs['rank_grpo']) / n:.0f}% of Rank-GRPO's, {100 * sum(zs['remark']) / n:.0f}% of "
            "ReMaRk's (mean over seeds): the responder draw at work."
        )
    for label, row in collapse_rows(summary).items():
        for w in dict.fromkeys(row["warnings"]):
            notes.append(
                f"- **Collapse** ({label} lists, {len(row['warnings'])} of {row['runs']} runs): {w}."
            )
    seeds_note = (
        "The interval over requests covers which requests were drawn (for this run), not training variance: "
        "another RL seed (`--seeds 0 1 2` adds the t-interval over seeds) or a new warm-up (another `--seed`) "
        "adds variance it does not cover."
        if n == 1
        else "The interval over seeds covers what varies between training runs (on these test requests); with "
        "so few seeds it is wide. The interval over requests covers which requests were drawn (for these "
        "runs), not training variance. A new warm-up (another `--seed`) adds a source of variance that "
        "neither covers."
    )
    model = (
        "a tiny model"
        if not s.get("base_model")
        else f"{summary['model']['parameters'] / 1e6:.0f}M-parameter pretrained model"
    )
    notes += [
        f"- {_seeds_text(n)} from one warm-up with {model}: this shows the pipeline and the direction of "
        f"the effect at this scale, not the paper's numbers. {seeds_note}",
        "- Greedy lists can repeat items (see the distinct items per list in `eval/*/metrics.json`), "
        "so RL can lower greedy recall while it raises sampled recall: the sampled rows are the primary ones, "
        "chosen before running.",
        "- Each run's best checkpoint is chosen on the validation split by Rank-GRPO's headline metric "
        "(per-responder recall) and tested on a separate split.",
    ]
    return notes
