"""Step time of ``RemarkGRPOTrainer`` (rank advantages) / TRL's plain ``GRPOTrainer`` on the same tiny model.

Run by hand (not a test; the target is a ratio <= 1.10):

    python bench/trainer_overhead.py [--reps 5] [--steps 3] [--warmup 1] [--threads 2] \
        [--prompts 16] [--group-size 8] [--max-completion-length 128] [--k 10] [--sft-steps 60] \
        [--work-dir /tmp/remark_overhead] [--json results.json]

What is compared. Both trainers load the same saved model, get the same dataset rows (a synthetic pooled
dataset, ``data_prep.synthetic.build_dataset``), the same batch (``--prompts`` x ``--group-size``
completions, one micro-batch, generation every step), the same generation settings (transformers,
temperature 1, completion cap) and the same loss settings (``bnpo``, group scaling, beta 0, lr 1e-6),
and the same seed, so their first step samples identical completions (later steps differ only by the
tiny updates; the mean completion length of each is printed to show it). The plain trainer's reward is
a trivial scalar (completion length): what is timed is the cost of remark's rank machinery (decode,
parse, ground, encode, rank rewards, the gather, group scaling per rank, the token map, extra metrics)
over TRL's own step. Repetitions are interleaved (ABBA order), the first ``--warmup`` steps of every
run are dropped, and the ratio is taken per repetition (median step of each) so that machine load that
drifts between repetitions cancels; the median and range over repetitions are reported.

Breakdown per step (``time.perf_counter`` around the methods, on subclasses that only time):

- ``gen``: TRL's ``_generate`` (tokenize prompts, ``model.generate``, decode);
- ``reward``: TRL's ``_calculate_rewards``; for remark it contains ``score`` (``RankScorer.score``:
  offsets, parse, ground, encode, rank rewards, token ranks);
- ``override``: remark's ``_generate_and_score_completions`` after TRL's (gather, per-rank group
  scaling, token advantages, metrics);
- ``loss``: ``training_step`` minus input preparation (forward, loss, backward);
- ``rest``: everything else in the step (the rest of TRL's scoring, optimizer step, bookkeeping).

The model: a ~1M-parameter Qwen2 (``remark.config.tiny.TinySpec``) with a tokenizer trained on the catalog's
titles and the prompts, SFT-warmed for ``--sft-steps`` steps on ``noisy`` targets (``remark.run.sft``) so
that it writes list-shaped "Title (Year)" lines (most of which ground only fuzzily or not at all, as
early in RL); ``--sft-steps 0`` keeps random weights (garbage lines, completions run to the cap). The
built world is cached under ``--work-dir`` and reused.

The building blocks (world, timing subclasses, one timed run) are ``bench/timed_steps.py``, shared with
``bench/gpu_check.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch
from flags import add_output_flags, bench_parser, check_json_output, run_script
from gpu_check import profile_points, run_one
from timed_steps import KINDS, World, build_world, common_args, median_of, timed_run

from catalog.io.outputs import JSON_FORMATS, atomic_file
from remark.config.tiny import TinySpec

#: the ``catalog.io.outputs.atomic_file`` kinds of ``--json`` and ``--profile-out``.
JSON_KIND, PROFILE_KIND = "bench-overhead", "bench-profile"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = bench_parser(__file__, __doc__)
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions (each runs both trainers)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=1, help="steps dropped at the start of every run")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (pinned; 1 is steadiest on a shared box)",
    )
    ap.add_argument("--prompts", type=int, default=16, help="prompts per step")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-completion-length", type=int, default=128)
    ap.add_argument("--k", type=int, default=10, help="ranks K (the instruction asks for K items)")
    ap.add_argument("--match-mode", default="fuzzy", choices=("exact", "fuzzy"))
    ap.add_argument("--sft-steps", type=int, default=60, help="SFT warm-up steps (0 = random weights)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work-dir", default="/tmp/remark_overhead", help="world cache (data, model)")
    add_output_flags(ap, "all step records and the summary")
    ap.add_argument(
        "--profile-out",
        default=None,
        help="also time the remark trainer at each of --profile-group-sizes and write a cost profile here "
        "(bench/gpu_check.py's format, for remark plan-group-size --profile; --reps 0 skips the comparison)",
    )
    ap.add_argument("--profile-group-sizes", default="4,8,16", help="G of the profile (default %(default)s)")
    a = ap.parse_args(argv)
    for flag, kind in (("--json", JSON_KIND), ("--profile-out", PROFILE_KIND)):
        check_json_output(a, kind, flag)  # before any timing

    torch.set_num_threads(a.threads)
    load_before = os.getloadavg()
    t_start = time.perf_counter()
    world = build_world(a.work_dir, k=a.k, spec=TinySpec(), sft_steps=a.sft_steps, seed=a.seed)
    print(f"world: {a.work_dir} ({json.dumps({k: v for k, v in world.info.items() if k != 'settings'})})")
    args = common_args(
        Path(a.work_dir) / "runs",
        prompts=a.prompts,
        group_size=a.group_size,
        max_completion_length=a.max_completion_length,
        steps=a.warmup + a.steps,
        seed=a.seed,
        cuda=False,
    )
    print(
        f"batch {a.prompts} prompts x G={a.group_size}, cap {a.max_completion_length}, K={a.k}, "
        f"match {a.match_mode}, torch threads {torch.get_num_threads()}, {a.reps} reps x "
        f"({a.warmup} warm-up + {a.steps} timed) steps per trainer, load {load_before[0]:.2f}"
    )
    runs: list[dict[str, Any]] = []
    for rep in range(a.reps):
        order = KINDS if rep % 2 == 0 else KINDS[::-1]
        for kind in order:
            steps, history = timed_run(kind, world, args, k=a.k, match_mode=a.match_mode)
            timed = steps[a.warmup :]
            logged = [h for h in history if "loss" in h][a.warmup :]
            lists = {}
            if kind == "remark" and logged:
                lists = {key: statistics.mean(h[f"train/{key}"] for h in logged) for key in LIST_STATS}
            runs.append(
                {"rep": rep, "kind": kind, "steps": timed, "lists": lists, "load": os.getloadavg()[0]}
            )
            print(
                f"rep {rep} {kind:<6} step {median_of(timed, 'step_s'):.3f} s "
                f"(gen {median_of(timed, 'gen_s'):.3f}, tokens {median_of(timed, 'completion_tokens'):.0f})",
                flush=True,
            )
    summary = summarize(runs, a.reps)
    summary.update(
        {
            "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
            "settings": vars(a),
            "world": world.info,
            "load_before": load_before,
            "load_after": os.getloadavg(),
            "wall_s": time.perf_counter() - t_start,
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            "torch": torch.__version__,
        }
    )
    if runs:
        print_summary(summary)
    if a.json:
        with atomic_file(a.json, JSON_KIND, formats=JSON_FORMATS, force=a.force, field="--json") as tmp:
            tmp.write_text(json.dumps({"summary": summary, "runs": runs}, indent=2))
    if a.profile_out:
        summary["profile"] = write_cpu_profile(a, world)
    return summary


def write_cpu_profile(a: argparse.Namespace, world: World) -> dict[str, Any]:
    """``bench/gpu_check.py``'s runs and profile points on this CPU (G in increasing order: memory is the
    process's peak RSS, which never resets, so each point is the peak up to and including its run)."""
    ns = argparse.Namespace(
        **{**vars(a), "no_gradient_checkpointing": True, "continuous_batching": False, "scoring_workers": 0}
    )
    groups = sorted({int(g) for g in a.profile_group_sizes.split(",") if g.strip()})
    runs = [run_one("remark", g, 0, world, ns, False, float("inf")) for g in groups]
    profile = {
        "device": f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads)",
        "model": f"remark.config.tiny.TinySpec() (vocab {world.info.get('vocab')}), SFT-warmed {a.sft_steps} steps",
        "points": profile_points(runs, a.warmup),
        "settings": {
            "prompts": a.prompts,
            "max_completion_length": a.max_completion_length,
            "k": a.k,
            "steps": a.steps,
            "warmup": a.warmup,
        },
        "memory_unit": "GiB (process peak RSS, never reset; G in increasing order)",
        "source": "bench/trainer_overhead.py --profile-out (RemarkGRPOTrainer runs)",
        "load": [os.getloadavg()[0]],
    }
    with atomic_file(
        a.profile_out, PROFILE_KIND, formats=JSON_FORMATS, force=a.force, field="--profile-out"
    ) as tmp:
        tmp.write_text(json.dumps(profile, indent=2) + "\n")
    for r in runs:
        if r["status"] != "ok":
            print(f"profile G={r['G']}: {r['status']}: {r.get('error')}")
    for pt in profile["points"]:
        print(f"profile G={pt['G']}: step {pt['step_s']:.3f} s, peak RSS {pt['peak_mem_gb']:.2f} GiB")
    print(f"wrote {a.profile_out} ({len(profile['points'])} of {len(groups)} G measured)")
    return profile


#: What the remark trainer logs about the sampled lists (TRL's plain trainer has none of these).
LIST_STATS = ("lines_per_list", "parsed_per_list", "grounded_per_list", "hits_per_list", "truncated_frac")
BREAKDOWN = ("step_s", "gen_s", "reward_s", "score_s", "override_s", "loss_s", "rest_s")


def summarize(runs: list[dict[str, Any]], reps: int) -> dict[str, Any]:
    """Ratio per repetition (median remark step / median plain step), pooled medians of the breakdown."""
    ratios = []
    for rep in range(reps):
        med = {r["kind"]: median_of(r["steps"], "step_s") for r in runs if r["rep"] == rep}
        if len(med) == 2:
            ratios.append(med["remark"] / med["plain"])
    pooled = {kind: [s for r in runs if r["kind"] == kind for s in r["steps"]] for kind in KINDS}
    breakdown = {kind: {key: median_of(steps, key) for key in BREAKDOWN} for kind, steps in pooled.items()}
    for kind, steps in pooled.items():
        breakdown[kind]["completion_tokens"] = median_of(steps, "completion_tokens")
        breakdown[kind]["mean_completion_tokens"] = float(
            np.mean([s["completion_tokens"] / s["rows"] for s in steps]) if steps else float("nan")
        )
    lists = [r["lists"] for r in runs if r["kind"] == "remark" and r["lists"]]
    workload = {key: statistics.mean(x[key] for x in lists) for key in LIST_STATS} if lists else {}
    machinery = [s["score_s"] + s["override_s"] for s in pooled["remark"]]
    plain_step = breakdown["plain"]["step_s"]
    return {
        "ratio_median": statistics.median(ratios) if ratios else float("nan"),
        "ratio_min": min(ratios, default=float("nan")),
        "ratio_max": max(ratios, default=float("nan")),
        "ratios": ratios,
        "pooled_ratio": breakdown["remark"]["step_s"] / plain_step,
        "machinery_s": statistics.median(machinery) if machinery else float("nan"),
        "machinery_frac_of_plain_step": (statistics.median(machinery) / plain_step)
        if machinery
        else float("nan"),
        "breakdown": breakdown,
        "lists": workload,
    }


def print_summary(s: dict[str, Any]) -> None:
    print()
    print(
        f"{'median ms/step':<15}"
        + "".join(f"{k.removesuffix('_s'):>9}" for k in BREAKDOWN)
        + f"{'tokens':>8}"
    )
    for kind in KINDS:
        b = s["breakdown"][kind]
        row = "".join(f"{1e3 * b[k]:>9.1f}" for k in BREAKDOWN)
        print(f"{kind:<15}{row}{b['mean_completion_tokens']:>8.1f}")
    print(
        f"\nratio remark/plain: median {s['ratio_median']:.3f} over {len(s['ratios'])} reps "
        f"(range {s['ratio_min']:.3f}-{s['ratio_max']:.3f}; pooled {s['pooled_ratio']:.3f}); "
        f"rank machinery (score + override) {1e3 * s['machinery_s']:.1f} ms = "
        f"{100 * s['machinery_frac_of_plain_step']:.1f}% of a plain step; goal <= 1.10"
    )
    if s["lists"]:
        print(
            "sampled lists (remark's logs, mean): " + ", ".join(f"{k} {v:.2f}" for k, v in s["lists"].items())
        )
    print(f"load {s['load_before'][0]:.2f} -> {s['load_after'][0]:.2f}, wall {s['wall_s']:.0f} s")


if __name__ == "__main__":
    run_script(main)
