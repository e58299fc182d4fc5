"""ReMaRk vs Rank-GRPO on ProtoQA with the real SmolLM2-135M-Instruct and vLLM rollouts on CPU: one command,
resumable (README.md beside this file).

    .venv-vllm/bin/python experiments/protoqa_smollm2/run.py [--smoke] [--out DIR] [--model DIR] [--set k=v]

experiments/protoqa_cpu at a real pretrained model; its code is imported, not copied (its ``run.py`` as
``cpu_run``, ``analyze.py``, ``hooks.py``). Stages (each skipped when its outputs exist with the same
settings; an interrupted GRPO run resumes from its last checkpoint; ``--fresh`` starts over):

1. data: protoqa_cpu's data stage on the ProtoQA dev files shipped in the package
   (``data_prep.shipped.protoqa_file``): a seeded ``data.n_scraped`` scraped questions with >= 5 clusters
   plus the 52 crowdsourced ones, each question's respondents split into a train side
   (``<out>/data/train``), a validation half (``data/valid``) and a test half (``data/test``).
2. zeroshot: the base model, before any training, on both halves: greedy and ``eval.num_samples``
   sampled lists per question, scored as every validation scores them (``<out>/zero_shot/<side>/``).
3. sft: a short warm-up (``remark.run.sft.run_sft``) on the train side (``<out>/sft_model``).
4. train: for each seed, ReMaRk (union, uniform) and Rank-GRPO (responder, per_responder) from the same
   warm-up (``remark.run.training.run_training``, vLLM colocated with the trainer when ``grpo.use_vllm``),
   validated at step 0 and every ``eval.every`` steps on the validation half (run root, ``sampled/``)
   and the test half (``test/``, ``test/sampled/``) by ``halves.Half`` (the library's
   ``ValidationCallback``; both halves score one generation). Checkpoints every ``grpo.save_every`` steps.
5. analyze: protoqa_cpu's ``analyze.analyze`` (paired CIs, best steps, steps-to-reach, curves) plus the
   zero-shot levels: ``<out>/analysis/results.md`` and ``summary.json``.

Prints ``SKIPPED: ...`` and exits 0 when the model folder is absent (``make fetch-model``) or when
``grpo.use_vllm`` is set and this Python has no vLLM.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CPU = HERE.parent / "protoqa_cpu"
sys.path[:0] = [str(CPU), str(HERE)]  # protoqa_cpu's run, analyze, hooks first; then halves
import run as cpu_run  # noqa: E402  (experiments/protoqa_cpu/run.py: stamps, data stage, load monitor)

done, log, stamp_of, write_json = cpu_run.done, cpu_run.log, cpu_run.stamp_of, cpu_run.write_json
sides = cpu_run.sides

DEFAULT_OUT = REPO / "runs" / "protoqa_smollm2"
SMOKE_OUT = REPO / "runs" / "protoqa_smollm2_smoke"
FETCH_HINT = (
    "fetch it with `make fetch-model` (= `remark model fetch smollm2-135m-instruct --out "
    ".cache/models/smollm2-135m-instruct`), or pass --model DIR (or set REMARK_SMOLLM2_DIR)"
)


# -- config -------------------------------------------------------------------------------------------
def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in, nested mappings key by key."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def apply_set(cfg: dict[str, Any], item: str) -> None:
    """``--set a.b=value`` (value read as YAML: ``false``, ``1e-5``, ``[0, 1]``)."""
    from catalog.io.yaml_files import load_yaml

    key, sep, text = item.partition("=")
    if not sep:
        raise SystemExit(f"--set {item!r}: expected key.path=value")
    *parents, last = key.strip().split(".")
    node = cfg
    for name in parents:
        node = node.setdefault(name, {})
    node[last] = load_yaml(text, what="--set value")


def model_dir(cfg: dict[str, Any], flag: Path | None) -> Path:
    """--model, else $REMARK_SMOLLM2_DIR, else ``model.path`` (relative to the repository)."""
    path = Path(flag or os.environ.get("REMARK_SMOLLM2_DIR") or cfg["model"]["path"]).expanduser()
    return (path if path.is_absolute() else REPO / path).resolve()


def has_model(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def eval_engine(cfg: dict[str, Any]) -> str:
    engine = cfg["eval"].get("engine", "auto")
    if engine == "auto":
        return "vllm" if cfg["grpo"]["use_vllm"] else "transformers"
    return engine


def zero_shot_engine(cfg: dict[str, Any]) -> str:
    engine = cfg.get("zero_shot", {}).get("engine", "auto")
    if engine == "auto":
        return "vllm" if cfg["grpo"]["use_vllm"] and vllm_installed() else "transformers"
    return engine


def check_config(cfg: dict[str, Any]) -> None:
    g, e = cfg["grpo"], cfg["eval"]
    if g["steps"] % e["every"]:
        raise SystemExit(f"grpo.steps ({g['steps']}) must be a multiple of eval.every ({e['every']})")
    if set(cfg["methods"]) != {"remark", "rank_grpo"}:
        raise SystemExit(
            f"methods must be remark and rank_grpo (the analysis compares them): {cfg['methods']}"
        )
    if cfg["analysis"]["primary"][0] == "sampled" and not e["num_samples"]:
        raise SystemExit("analysis.primary is a sampled metric: set eval.num_samples >= 1")


# -- processes ----------------------------------------------------------------------------------------
def env_for(cfg: dict[str, Any]) -> dict[str, str]:
    """Every thread pool fixed to ``threads`` (``remark.demo.worker_env``), OpenMP waiting passively (a
    shared machine), vLLM's own CPU KV-cache default for engines that do not size their own."""
    from remark.demo.worker_env import worker_env

    env = worker_env(int(cfg["threads"]))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return env


def in_worker(cfg: dict[str, Any]) -> None:
    from remark.demo.worker_env import apply_threads

    apply_threads(int(cfg["threads"]))


def spawn(cfg: dict[str, Any], out: Path, job: str, *extra: str, logfile: Path | None = None):
    cmd = [sys.executable, str(Path(__file__).resolve()), "worker", "--job", job, "--out", str(out), *extra]
    if logfile is None:
        return subprocess.Popen(cmd, env=env_for(cfg))
    logfile.parent.mkdir(parents=True, exist_ok=True)
    fh = logfile.open("a")  # a resumed run appends
    fh.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd[2:])}\n")
    fh.flush()
    return subprocess.Popen(cmd, env=env_for(cfg), stdout=fh, stderr=subprocess.STDOUT)


def run_job(cfg: dict[str, Any], out: Path, job: str) -> None:
    proc = spawn(cfg, out, job)
    if proc.wait() != 0:
        raise SystemExit(f"stage {job} failed (exit {proc.returncode})")


# -- validation ---------------------------------------------------------------------------------------
def half(
    cfg: dict[str, Any],
    out: Path,
    side: str,
    *,
    every: int,
    per_step: int,
    metric: str,
    engine: str,
    lists: Any = None,
) -> Any:
    """``halves.Half`` (the library's ``ValidationCallback``) on one held-out half, greedy + sampled lists;
    the test half writes under ``<run>/test/``."""
    from halves import Half

    from data_prep.dataset import load_dataset

    return Half(
        load_dataset(out / "data" / side),
        subdir=None if side == "valid" else side,
        lists=lists,
        engine=engine,
        **cpu_run.validation_fields(cfg, side, every=every, per_step=per_step, metric=metric),
    )


def need(path: Path, what: str) -> None:
    """A stage run alone needs its inputs: refuse with the command that makes them."""
    if not path.is_file():
        raise SystemExit(
            f"{what} has not run in this --out ({path} is missing): run it first, or run.py alone"
        )


# -- stage 1: data ------------------------------------------------------------------------------------
def build_data(cfg: dict[str, Any], out: Path) -> dict[str, Any]:
    """protoqa_cpu's data stage on the shipped files (``data.scraped`` / ``data.crowdsourced`` name them)."""
    from data_prep.shipped import protoqa_file

    d = cfg["data"]
    files = {name: protoqa_file(d[name], verify=True) for name in ("scraped", "crowdsourced")}
    names = {name: path.name for name, path in files.items()}
    return cpu_run.build_data({**cfg, "data": {**d, **names}}, files["scraped"].parent, out)


# -- stage 2: zero-shot -------------------------------------------------------------------------------
def zero_shot_settings(cfg: dict[str, Any]) -> dict[str, Any]:
    g = cfg["grpo"]
    return {
        "model": cfg["model"],
        "data": cfg["data"],
        "eval": {k: v for k, v in cfg["eval"].items() if k not in ("every", "share_lists")},
        "gen": [g["max_completion_length"], g["num_ranks"]],
        "engine": zero_shot_engine(cfg),
        "vllm": g["vllm"] if zero_shot_engine(cfg) == "vllm" else None,
        "threads": cfg["threads"],
    }


def zero_shot_worker(cfg: dict[str, Any], out: Path) -> None:
    """The base model on every held-out half: one greedy and ``num_samples`` sampled lists per question,
    scored by the validation's code (``<out>/zero_shot/<side>/eval_log.jsonl``, ``eval/``, ``sampled/``)."""
    from halves import Lists
    from hooks import NO_CHECKPOINT

    from eval.adapters import load_tokenizer

    in_worker(cfg)
    zs, settings = out / "zero_shot", zero_shot_settings(cfg)
    if done(zs / "done.json", settings):
        return
    if zs.exists():
        shutil.rmtree(zs)
    t0, c0 = time.monotonic(), cpu_run.cpu_seconds()
    path, engine = cfg["model"]["path"], settings["engine"]
    tokenizer, model, llm = load_tokenizer(path), None, None
    if engine == "vllm":
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process
        from vllm import LLM

        v = cfg["grpo"]["vllm"]
        llm = LLM(
            model=str(path),
            dtype="float32",  # the checkpoint's (vLLM's "auto" would run it in bfloat16 on CPU)
            seed=cfg["eval"]["seed"],
            max_model_len=v.get("vllm_max_model_length") or 1024,
            kv_cache_memory_bytes=int(float(v.get("vllm_kv_cache_gib") or 1.0) * (1 << 30)),
            enforce_eager=bool(v.get("vllm_enforce_eager", True)),
        )
    else:
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    setup_s = time.monotonic() - t0
    lists, record = Lists(), {}
    for side in sides(out):
        cb = half(cfg, out, side, every=0, per_step=0, metric=NO_CHECKPOINT, engine=engine, lists=lists)
        if llm is not None:
            cb._vllm_engine = lambda: llm  # what attach() gives it from a trainer
        ts = time.monotonic()
        args = SimpleNamespace(output_dir=str(zs / side), world_size=1)
        state = SimpleNamespace(global_step=0, max_steps=0, log_history=None)
        values = cb._validate(args, state, model, tokenizer)
        record[side] = {"seconds": time.monotonic() - ts, "values": values}
        log(
            f"zero-shot {side}: {json.dumps({k: round(v, 4) for k, v in values.items() if 'recall@10' in k})}"
        )
    write_json(
        zs / "done.json",
        {
            "stamp": stamp_of(settings),
            "engine": engine,
            "setup_s": setup_s,
            "wall_s": time.monotonic() - t0,
            "cpu_s": cpu_run.cpu_seconds() - c0,
            "peak_rss_mb": cpu_run.peak_rss_mb(),
            "lists_reused": lists.hits,
            "sides": record,
        },
    )


# -- stage 3: SFT warm-up -----------------------------------------------------------------------------
def sft_settings(cfg: dict[str, Any]) -> dict[str, Any]:
    s = cfg["sft"]
    return {
        "model": cfg["model"],
        "sft": s,
        "data": cfg["data"],
        "eval": cfg["eval"] if s.get("eval_every") else None,
        "threads": cfg["threads"],
    }


def sft_worker(cfg: dict[str, Any], out: Path) -> None:
    """``remark.run.sft.run_sft`` on the train side; validated on the validation half every
    ``sft.eval_every`` steps when set (``sft_model/eval_log.jsonl``: analyze.py's warm-up curve)."""
    from halves import LossLog
    from hooks import NO_CHECKPOINT

    from data_prep.dataset import load_dataset
    from remark.run.sft import SFTSettings, run_sft

    in_worker(cfg)
    s, sft_dir, settings = cfg["sft"], out / "sft_model", sft_settings(cfg)
    if done(sft_dir / "done.json", settings):
        return
    if sft_dir.exists():
        shutil.rmtree(sft_dir)
    t0, c0 = time.monotonic(), cpu_run.cpu_seconds()
    ds = load_dataset(out / "data" / "train")
    copies = -(-s["steps"] * s["batch_size"] // ds.requests.height)  # enough examples for `steps` batches
    losses = LossLog()
    callbacks: list[Any] = [losses]
    if s.get("eval_every"):
        callbacks.append(
            half(
                cfg,
                out,
                "valid",
                every=s["eval_every"],
                per_step=s["batch_size"],
                metric=NO_CHECKPOINT,
                engine="transformers",
            )
        )
    run_sft(
        ds,
        cfg["model"]["path"],
        sft_dir,
        SFTSettings(targets=s["targets"], k=s["k"], hit_prob=s["hit_prob"], copies=copies, seed=s["seed"]),
        {
            "use_cpu": True,
            "bf16": False,
            "learning_rate": s["learning_rate"],
            "lr_scheduler_type": s["lr_scheduler_type"],
            "warmup_steps": s.get("warmup_steps", 0),
            "max_steps": s["steps"],
            "per_device_train_batch_size": s["batch_size"],
            "logging_steps": 1,
            "disable_tqdm": True,
            "seed": s["seed"],
            "data_seed": s["seed"],
            "dataloader_num_workers": 0,
            "dataset_num_proc": None,
        },
        callbacks=callbacks,
        print_logs=False,
    )
    from transformers import AutoModelForCausalLM

    n_params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(sft_dir).parameters())
    wall = time.monotonic() - t0
    eval_s = callbacks[1].seconds if len(callbacks) > 1 else 0.0
    write_json(
        sft_dir / "done.json",
        {
            "stamp": stamp_of(settings),
            "wall_s": wall,
            "cpu_s": cpu_run.cpu_seconds() - c0,
            "peak_rss_mb": cpu_run.peak_rss_mb(),
            "examples": copies * ds.requests.height,
            "steps": losses.steps,
            "step_s": (wall - eval_s) / max(1, losses.steps),
            "n_params": n_params,
            "eval_s": eval_s,
            "loss_first": losses.losses[0] if losses.losses else None,
            "loss_last": losses.losses[-1] if losses.losses else None,
        },
    )
    log(
        f"sft: {losses.steps} steps in {wall:.0f} s, loss "
        f"{losses.losses[0] if losses.losses else float('nan'):.3f} -> "
        f"{losses.losses[-1] if losses.losses else float('nan'):.3f}"
    )


# -- stage 4: one GRPO run ----------------------------------------------------------------------------
def run_settings(cfg: dict[str, Any], method: str, seed: int) -> dict[str, Any]:
    return {
        "method": cfg["methods"][method],
        "seed": seed,
        "grpo": {k: v for k, v in cfg["grpo"].items() if k != "keep_checkpoints"},
        "eval": cfg["eval"],
        "sft": sft_settings(cfg),
        "model": cfg["model"],
        "data": cfg["data"],
        "threads": cfg["threads"],
    }


def grpo_args(cfg: dict[str, Any], out: Path, method: str, seed: int) -> Any:
    """protoqa_cpu's run fields (``cpu_run.grpo_fields``) with the colocated vLLM engine, fixed threads,
    checkpoints for resuming and a log line every step."""
    from remark.config import RemarkGRPOConfig

    g = cfg["grpo"]
    vllm = dict(g.get("vllm") or {}) if g["use_vllm"] else {}
    return RemarkGRPOConfig(
        **cpu_run.grpo_fields(cfg, out, method, seed),
        use_vllm=bool(g["use_vllm"]),
        **vllm,
        cpu_threads=int(cfg["threads"]),
        save_strategy="steps",
        save_steps=g.get("save_every") or cfg["eval"]["every"],
        save_total_limit=1,  # the newest complete checkpoint is what a resume needs
        logging_steps=1,
    )


def grpo_worker(cfg: dict[str, Any], out: Path, method: str, seed: int) -> None:
    """One GRPO run through ``run_training``, validated on the validation half (best checkpoint by the
    primary metric in ``best/``) and scored on the test half; resumed from its newest complete checkpoint
    when one exists for the same settings."""
    from halves import Lists
    from hooks import NO_CHECKPOINT, LogHistory, Progress

    from remark.run.training import run_training
    from remark.step.checkpoint import checkpoint_step, find_checkpoints, select_checkpoint

    in_worker(cfg)
    run_dir = out / "runs" / f"{method}_s{seed}"
    settings = run_settings(cfg, method, seed)
    started = run_dir / "settings.json"
    resume, start_step = False, 0
    if run_dir.exists():
        ckpt, _ = select_checkpoint(run_dir)
        finished = (run_dir / "train_summary.json").is_file() and (run_dir / "final").is_dir()
        if done(started, settings) and (ckpt is not None or finished):
            resume, start_step = True, (checkpoint_step(ckpt) or 0) if ckpt is not None else -1
        else:
            shutil.rmtree(run_dir)
    if not resume:
        write_json(started, {"stamp": stamp_of(settings), "settings": settings})
    t0, c0 = time.monotonic(), cpu_run.cpu_seconds()
    args = grpo_args(cfg, out, method, seed)
    g, e = cfg["grpo"], cfg["eval"]
    engine = eval_engine(cfg)
    primary_mode, primary_key = cfg["analysis"]["primary"]
    best_by = f"sampled/{primary_key.removeprefix('eval/')}" if primary_mode == "sampled" else primary_key
    lists = None
    if e.get("share_lists", True):
        # what the step-0 lists depend on: the warm-up, the generation settings, the engine, the threads
        step0 = {
            "sft": settings["sft"],
            "eval": {k: v for k, v in e.items() if k != "every"},
            "gen": [g["max_completion_length"], g["num_ranks"]],
            "engine": engine,
            "vllm": g.get("vllm") if engine == "vllm" else None,
            "threads": cfg["threads"],
        }
        lists = Lists(folder=out / "step0_lists" / stamp_of(step0))
    checks = [
        half(
            cfg,
            out,
            side,
            every=e["every"],
            per_step=args.per_device_train_batch_size,
            metric=best_by if side == "valid" else NO_CHECKPOINT,
            engine=engine,
            lists=lists,
        )
        for side in sides(out)
    ]
    summary = run_training(
        args,
        resume=True if resume else None,
        callbacks=[*checks, Progress(run_dir / "progress.json"), LogHistory()],
    )
    wall = time.monotonic() - t0
    end_step = int(summary["global_step"])
    segment = {
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - wall)),
        "resumed_from": start_step if resume else None,
        "steps": end_step - max(start_step, 0) if start_step >= 0 else 0,
        "end_step": end_step,
        "wall_s": wall,
        "train_runtime_s": summary.get("train_runtime_s") if summary.get("resumed") is None else 0.0,
        "eval_s": sum(c.seconds for c in checks),
        "eval_s_by_side": {side: c.seconds for side, c in zip(sides(out), checks, strict=True)},
        "cpu_s": cpu_run.cpu_seconds() - c0,
        "peak_rss_mb": cpu_run.peak_rss_mb(),
        "lists": {"reused": lists.hits, "generated": lists.misses} if lists is not None else None,
    }
    with (run_dir / "segments.jsonl").open("a") as fh:  # one line per worker process (a resume adds one)
        fh.write(json.dumps(segment) + "\n")
    segs = [json.loads(x) for x in (run_dir / "segments.jsonl").read_text().splitlines() if x.strip()]
    total = {
        k: sum(float(s.get(k) or 0.0) for s in segs) for k in ("wall_s", "train_runtime_s", "eval_s", "cpu_s")
    }
    by_side = {side: sum(s["eval_s_by_side"].get(side, 0.0) for s in segs) for side in sides(out)}
    steps = sum(s["steps"] for s in segs)
    train_s = (total["train_runtime_s"] or total["wall_s"]) - total["eval_s"]
    trl_steps = []  # TRL's own step_time (generation, reward, loss, update; no validation, no checkpoint)
    if (run_dir / "train_log.jsonl").is_file():
        for line in (run_dir / "train_log.jsonl").read_text().splitlines():
            rec = json.loads(line) if line.strip() else {}
            if "step_time" in rec:
                trl_steps.append(float(rec["step_time"]))
    write_json(
        run_dir / "done.json",
        {
            "stamp": stamp_of(settings),
            "method": method,
            "seed": seed,
            "steps": end_step,
            "best": summary.get("best"),
            "engine": {"rollouts": "vllm" if g["use_vllm"] else "transformers", "validation": engine},
            "segments": len(segs),
            **total,
            "eval_s_by_side": by_side,
            "train_s": train_s,
            "step_s": train_s / max(1, steps),  # per GRPO step, checkpoint saves included
            "trl_step_time_s": {
                "mean": sum(trl_steps) / len(trl_steps) if trl_steps else None,
                "median": sorted(trl_steps)[len(trl_steps) // 2] if trl_steps else None,
                "first": trl_steps[0] if trl_steps else None,
                "n": len(trl_steps),
            },
            # loading, the vLLM engine's start, the final save: the wall time outside the trainer's loop
            "setup_s": total["wall_s"] - (total["train_runtime_s"] or total["wall_s"]),
            "peak_rss_mb": max(s["peak_rss_mb"] for s in segs),
            "torch_threads": __import__("torch").get_num_threads(),
        },
    )
    if not g.get("keep_checkpoints", False):
        for path in find_checkpoints(run_dir):
            shutil.rmtree(path)


# -- orchestration ------------------------------------------------------------------------------------
def train_all(cfg: dict[str, Any], out: Path) -> list[dict[str, Any]]:
    """Every (method, seed) run, ``parallel`` at a time, each its own process (``<out>/runs/<run>.log``)."""
    jobs = [(m, s) for s in cfg["seeds"] for m in cfg["methods"]]
    todo = [
        (m, s) for m, s in jobs if not done(out / "runs" / f"{m}_s{s}" / "done.json", run_settings(cfg, m, s))
    ]
    for m, s in jobs:
        if (m, s) not in todo:
            log(f"train: reusing {m}_s{s}")
    steps = cfg["grpo"]["steps"]
    running: dict[tuple[str, int], Any] = {}
    seen: dict[tuple[str, int], tuple[int, float]] = {}
    failed = []
    queue = list(todo)
    while queue or running:
        while queue and len(running) < int(cfg.get("parallel", 1)):
            m, s = queue.pop(0)
            name = f"{m}_s{s}"
            running[(m, s)] = spawn(
                cfg, out, "grpo", "--method", m, "--seed", str(s), logfile=out / "runs" / f"{name}.log"
            )
            seen[(m, s)] = (-1, time.monotonic())
            log(f"train: started {name} (pid {running[(m, s)].pid}; log {out / 'runs' / f'{name}.log'})")
        time.sleep(5)
        for (m, s), proc in list(running.items()):
            name = f"{m}_s{s}"
            try:
                prog = json.loads((out / "runs" / name / "progress.json").read_text())
            except (OSError, json.JSONDecodeError):
                prog = None
            if prog is not None and prog["step"] != seen[(m, s)][0]:
                last, since = seen[(m, s)]
                took = f", {time.monotonic() - since:.0f} s since the last report" if last >= 0 else ""
                log(f"train: {name} step {prog['step']}/{steps}{took}")
                seen[(m, s)] = (prog["step"], time.monotonic())
            if proc.poll() is not None:
                del running[(m, s)]
                if proc.returncode != 0:
                    failed.append(name)
                    log(f"train: FAILED {name} (exit {proc.returncode}): see {out / 'runs' / f'{name}.log'}")
                else:
                    d = json.loads((out / "runs" / name / "done.json").read_text())
                    log(
                        f"train: finished {name} in {d['wall_s']:.0f} s ({d['step_s']:.1f} s per GRPO step, "
                        f"{d['eval_s']:.0f} s validating, {d['setup_s']:.0f} s setup)"
                    )
    if failed:
        raise SystemExit(f"{len(failed)} run(s) failed: {failed}; run the command again to resume them")
    return [json.loads((out / "runs" / f"{m}_s{s}" / "done.json").read_text()) for m, s in jobs]


# -- stage 5: analysis --------------------------------------------------------------------------------
def analysis(cfg: dict[str, Any], out: Path) -> dict[str, Any]:
    """protoqa_cpu's analysis, then the zero-shot levels and the step times added to its report."""
    import analyze  # protoqa_cpu's

    from eval.bootstrap import BootstrapConfig

    S = analyze.analyze(cfg, out)
    ci = BootstrapConfig(n_resamples=int(cfg["analysis"]["n_resamples"]))
    zs: dict[str, Any] = {}
    for side in S["sides"]:
        for mode in analyze.MODES:
            d = out / "zero_shot" / side
            d = d / "sampled" if mode == "sampled" else d
            if (d / "eval_log.jsonl").is_file():
                zs.setdefault(side, {})[mode] = analyze.level(d, 0, analyze.KEYS + analyze.MORE_KEYS, ci)
    S["zero_shot"] = zs
    times = {}
    for name, p in (("zero_shot", out / "zero_shot" / "done.json"), ("sft", out / "sft_model" / "done.json")):
        if p.is_file():
            times[name] = json.loads(p.read_text())
    S["stage_times"] = times
    A = out / "analysis"
    L = [
        "# ReMaRk vs Rank-GRPO on ProtoQA, SmolLM2-135M-Instruct (experiments/protoqa_smollm2)",
        "",
        f"Model {cfg['model']['path']}; rollouts {'vLLM (colocated)' if cfg['grpo']['use_vllm'] else 'transformers'}; "
        f"{cfg['grpo']['steps']} GRPO steps x {cfg['grpo']['prompts_per_step']} prompts x G = "
        f"{cfg['grpo']['num_generations']}; seeds {cfg['seeds']}; {cfg['threads']} threads.",
        "",
    ]
    if zs:
        short = {k: k.removeprefix("eval/") for k in analyze.KEYS}
        L += [
            "## Zero-shot: the base model before the warm-up (%, 95% BCa CI over questions)",
            "",
            "After the warm-up = the `start 0` rows of the levels below.",
            "",
            "| half | lists | " + " | ".join(short.values()) + " | distinct/list |",
            "|---|---|" + "---|" * (len(short) + 1),
        ]
        for side, modes in zs.items():
            for mode, v in modes.items():
                L.append(
                    f"| {analyze.SIDE_NAMES[side]} | {mode} | "
                    + " | ".join(analyze.cell(v[k]) for k in analyze.KEYS)
                    + f" | {v['list/distinct']['mean']:.2f} |"
                )
        L.append("")
    runs = S["timings"]["runs"]
    if runs:
        L += ["## Time per stage", "", "| stage | wall (s) | per step (s) | validation (s) | setup (s) |"]
        L += ["|---|---|---|---|---|"]

        def num(x: Any, fmt: str = ".0f") -> str:
            return "-" if x is None else format(x, fmt)

        for name, t in times.items():
            evals = t.get("eval_s", t["wall_s"] - t.get("setup_s", 0.0))
            L.append(
                f"| {name} | {num(t['wall_s'])} | {num(t.get('step_s'), '.1f')} | {num(evals)} | "
                f"{num(t.get('setup_s'))} |"
            )
        for name, t in runs.items():
            L.append(
                f"| GRPO {name} | {num(t['wall_s'])} | {num(t['step_s'], '.1f')} | {num(t['eval_s'])} | "
                f"{num(t['setup_s'])} |"
            )
        L.append("")
    from catalog.io.outputs import atomic_write

    text = (A / "results.md").read_text()
    with atomic_write(A / "results.md") as tmp:
        tmp.write_text("\n".join(L) + "\n" + text)
    with atomic_write(A / "summary.json") as tmp:
        tmp.write_text(json.dumps(S, indent=1, default=float) + "\n")
    return S


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    stages = ["all", "data", "zeroshot", "sft", "train", "analyze", "worker"]
    p.add_argument("stage", nargs="?", default="all", choices=stages)
    p.add_argument("--config", type=Path, default=HERE / "config.yaml")
    p.add_argument("--out", type=Path, help=f"default {DEFAULT_OUT} ({SMOKE_OUT} with --smoke)")
    p.add_argument("--model", type=Path, help="the SmolLM2-135M-Instruct folder (env REMARK_SMOLLM2_DIR)")
    p.add_argument("--smoke", action="store_true", help="the config's smoke: section over it (minutes)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. grpo.use_vllm=false")
    p.add_argument("--fresh", action="store_true", help="delete --out first")
    p.add_argument("--job", choices=["zeroshot", "sft", "grpo"], help=argparse.SUPPRESS)
    p.add_argument("--method", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    out = (a.out or (SMOKE_OUT if a.smoke else DEFAULT_OUT)).resolve()
    if a.stage == "worker":  # reads the resolved config the launcher wrote
        cfg = json.loads((out / "config.json").read_text())
        if a.job == "zeroshot":
            zero_shot_worker(cfg, out)
        elif a.job == "sft":
            sft_worker(cfg, out)
        else:
            grpo_worker(cfg, out, a.method, a.seed)
        return 0
    raw = cpu_run.load_config(a.config)
    smoke = raw.pop("smoke", {}) or {}
    cfg = merge(raw, smoke) if a.smoke else raw
    for item in a.set:
        apply_set(cfg, item)
    check_config(cfg)
    model = model_dir(cfg, a.model)
    if not has_model(model) and a.stage not in ("data", "analyze"):
        print(
            f"SKIPPED: SmolLM2-135M-Instruct not found at {model} (no config.json / *.safetensors); {FETCH_HINT}."
        )
        return 0
    if cfg["grpo"]["use_vllm"] and not vllm_installed() and a.stage in ("all", "train"):
        print(
            f"SKIPPED: grpo.use_vllm is true but this Python ({sys.executable}) has no vLLM: run it with "
            '.venv-vllm/bin/python (docs/setup.md, "vLLM on a CPU machine"), or pass --set grpo.use_vllm=false.'
        )
        return 0
    cfg["model"]["path"] = str(model)
    if a.fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    # the workers read this snapshot: editing the config mid-run changes nothing
    write_json(out / "config.json", cfg)
    t0 = time.monotonic()
    monitor = cpu_run.LoadMonitor(out / "load.jsonl")
    monitor.start()
    timings: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "load_at_start": os.getloadavg(),
        "smoke": a.smoke,
        "python": sys.executable,
    }
    try:
        if a.stage in ("all", "data"):
            ts = time.monotonic()
            build_data(cfg, out)
            timings["data_s"] = time.monotonic() - ts
        if a.stage in ("zeroshot", "sft", "train"):
            need(out / "data" / "done.json", "the data stage")
        if a.stage == "train":
            need(out / "sft_model" / "done.json", "the sft stage")
        for stage, job, path, settings in (
            ("zeroshot", "zeroshot", out / "zero_shot", zero_shot_settings(cfg)),
            ("sft", "sft", out / "sft_model", sft_settings(cfg)),
        ):
            if a.stage in ("all", stage):
                ts = time.monotonic()
                if done(path / "done.json", settings):
                    log(f"{stage}: reusing {path}")
                else:
                    log(f"{stage}: running ({cfg['threads']} threads)")
                    run_job(cfg, out, job)
                    log(f"{stage}: done in {time.monotonic() - ts:.0f} s")
                timings[f"{stage}_s"] = time.monotonic() - ts
        if a.stage in ("all", "train"):
            ts = time.monotonic()
            train_all(cfg, out)
            timings["train_s"] = time.monotonic() - ts
        if a.stage in ("all", "analyze"):
            ts = time.monotonic()
            analysis(cfg, out)
            timings["analysis_s"] = time.monotonic() - ts
    finally:
        monitor.stop.set()
        cpu_run.append_timings(out, timings, a.stage, t0)
    log(f"{a.stage}: done in {timings['total_wall_s'] / 60:.1f} min; outputs in {out}")
    if a.stage in ("all", "analyze"):
        log(f"report: {out / 'analysis' / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
