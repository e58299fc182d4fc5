"""One prepared GPU check: RemarkGRPOTrainer vs TRL's plain GRPOTrainer on a realistic-shape model, G in {4, 8, 16}.

Run on one GPU (an H200 here; nothing else is needed, no network, no vLLM):

    python bench/gpu_check.py --out $OUT            # est. 4-6 min on an H200; --deadline-s guards (420)
    python bench/gpu_check.py --out /tmp/x --smoke  # CPU, tiny model, 1 step per G, for the tests

What it does. Builds a synthetic pooled dataset (``data_prep.synthetic``) and a random-init Qwen2 model of
``remark.tiny.realistic_spec()`` shape (hidden 896, 24 layers, 14/2 heads, FFN 4864; the tokenizer is
trained locally on the catalog, the prompts and made-up filler words until it has the spec's vocabulary,
so the LM head and logits have realistic size), loaded in bf16 (``model_init_kwargs.dtype``, ``bf16``,
gradient checkpointing as the GPU recipes). For each G it trains ``--warmup`` + ``--steps`` steps of
``RemarkGRPOTrainer`` (union reward, K = 20, group scaling, ``bnpo``) and then of plain ``GRPOTrainer``
(a trivial scalar reward) on the same model, batch (``--prompts`` x G completions in one micro-batch,
generation every step with transformers) and seed. Per G and trainer it reports the median timed step,
generation time (TRL's ``_generate``), loss time (forward + backward), remark's scoring and advantage
override, completion tokens per step and per second, and peak GPU memory
(``torch.cuda.max_memory_allocated``, reset before each run). Memory is in GiB (2^30 bytes), the unit of a
card's label ("80 GB") and of ``remark plan-group-size --memory-budget``.

Caveat: a random-init model writes random tokens, so every completion runs to the cap (the most
generation work per step) and is one long unparsable line (less parse/ground work than a trained
model's 20 lines; ``bench/trainer_overhead.py`` measures the rank machinery on list-shaped output).

Outputs under ``--out`` (written after every run, so a killed check leaves what it measured):
``results.json`` (settings, device, every run's step records and medians, skipped G and errors),
``summary.md`` (tables) and ``profile.json`` (docs/architecture.md "Cost profile", from the remark runs,
read by ``remark plan-group-size --profile``). Guards: a deadline (a G whose estimated time would pass it
is skipped and listed; a running trainer stops after the step that passes it), CUDA OOM caught per run
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
from trainer_overhead import KINDS, build_world, common_args, median_of, timed_run

from remark.tiny import TinySpec, realistic_spec

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
KEYS = ("step_s", "gen_s", "loss_s", "reward_s", "score_s", "override_s", "rest_s")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for results.json, summary.md, profile.json")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny model, 1 step per G (tests)")
    ap.add_argument("--group-sizes", default="4,8,16", help="comma-separated G (default %(default)s)")
    ap.add_argument("--prompts", type=int, default=None, help="prompts per step (default 16; smoke 2)")
    ap.add_argument("--max-completion-length", type=int, default=None, help="default 320; smoke 24")
    ap.add_argument("--k", type=int, default=None, help="ranks K (default 20; smoke 5)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per run (default 2; smoke 1)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed first steps (default 1; smoke 0)")
    ap.add_argument("--deadline-s", type=float, default=None, help="time guard in s (default 420; smoke 120)")
    ap.add_argument("--vocab-size", type=int, default=None, help="override the spec's vocabulary")
    ap.add_argument("--no-plain", action="store_true", help="skip TRL's plain trainer (no overhead ratio)")
    ap.add_argument(
        "--no-gradient-checkpointing", action="store_true", help="turn off gradient checkpointing"
    )
    ap.add_argument("--match-mode", default="fuzzy", choices=("exact", "fuzzy"))
    ap.add_argument("--work-dir", default=None, help="where the model and data go (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    defaults = {
        "prompts": (16, 2),
        "max_completion_length": (320, 24),
        "k": (20, 5),
        "steps": (2, 1),
        "warmup": (1, 0),
        "deadline_s": (420.0, 120.0),
    }
    for name, (real, smoke) in defaults.items():
        if getattr(a, name) is None:
            setattr(a, name, smoke if a.smoke else real)
    a.group_sizes = [int(g) for g in a.group_sizes.split(",") if g.strip()]
    if not a.group_sizes or min(a.group_sizes) < 2:
        ap.error("--group-sizes needs integers >= 2")
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


def run_one(kind: str, g: int, world, a: argparse.Namespace, cuda: bool, deadline: float) -> dict[str, Any]:
    """One trainer at one G: its step records, medians and peak memory, or the error."""
    extra: dict[str, Any] = {"gradient_checkpointing": not a.no_gradient_checkpointing}
    if cuda:
        extra |= {"bf16": True, "model_init_kwargs": {"dtype": "bfloat16"}}
    args = common_args(
        Path(a.work_dir) / "runs" / f"{kind}_G{g}",
        prompts=a.prompts,
        group_size=g,
        max_completion_length=a.max_completion_length,
        steps=a.warmup + a.steps,
        seed=a.seed,
        cuda=cuda,
        extra=extra,
    )
    rec: dict[str, Any] = {"kind": kind, "G": g, "rows": a.prompts * g, "status": "ok"}
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        rec["mem_before_gb"] = torch.cuda.memory_allocated() / GIB  # ~0 unless a run leaked
    t0 = time.monotonic()
    try:
        steps, history = timed_run(kind, world, args, k=a.k, match_mode=a.match_mode, deadline=deadline)
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


def profile_points(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The "Cost profile" points: one per G from the remark runs (plus the plain step and the ratio)."""
    plain = {r["G"]: r for r in runs if r["kind"] == "plain" and r["status"] == "ok"}
    points = []
    for r in runs:
        if r["kind"] != "remark" or r["status"] != "ok":
            continue
        m = r["median"]
        pt = {
            "G": r["G"],
            "peak_mem_gb": round(r["peak_mem_gb"], 4),
            "step_s": m["step_s"],
            "tokens_per_s": r["tokens_per_s"],
            "gen_s": m["gen_s"],
            "loss_s": m["loss_s"],
        }
        if r["G"] in plain:
            pt["plain_step_s"] = plain[r["G"]]["median"]["step_s"]
            pt["overhead_ratio"] = m["step_s"] / pt["plain_step_s"]
        points.append(pt)
    return points


def write_outputs(out: Path, doc: dict[str, Any]) -> None:
    """results.json, profile.json and summary.md (each written whole, then renamed)."""
    points = profile_points(doc["runs"])
    profile = {
        "device": doc["device"]["name"],
        "model": doc["model"],
        "points": points,
        "settings": {k: doc["settings"][k] for k in ("prompts", "max_completion_length", "k", "steps")},
        "memory_unit": "GiB" if doc["device"]["cuda"] else "GiB (process peak RSS, CPU smoke)",
        "source": "bench/gpu_check.py (RemarkGRPOTrainer runs)",
    }
    doc["profile_points"] = len(points)
    for name, text in (
        ("results.json", json.dumps(doc, indent=2, default=str)),
        ("profile.json", json.dumps(profile, indent=2)),
        ("summary.md", summary_markdown(doc, points)),
    ):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(out / name)


def summary_markdown(doc: dict[str, Any], points: list[dict[str, Any]]) -> str:
    s, dev = doc["settings"], doc["device"]
    lines = [
        f"# gpu_check{' (smoke, CPU)' if s['smoke'] else ''}: {dev['name']}",
        "",
        f"Model: {doc['model']}. Batch: {s['prompts']} prompts x G completions (one micro-batch), completion cap "
        f"{s['max_completion_length']}, K = {s['k']}, {s['warmup']} warm-up + {s['steps']} timed steps per run; "
        f"torch {dev['torch']}. Wall {doc.get('wall_s', 0):.0f} s (deadline {s['deadline_s']:.0f} s).",
        "",
        "tokens/s = completion tokens per step / step time; peak = torch.cuda.max_memory_allocated per run "
        "(CPU smoke: process peak RSS).",
        "",
        "| G | trainer | status | step s | gen s | loss s | score ms | override ms | tokens/step | tokens/s | peak GiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["runs"]:
        if r["status"] != "ok":
            lines.append(f"| {r['G']} | {r['kind']} | {r['status']} | | | | | | | | {r['peak_mem_gb']:.2f} |")
            continue
        m = r["median"]
        lines.append(
            f"| {r['G']} | {r['kind']} | ok{' (partial)' if 'note' in r else ''} | {m['step_s']:.3f} | "
            f"{m['gen_s']:.3f} | {m['loss_s']:.3f} | {1e3 * m['score_s']:.1f} | {1e3 * m['override_s']:.1f} | "
            f"{r['completion_tokens_per_step']:.0f} | {r['tokens_per_s']:.0f} | {r['peak_mem_gb']:.2f} |"
        )
    ratios = [f"G={p['G']}: {p['overhead_ratio']:.3f}" for p in points if "overhead_ratio" in p]
    lines += ["", f"Step-time ratio remark / plain GRPO: {', '.join(ratios) or 'n/a'} (goal <= 1.10)."]
    if s["smoke"]:
        lines.append("Smoke run: one step per run, no warm-up; the times check the path, not the speed.")
    if doc["skipped"]:
        lines.append(f"Skipped (deadline): {', '.join(doc['skipped'])}.")
    for r in doc["runs"]:
        if r["status"] != "ok":
            lines.append(f"G={r['G']} {r['kind']}: {r['status']}: {r.get('error', '')[:300]}")
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
    device = device_info(cuda)
    model = (
        f"random-init Qwen2 ({'smoke TinySpec' if a.smoke else 'remark.tiny.realistic_spec'}: hidden "
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
    write_outputs(out, doc)
    kinds = ("remark",) if a.no_plain else KINDS
    last: tuple[int, float] | None = None  # (G, wall s of one run) of the last finished run
    for g in a.group_sizes:
        for kind in kinds:  # remark first: the profile needs its runs most
            now = time.monotonic()
            estimate = 0.0 if last is None else last[1] * g / last[0]
            if now + estimate > deadline:
                doc["skipped"].append(
                    f"G={g} {kind} (estimated {estimate:.0f} s, {deadline - now:.0f} s left)"
                )
                print(f"skip G={g} {kind}: deadline", flush=True)
                continue
            rec = run_one(kind, g, world, a, cuda, deadline)
            doc["runs"].append(rec)
            if rec["status"] == "ok":
                last = (g, rec["wall_s"])
                m = rec["median"]
                print(
                    f"G={g:<3} {kind:<6} step {m['step_s']:.3f} s (gen {m['gen_s']:.3f}, loss {m['loss_s']:.3f}, "
                    f"score {1e3 * m['score_s']:.1f} ms), {rec['tokens_per_s']:.0f} tok/s, "
                    f"peak {rec['peak_mem_gb']:.2f} GiB",
                    flush=True,
                )
            else:
                print(f"G={g:<3} {kind:<6} {rec['status']}: {rec['error'][:200]}", flush=True)
            doc["wall_s"] = time.monotonic() - t_start
            write_outputs(out, doc)
    doc["wall_s"] = time.monotonic() - t_start
    write_outputs(out, doc)
    print((out / "summary.md").read_text())
    return 1 if any(r["status"] == "error" for r in doc["runs"]) else 0


if __name__ == "__main__":
    sys.exit(main())
