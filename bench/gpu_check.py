"""One prepared GPU check: RemarkGRPOTrainer vs TRL's plain GRPOTrainer on a realistic-shape model, G in {4, 8, 16}.

Run on one GPU (an H200 here; nothing else is needed, no network, no vLLM):

    python bench/gpu_check.py --out $OUT            # 12-13 min on an H200 (51-59 s a run): --reps 1 --steps 3 fits one call
    python bench/gpu_check.py --out $OUT --scoring-workers 8 --continuous-batching
    python bench/gpu_check.py --out /tmp/x --smoke  # CPU, tiny model, 2 steps per run, for the tests

What it does. Builds a synthetic pooled dataset (``data_prep.synthetic``) and a random-init Qwen2 model of
``remark.run.tiny_model.realistic_spec()`` shape (hidden 896, 24 layers, 14/2 heads, FFN 4864; the tokenizer is
trained locally on the catalog, the prompts and made-up filler words until it has the spec's vocabulary,
so the LM head and logits have realistic size), loaded in bf16 (``model_init_kwargs.dtype``, ``bf16``,
gradient checkpointing as the GPU recipes). For each G it trains ``RemarkGRPOTrainer`` (union reward,
K = 20, group scaling, ``bnpo``) and plain ``GRPOTrainer`` (a trivial scalar reward) on the same model,
batch (``--prompts`` x G completions in one micro-batch, generation every step) and seed, ``--reps``
times each in ABBA order (remark, plain, plain, remark, ...; the next G starts with the other trainer:
``pair_order``), each run ``--warmup`` untimed + ``--steps`` timed steps (default 1 + 5). Before the
first timed run one whole run is made and discarded (``warmup_run`` in results.json; ``--no-warmup-run``
skips it): the first run in a process pays one-time costs (kernel selection, allocator growth) that
would otherwise land on whichever trainer goes first. Per G and trainer it reports the median timed step over all its
runs with the spread (min, max, and the interquartile range), the ratio remark / plain per repetition
(adjacent runs, so load that drifts cancels) and pooled, generation time (TRL's ``_generate``), loss time
(forward + backward), completion tokens per step and per second, and peak GPU memory
(``torch.cuda.max_memory_allocated``, reset before each run). Memory is in GiB (2^30 bytes), the unit of a
card's label ("80 GB") and of ``remark plan-group-size --memory-budget``.

Scoring, two numbers: ``score_wait_s`` is what the step waits for scoring, the duration of the
reward call (``RankReward.__call__``: the serial ``RankScorer.score``, or with ``--scoring-workers N``
the rest of the pool's work after generation and TRL's own work before the reward call, plus the join);
``score_work_s`` is the scoring work, wherever it ran: the serial score call, or the slowest pool
worker's wall time plus the join. ``override_s`` is the rank step after TRL's round.

``--continuous-batching`` generates with transformers' continuous batching (TRL's
``use_transformers_continuous_batching``) and sizes its paged KV cache for the batch
(``num_blocks`` = the batch's prompt + completion tokens in 256-token pages, x 1.25, ``max_batch_tokens``
4096) instead of transformers' default (a share of the free device memory, allocated again at every step:
TRL calls ``generate_batch`` without a persistent manager, so each step rebuilds the cache and re-runs
the warm-up; on CPU that alone took 30 s per step for a 2-layer model). ``gen_tokens_per_s`` is then the
no-vLLM generation rate.

Caveat: a random-init model writes random tokens, so every completion runs to the cap (the most
generation work per step) and is one long unparsable line (less parse/ground work than a trained
model's 20 lines; ``bench/trainer_overhead.py`` measures the rank machinery on list-shaped output and
``bench/scoring.py`` the scoring on both shapes).

Outputs under ``--out`` (written after every run, so a killed check leaves what it measured):
``results.json`` (settings, device, every run's step records and medians, skipped runs and errors),
``summary.md`` (tables) and ``profile.json`` (docs/architecture.md "Cost profile", from the remark runs,
read by ``remark plan-group-size --profile``). Guards: a deadline (a run whose estimated time would pass
it is skipped and listed; a running trainer stops after the step that passes it), CUDA OOM caught per run
and recorded. It never changes GPU settings (no clocks, power, MIG or persistence calls); it only reads
the device's name and memory through torch.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from flags import bench_parser, run_script
from timed_steps import KINDS, build_world, common_args, median_of, timed_run

from catalog.io.outputs import atomic_file, check_output_file
from remark.config.tiny import TinySpec
from remark.run.tiny_model import realistic_spec

#: the ``catalog.io.outputs.atomic_file`` kind of the files under ``--out``.
OUTPUT_KIND = "gpu-check"
OUTPUT_FILES = ("results.json", "profile.json", "summary.md")

GIB = 2**30
SMOKE_SPEC = TinySpec(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
)
KEYS = (
    "step_s",
    "gen_s",
    "loss_s",
    "reward_s",
    "score_s",
    "score_wait_s",
    "score_work_s",
    "override_s",
    "rest_s",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = bench_parser(__file__, __doc__)
    ap.add_argument("--out", required=True, help="folder for results.json, summary.md, profile.json")
    ap.add_argument(
        "--force", action="store_true", help="replace those files even if remark did not write them"
    )
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny model, 1 step per G (tests)")
    ap.add_argument("--group-sizes", default="4,8,16", help="comma-separated G (default %(default)s)")
    ap.add_argument("--prompts", type=int, default=None, help="prompts per step (default 16; smoke 2)")
    ap.add_argument("--max-completion-length", type=int, default=None, help="default 320; smoke 24")
    ap.add_argument("--k", type=int, default=None, help="ranks K (default 20; smoke 5)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per run (default 5; smoke 2)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed first steps (default 1; smoke 0)")
    ap.add_argument(
        "--reps", type=int, default=None, help="runs per trainer and G, ABBA (default 2; smoke 1)"
    )
    ap.add_argument("--deadline-s", type=float, default=None, help="time guard in s (default 540; smoke 240)")
    ap.add_argument("--vocab-size", type=int, default=None, help="override the spec's vocabulary")
    ap.add_argument("--no-plain", action="store_true", help="skip TRL's plain trainer (no overhead ratio)")
    ap.add_argument(
        "--no-gradient-checkpointing", action="store_true", help="turn off gradient checkpointing"
    )
    ap.add_argument("--match-mode", default="fuzzy", choices=("exact", "fuzzy"))
    ap.add_argument(
        "--scoring-workers",
        type=int,
        default=0,
        help="remark's scoring_workers (0: score in the reward call)",
    )
    ap.add_argument(
        "--continuous-batching",
        action="store_true",
        help="generate with transformers' continuous batching (a paged cache sized for the batch)",
    )
    ap.add_argument(
        "--no-warmup-run",
        action="store_true",
        help="skip the untimed warm-up run before the first timed one (the process's first run is slower)",
    )
    ap.add_argument("--work-dir", default=None, help="where the model and data go (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    defaults = {
        "prompts": (16, 2),
        "max_completion_length": (320, 24),
        "k": (20, 5),
        "steps": (5, 2),
        "warmup": (1, 0),
        "reps": (2, 1),
        "deadline_s": (540.0, 240.0),
    }
    for name, (real, smoke) in defaults.items():
        if getattr(a, name) is None:
            setattr(a, name, smoke if a.smoke else real)
    a.group_sizes = [int(g) for g in a.group_sizes.split(",") if g.strip()]
    if not a.group_sizes or min(a.group_sizes) < 2:
        ap.error("--group-sizes needs integers >= 2")
    if a.steps < 1 or a.reps < 1 or a.warmup < 0:
        ap.error("--steps and --reps need >= 1, --warmup >= 0")
    return a


def device_info(cuda: bool) -> dict[str, Any]:
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": cuda,
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "load": os.getloadavg(),
    }
    if cuda:
        props = torch.cuda.get_device_properties(0)
        info |= {
            "name": torch.cuda.get_device_name(0),
            "total_mem_gb": props.total_memory / GIB,
            "cuda_version": torch.version.cuda,
            "bf16_supported": torch.cuda.is_bf16_supported(),
        }
    else:
        info["name"] = f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    return info


def peak_memory_gb(cuda: bool) -> float:
    """Peak GPU memory since the last reset; on CPU the process's peak RSS (never reset)."""
    if cuda:
        return torch.cuda.max_memory_allocated() / GIB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB


def is_oom(err: BaseException) -> bool:
    oom_type = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", ())
    return isinstance(err, oom_type) or "out of memory" in str(err).lower()


def max_prompt_tokens(world, k: int) -> int:
    """Tokens of the longest training prompt with the chat template and the generation prompt."""
    from transformers import AutoTokenizer

    from remark.run.sampling import training_rows

    tok = AutoTokenizer.from_pretrained(world.model_dir)
    prompts = training_rows(world.ds, split="train", sampling="uniform", k=k)["prompt"].to_list()
    texts = [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m in prompts]
    return max(len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"])


def cb_config(rows: int, max_prompt_tokens: int, max_completion: int) -> dict[str, Any]:
    """A paged cache sized for one generation batch: every row's prompt and completion in 256-token pages,
    x 1.25 (transformers' default sizes it from the free device memory and rebuilds it every step)."""
    pages = -(-rows * (max_prompt_tokens + max_completion) // 256)
    return {"num_blocks": int(pages * 1.25) + 4, "max_batch_tokens": 4096}


def pair_order(kinds: tuple[str, ...], g_index: int, rep: int) -> tuple[str, ...]:
    """The trainers' order in repetition ``rep`` of the ``g_index``-th G: ABBA within a G (remark, plain,
    plain, remark, ...), and each G starts with the trainer the previous G started second, so that a
    deadline that cuts a G to one pair does not always time the same trainer first."""
    return kinds if (g_index + rep) % 2 == 0 else kinds[::-1]


def run_one(
    kind: str, g: int, rep: int, world, a: argparse.Namespace, cuda: bool, deadline: float
) -> dict[str, Any]:
    """One trainer at one G: its step records, medians and peak memory, or the error."""
    extra: dict[str, Any] = {"gradient_checkpointing": not a.no_gradient_checkpointing}
    if cuda:
        extra |= {"bf16": True, "model_init_kwargs": {"dtype": "bfloat16"}}
    if a.continuous_batching:
        extra |= {
            "use_transformers_continuous_batching": True,
            "transformers_continuous_batching_config": cb_config(
                a.prompts * g, world.info.get("max_prompt_tokens", 512), a.max_completion_length
            ),
        }
    args = common_args(
        Path(a.work_dir) / "runs" / f"{kind}_G{g}_rep{rep}",
        prompts=a.prompts,
        group_size=g,
        max_completion_length=a.max_completion_length,
        steps=a.warmup + a.steps,
        seed=a.seed,
        cuda=cuda,
        extra=extra,
    )
    rec: dict[str, Any] = {"kind": kind, "G": g, "rep": rep, "rows": a.prompts * g, "status": "ok"}
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        rec["mem_before_gb"] = torch.cuda.memory_allocated() / GIB  # ~0 unless a run leaked
    t0 = time.monotonic()
    try:
        steps, history = timed_run(
            kind,
            world,
            args,
            k=a.k,
            match_mode=a.match_mode,
            deadline=deadline,
            remark_extra={"scoring_workers": a.scoring_workers},
        )
    except Exception as err:
        rec["status"] = "oom" if is_oom(err) else "error"
        rec["error"] = f"{type(err).__name__}: {err}"[:2000]
        if rec["status"] == "error":
            rec["traceback"] = traceback.format_exc()[-4000:]
        steps, history = [], []
    if rec["status"] == "ok" and not steps:
        rec["status"], rec["error"] = "error", "no step was recorded"
    rec["wall_s"] = time.monotonic() - t0
    rec["peak_mem_gb"] = peak_memory_gb(cuda)
    if rec["status"] != "ok":
        gc.collect()  # the failed trainer's frames are released only now
        if cuda:
            torch.cuda.empty_cache()
        return rec
    timed = steps[a.warmup :] or steps[-1:]  # a deadline stop may leave only the warm-up step
    rec["n_steps"] = len(steps)
    rec["n_timed"] = len(steps[a.warmup :])
    rec["steps"] = steps
    rec["median"] = {key: median_of(timed, key) for key in KEYS}
    tokens = median_of(timed, "completion_tokens")
    rec["completion_tokens_per_step"] = tokens
    rec["prompt_tokens_per_step"] = median_of(timed, "prompt_tokens")
    rec["tokens_per_s"] = tokens / rec["median"]["step_s"]
    rec["gen_tokens_per_s"] = tokens / rec["median"]["gen_s"] if rec["median"]["gen_s"] > 0 else None
    logged = [h for h in history if "completions/mean_length" in h]
    if logged:
        rec["mean_completion_length"] = logged[-1]["completions/mean_length"]
        rec["clipped_ratio"] = logged[-1].get("completions/clipped_ratio")
    if len(steps) < a.warmup + a.steps:
        rec["note"] = f"stopped by the deadline after {len(steps)} of {a.warmup + a.steps} steps"
    return rec


def pooled(runs: list[dict[str, Any]], kind: str, g: int, warmup: int) -> dict[str, Any] | None:
    """The timed steps of every ok run of (kind, G), pooled: medians, step-time spread, tokens, memory."""
    mine = [r for r in runs if r["kind"] == kind and r["G"] == g and r["status"] == "ok"]
    if not mine:
        return None
    steps = [st for r in mine for st in (r["steps"][warmup:] or r["steps"][-1:])]
    step_s = sorted(st["step_s"] for st in steps)
    q = statistics.quantiles(step_s, n=4, method="inclusive") if len(step_s) >= 2 else [step_s[0]] * 3
    med = {key: median_of(steps, key) for key in KEYS}
    tokens = median_of(steps, "completion_tokens")
    return {
        "n_runs": len(mine),
        "n_timed": len(steps),
        "median": med,
        "step_min": step_s[0],
        "step_max": step_s[-1],
        "step_q1": q[0],
        "step_q3": q[2],
        "completion_tokens_per_step": tokens,
        "tokens_per_s": tokens / med["step_s"],
        "gen_tokens_per_s": tokens / med["gen_s"] if med["gen_s"] > 0 else None,
        "peak_mem_gb": max(r["peak_mem_gb"] for r in mine),
    }


def rep_ratios(runs: list[dict[str, Any]], g: int) -> list[float]:
    """remark / plain median step of the same repetition (adjacent runs in the ABBA order)."""
    out = []
    for rep in sorted({r["rep"] for r in runs if r["G"] == g}):
        med = {
            r["kind"]: r["median"]["step_s"]
            for r in runs
            if r["G"] == g and r["rep"] == rep and r["status"] == "ok"
        }
        if len(med) == 2:
            out.append(med["remark"] / med["plain"])
    return out


def profile_points(runs: list[dict[str, Any]], warmup: int = 0) -> list[dict[str, Any]]:
    """The "Cost profile" points: one per G from the remark runs (plus the plain step and the ratio)."""
    points = []
    for g in sorted({r["G"] for r in runs}):
        rem, plain = pooled(runs, "remark", g, warmup), pooled(runs, "plain", g, warmup)
        if rem is None:
            continue
        m = rem["median"]
        pt = {
            "G": g,
            "peak_mem_gb": round(rem["peak_mem_gb"], 4),
            "step_s": m["step_s"],
            "tokens_per_s": rem["tokens_per_s"],
            "gen_s": m["gen_s"],
            "loss_s": m["loss_s"],
            "score_wait_s": m["score_wait_s"],
            "score_work_s": m["score_work_s"],
        }
        if plain is not None:
            pt["plain_step_s"] = plain["median"]["step_s"]
            pt["overhead_ratio"] = m["step_s"] / pt["plain_step_s"]
            ratios = rep_ratios(runs, g)
            if ratios:
                pt["rep_ratios"] = ratios
        points.append(pt)
    return points


def write_outputs(out: Path, doc: dict[str, Any], *, force: bool = False) -> None:
    """results.json, profile.json and summary.md (each written whole, then renamed)."""
    points = profile_points(doc["runs"], doc["settings"]["warmup"])
    profile = {
        "device": doc["device"]["name"],
        "model": doc["model"],
        "points": points,
        "settings": {
            k: doc["settings"][k] for k in ("prompts", "max_completion_length", "k", "steps", "reps")
        },
        "memory_unit": "GiB" if doc["device"]["cuda"] else "GiB (process peak RSS, CPU smoke)",
        "source": "bench/gpu_check.py (RemarkGRPOTrainer runs)",
    }
    doc["profile_points"] = len(points)
    for name, text in (
        ("results.json", json.dumps(doc, indent=2, default=str)),
        ("profile.json", json.dumps(profile, indent=2)),
        ("summary.md", summary_markdown(doc, points)),
    ):
        with atomic_file(out / name, OUTPUT_KIND, force=force) as tmp:
            tmp.write_text(text)


def summary_markdown(doc: dict[str, Any], points: list[dict[str, Any]]) -> str:
    s, dev = doc["settings"], doc["device"]
    gen = "transformers continuous batching" if s.get("continuous_batching") else "transformers generate"
    lines = [
        f"# gpu_check{' (smoke, CPU)' if s['smoke'] else ''}: {dev['name']}",
        "",
        f"Model: {doc['model']}. Batch: {s['prompts']} prompts x G completions (one micro-batch), completion cap "
        f"{s['max_completion_length']}, K = {s['k']}, generation: {gen}, remark scoring_workers "
        f"{s.get('scoring_workers', 0)}. {s.get('reps', 1)} run(s) per trainer and G in ABBA order, each "
        f"{s['warmup']} warm-up + {s['steps']} timed steps; torch {dev['torch']}. Wall {doc.get('wall_s', 0):.0f} s "
        f"(deadline {s['deadline_s']:.0f} s).",
        "",
        "Medians over all timed steps of a trainer at a G; spread = min / interquartile range / max of its "
        "step times. score wait = the reward call TRL waits on; score work = the scoring work wherever it ran "
        "(serial call, or the slowest pool worker). tokens/s = completion tokens per step / step time; gen "
        "tok/s = per generation time; peak = torch.cuda.max_memory_allocated (CPU smoke: process peak RSS).",
        "",
        "| G | trainer | runs | steps | step s | spread (min / q1-q3 / max) | gen s | loss s | score wait ms "
        "| score work ms | override ms | tokens/step | tokens/s | gen tok/s | peak GiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    kinds = ("remark", "plain")
    for g in sorted({r["G"] for r in doc["runs"]}):
        for kind in kinds:
            p = pooled(doc["runs"], kind, g, s["warmup"])
            if p is None:
                continue
            m = p["median"]
            gen_tps = f"{p['gen_tokens_per_s']:.0f}" if p["gen_tokens_per_s"] else ""
            lines.append(
                f"| {g} | {kind} | {p['n_runs']} | {p['n_timed']} | {m['step_s']:.3f} | {p['step_min']:.3f} / "
                f"{p['step_q1']:.3f}-{p['step_q3']:.3f} / {p['step_max']:.3f} | {m['gen_s']:.3f} | {m['loss_s']:.3f} | "
                f"{1e3 * m['score_wait_s']:.1f} | {1e3 * m['score_work_s']:.1f} | {1e3 * m['override_s']:.1f} | "
                f"{p['completion_tokens_per_step']:.0f} | {p['tokens_per_s']:.0f} | {gen_tps} | {p['peak_mem_gb']:.2f} |"
            )
    ratios = []
    for p in points:
        if "overhead_ratio" in p:
            reps = ", ".join(f"{x:.3f}" for x in p.get("rep_ratios", []))
            ratios.append(f"G={p['G']}: {p['overhead_ratio']:.3f} (per repetition: {reps or 'n/a'})")
    lines += ["", f"Step-time ratio remark / plain GRPO (pooled medians): {'; '.join(ratios) or 'n/a'}."]
    waits = [f"G={p['G']}: {100 * p['score_wait_s'] / p['step_s']:.2f}%" for p in points if p["step_s"] > 0]
    lines.append(f"Scoring wait as a share of the remark step: {', '.join(waits) or 'n/a'}.")
    if s["smoke"]:
        lines.append("Smoke run (CPU, tiny model): the times check the path, not the speed.")
    if doc["skipped"]:
        lines.append(f"Skipped (deadline): {', '.join(doc['skipped'])}.")
    for r in doc["runs"]:
        if r["status"] != "ok":
            lines.append(f"G={r['G']} {r['kind']} rep {r['rep']}: {r['status']}: {r.get('error', '')[:300]}")
    lines += ["", f"Profile points: {len(points)} (profile.json, for `remark plan-group-size --profile`)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    t_start = time.monotonic()
    a = parse_args(argv)
    deadline = t_start + a.deadline_s
    cuda = torch.cuda.is_available() and not a.smoke
    if not a.smoke and not cuda:
        print("gpu_check: no CUDA device; run with --smoke on a CPU", file=sys.stderr)
        return 2
    if a.smoke:
        torch.set_num_threads(1)
    out = Path(a.out)
    for name in OUTPUT_FILES:  # a same-named file of the user's is refused before any work
        check_output_file(out / name, OUTPUT_KIND, force=a.force)
    out.mkdir(parents=True, exist_ok=True)
    tmp = None
    if a.work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="gpu_check_")
        a.work_dir = tmp.name
    try:
        return _check(a, out, cuda, t_start, deadline)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _check(a: argparse.Namespace, out: Path, cuda: bool, t_start: float, deadline: float) -> int:
    spec = SMOKE_SPEC if a.smoke else realistic_spec()
    if a.vocab_size:
        spec = TinySpec(**{**asdict(spec), "vocab_size": a.vocab_size})
    # Enough made-up words for BPE to reach the spec's vocabulary (~100k words for 32k, ~2 s).
    filler = 2_000 if a.smoke else max(100_000, 4 * spec.vocab_size)
    t0 = time.monotonic()
    world = build_world(
        Path(a.work_dir) / "world",
        k=a.k,
        spec=spec,
        n_requests=60 if a.smoke else 400,
        n_items=80 if a.smoke else 480,
        sft_steps=0,
        filler_words=filler,
        seed=a.seed,
    )
    if a.continuous_batching:  # the paged cache is sized from the longest prompt
        world.info["max_prompt_tokens"] = max_prompt_tokens(world, a.k)
    device = device_info(cuda)
    model = (
        f"random-init Qwen2 ({'smoke TinySpec' if a.smoke else 'remark.run.tiny_model.realistic_spec'}: hidden "
        f"{spec.hidden_size}, {spec.num_hidden_layers} layers, {spec.num_attention_heads}/"
        f"{spec.num_key_value_heads} heads, FFN {spec.intermediate_size}, vocab {world.info['vocab']}), "
        f"{'bf16' if cuda else 'fp32'}"
    )
    settings = {k: v for k, v in vars(a).items()}
    doc: dict[str, Any] = {
        "settings": settings,
        "device": device,
        "model": model,
        "spec": asdict(spec),
        "world": world.info,
        "build_s": time.monotonic() - t0,
        "runs": [],
        "skipped": [],
    }
    print(f"gpu_check: {device['name']}; {model}; built in {doc['build_s']:.1f} s", flush=True)
    write_outputs(out, doc, force=a.force)
    kinds = ("remark",) if a.no_plain else KINDS
    last: tuple[int, float] | None = None  # (G, wall s of one run) of the last finished run
    if not a.no_warmup_run:  # the process's first run pays one-time costs; it is timed for no trainer
        warm = run_one(kinds[-1], a.group_sizes[0], -1, world, a, cuda, deadline)
        doc["warmup_run"] = {k: warm.get(k) for k in ("kind", "G", "status", "wall_s", "error")}
        if warm["status"] == "ok":
            last = (warm["G"], warm["wall_s"])
        print(f"warm-up run ({warm['kind']}, G={warm['G']}, untimed): {warm['wall_s']:.1f} s", flush=True)
        write_outputs(out, doc, force=a.force)
    for gi, g in enumerate(a.group_sizes):
        for rep in range(a.reps):
            for kind in pair_order(kinds, gi, rep):
                now = time.monotonic()
                estimate = 0.0 if last is None else last[1] * g / last[0]
                if now + estimate > deadline:
                    doc["skipped"].append(
                        f"G={g} {kind} rep {rep} (estimated {estimate:.0f} s, {deadline - now:.0f} s left)"
                    )
                    print(f"skip G={g} {kind} rep {rep}: deadline", flush=True)
                    continue
                rec = run_one(kind, g, rep, world, a, cuda, deadline)
                doc["runs"].append(rec)
                if rec["status"] == "ok":
                    last = (g, rec["wall_s"])
                    m = rec["median"]
                    print(
                        f"G={g:<3} {kind:<6} rep {rep} step {m['step_s']:.3f} s (gen {m['gen_s']:.3f}, loss "
                        f"{m['loss_s']:.3f}, score wait {1e3 * m['score_wait_s']:.1f} ms, work "
                        f"{1e3 * m['score_work_s']:.1f} ms), {rec['tokens_per_s']:.0f} tok/s, "
                        f"peak {rec['peak_mem_gb']:.2f} GiB",
                        flush=True,
                    )
                else:
                    print(f"G={g:<3} {kind:<6} rep {rep} {rec['status']}: {rec['error'][:200]}", flush=True)
                doc["wall_s"] = time.monotonic() - t_start
                write_outputs(out, doc, force=a.force)
    doc["wall_s"] = time.monotonic() - t_start
    write_outputs(out, doc, force=a.force)
    print((out / "summary.md").read_text())
    return 1 if any(r["status"] == "error" for r in doc["runs"]) else 0


if __name__ == "__main__":
    run_script(main)
