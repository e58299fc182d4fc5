"""ReMaRk vs Rank-GRPO on real ProtoQA, CPU scale: one command, re-runnable (README.md beside this file).

    python experiments/protoqa_cpu/run.py [--config config.yaml] [--out runs/protoqa_cpu]

Stages (each skipped when its outputs exist with the same settings; ``--fresh`` starts over):

1. data: scraped dev questions with >= 5 clusters (a seeded random 128) and the 52 crowdsourced dev
   questions, item = a cluster's first answer lower-cased (``read_protoqa(items="clusters")``, one
   catalog via ``data_prep.readers.combine``), pooled into one row per question, each question's
   respondents split 50/50 (``data_prep.holdout``) into a train side (``<out>/data/train``) and a
   held-out side, itself split 50/50 again into a validation half (``<out>/data/valid``) and a test half
   (``<out>/data/test``) when ``data.test_fraction`` is set.
2. model: byte-level BPE tokenizer (vocab 4096) and a ~1M-parameter Qwen2 model, built locally.
3. sft: the noisy warm-up (``remark.run.sft.run_sft``, targets ``noisy``) on the train side, validated on
   the validation half every ``sft.eval_every`` steps (``sft_model/eval_log.jsonl``, ``sampled/``).
4. train: for each seed, ReMaRk (union, uniform) and Rank-GRPO (responder, per_responder) side by side,
   one torch thread each, from the same warm-up, equal steps and prompts per step
   (``remark.run.training.run_training``). Validation at step 0 and every ``eval.every`` steps on all questions
   by ``remark.run.callbacks.ValidationCallback``: greedy and ``num_samples`` sampled lists, on the
   validation half (run root, and ``sampled/``) and on the test half (``test/``, ``test/sampled/``).
5. analysis (``analyze.py``): paired CIs at the final and best steps (best chosen on the validation
   half, reported on both), steps-to-reach, curves, plots.

Skips with a clear message (exit 0) when the ProtoQA files are absent.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_PROTOQA = REPO.parent / "shared" / "data" / "protoqa"


# -- small helpers ------------------------------------------------------------------------------------
def load_config(path: Path) -> dict[str, Any]:
    from catalog.io.yaml_files import load_yaml

    return load_yaml(path.read_text(), path=path, what="config file")


def stamp_of(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def done(path: Path, settings: Any) -> bool:
    return path.is_file() and json.loads(path.read_text()).get("stamp") == stamp_of(settings)


def write_json(path: Path, obj: Any) -> None:
    from catalog.io.outputs import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2) + "\n")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def one_thread() -> None:
    """One torch thread per process (set before torch is imported where possible)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# -- stage 1: data ------------------------------------------------------------------------------------
def build_data(cfg: dict[str, Any], protoqa: Path, out: Path) -> dict[str, Any]:
    import numpy as np
    import polars as pl

    from catalog.match import GroundingSettings, Matcher
    from data_prep.dataset import write_dataset
    from data_prep.holdout import holdout_responders
    from data_prep.pool import SplitSpec, pool_threads
    from data_prep.readers import combine, read_protoqa
    from data_prep.stats import dataset_stats

    d = cfg["data"]
    settings = {"data": d, "protoqa": str(protoqa)}
    stamp_path = out / "data" / "done.json"
    if done(stamp_path, settings):
        log("data: reusing " + str(out / "data"))
        return json.loads(stamp_path.read_text())
    t0 = time.monotonic()
    parts = [read_protoqa(protoqa / d["scraped"], items="clusters")]
    if d.get("use_crowdsourced", True):
        parts.append(read_protoqa(protoqa / d["crowdsourced"], items="clusters"))
    threads = combine(parts)  # one catalog, items merged by item_id (aliases united, popularity summed)
    source_of = {
        rid: name
        for name, part in zip(("scraped", "crowdsourced"), parts, strict=False)
        for rid in part.frame["request_id"].unique().to_list()
    }
    matcher = Matcher(threads.catalog, GroundingSettings(match_mode=d["match_mode"]))
    pooled = pool_threads(threads, matcher, split=SplitSpec((("train", 1.0),), seed=0))
    scraped = pooled.filter(
        pl.col("request_id").replace_strict(source_of, default=None) == "scraped",
        pl.col("union").list.len() >= d["min_clusters"],
    )
    eligible = sorted(scraped["request_id"].to_list())
    rng = np.random.default_rng(d["select_seed"])
    chosen = set(rng.choice(eligible, size=min(d["n_scraped"], len(eligible)), replace=False).tolist())
    keep = chosen | {r for r, s in source_of.items() if s == "crowdsourced"}
    selected = pooled.filter(pl.col("request_id").is_in(sorted(keep)))
    split = holdout_responders(selected, fraction=d["holdout_fraction"], seed=d["holdout_seed"])
    sides = {"train": split.train, "valid": split.heldout}
    dropped = list(split.dropped)
    if d.get("test_fraction"):
        # the held-out side split again: validation half (model selection) and test half (reported)
        second = holdout_responders(split.heldout, fraction=d["test_fraction"], seed=d["test_seed"])
        sides["valid"], sides["test"] = second.train, second.heldout
        dropped += second.dropped
    ids = set(sides["valid"]["request_id"].to_list())  # questions on every side
    sides = {k: v.filter(pl.col("request_id").is_in(sorted(ids))) for k, v in sides.items()}
    meta = {
        **threads.meta,
        "experiment": "protoqa_cpu",
        "inputs": [str(protoqa / d["scraped"])]
        + ([str(protoqa / d["crowdsourced"])] if d.get("use_crowdsourced", True) else []),
        "holdout": split.settings,
    }
    for side, frame in sides.items():
        frame = frame.with_columns(
            pl.lit(side).alias("split")
        )  # ValidationCallback reads split "valid"/"test"
        write_dataset(
            out / "data" / side, frame, threads.catalog, {**meta, "side": side}, grounding=matcher.settings
        )
    sources = {r: source_of[r] for r in sorted(ids)}
    write_json(out / "data" / "sources.json", sources)
    n_src = {s: sum(v == s for v in sources.values()) for s in ("scraped", "crowdsourced")}
    info = {
        "stamp": stamp_of(settings),
        "n_questions": len(ids),
        "by_source": n_src,
        "eligible_scraped": len(eligible),
        "dropped_by_holdout": dropped,
        "catalog_items": len(threads.catalog),
        "zero_popularity_items": int((threads.catalog.df["popularity"].fill_null(0) <= 0).sum()),
        **{side: dataset_stats(frame.drop("responder_ids")) for side, frame in sides.items()},
        "wall_s": time.monotonic() - t0,
    }
    write_json(stamp_path, info)
    log(f"data: {len(ids)} questions {n_src}, catalog {len(threads.catalog)} items, sides {sorted(sides)}")
    return info


# -- validation (the library's) -------------------------------------------------------------------
def sides(out: Path) -> list[str]:
    """The held-out sides written by the data stage: ``valid``, and ``test`` when the config asks for one."""
    return [side for side in ("valid", "test") if (out / "data" / side).is_dir()]


def validation(cfg: dict[str, Any], out: Path, side: str, *, every: int, per_step: int, metric: str) -> Any:
    """``remark.run.callbacks.ValidationCallback`` on one held-out side, greedy + sampled lists, timed.

    The validation side logs at the run root (as ``validation_data_dir`` would), the test side under
    ``<run>/test/``. Same sampling seed for every side, step, seed and method: the sides score the same
    lists, and two runs' sampled lists differ only by their weights.
    """
    from hooks import Side  # beside this file

    from data_prep.dataset import load_dataset
    from remark.run.callbacks import ValidationCallback

    fields = validation_fields(cfg, side, every=every, per_step=per_step, metric=metric)
    return Side(
        ValidationCallback(load_dataset(out / "data" / side), **fields), None if side == "valid" else side
    )


def validation_fields(
    cfg: dict[str, Any], side: str, *, every: int, per_step: int, metric: str
) -> dict[str, Any]:
    """The ``ValidationCallback`` arguments of one held-out side (its dataset aside)."""
    from catalog.match import GroundingSettings

    e = cfg["eval"]
    return {
        "split": side,
        "k": cfg["grpo"]["num_ranks"],
        "every": every,
        "metric": metric,
        "max_new_tokens": cfg["grpo"]["max_completion_length"],
        "grounding": GroundingSettings(match_mode=cfg["data"]["match_mode"]),
        "batch_size": e["batch_size"],
        "completions_per_step": per_step,
        "num_samples": e["num_samples"],
        "temperature": e["temperature"],
        "seed": e["seed"],
    }


# -- stage 2-3: tiny model and noisy SFT warm-up ------------------------------------------------------
def build_sft(cfg: dict[str, Any], out: Path) -> Path:
    settings = {"model": cfg["model"], "sft": cfg["sft"], "data": cfg["data"], "eval": cfg["eval"]}
    sft_dir = out / "sft_model"
    if done(sft_dir / "done.json", settings):
        log("sft: reusing " + str(sft_dir))
        return sft_dir
    one_thread()
    from hooks import NO_CHECKPOINT  # beside this file

    from data_prep.dataset import load_dataset
    from remark.config.tiny import TinySpec
    from remark.run.sampling import prompt_messages
    from remark.run.sft import SFTSettings, run_sft
    from remark.run.tiny_model import build_tiny_model

    ds = load_dataset(out / "data" / "train")
    t0, c0 = time.monotonic(), cpu_seconds()
    m, s = cfg["model"], cfg["sft"]
    items = ds.catalog.df["title"].to_list()
    corpus = ["\n".join(items[i : i + 10]) for i in range(0, len(items), 10)]
    # the user messages exactly as the policy sees them (instruction + question), once per question, so
    # that BPE learns the repeated instruction's words as whole tokens (shorter prompts, faster steps)
    corpus += [prompt_messages(p, ds.meta, s["k"])[-1]["content"] for p in ds.requests["prompt"].to_list()]
    spec = TinySpec(**{k: v for k, v in m.items() if k != "seed"})
    base = build_tiny_model(out / "base_model", corpus, spec=spec, seed=m["seed"])
    copies = -(-s["steps"] * s["batch_size"] // ds.requests.height)
    settings_sft = SFTSettings(
        targets="noisy", k=s["k"], hit_prob=s["hit_prob"], copies=copies, seed=s["seed"]
    )
    if sft_dir.exists():
        shutil.rmtree(sft_dir)
    # the warm-up's recall on the validation half at 0, eval_every, ..., steps (sft_model/eval_log.jsonl,
    # sft_model/sampled/); its last value is the GRPO runs' step 0 (same weights, seed and code path)
    check = validation(
        cfg, out, "valid", every=s["eval_every"], per_step=s["batch_size"], metric=NO_CHECKPOINT
    )
    run_sft(
        ds,
        base,
        sft_dir,
        settings_sft,
        {
            "use_cpu": True,
            "bf16": False,
            "learning_rate": s["learning_rate"],
            "lr_scheduler_type": s["lr_scheduler_type"],
            "max_steps": s["steps"],
            "per_device_train_batch_size": s["batch_size"],
            "logging_steps": 100,
            "disable_tqdm": False,
            "seed": s["seed"],
            "dataloader_num_workers": 0,
        },
        callbacks=[check],
    )
    n_params = sum(
        p.numel()
        for p in __import__("transformers").AutoModelForCausalLM.from_pretrained(sft_dir).parameters()
    )
    write_json(
        sft_dir / "done.json",
        {
            "stamp": stamp_of(settings),
            "wall_s": time.monotonic() - t0,
            "cpu_s": cpu_seconds() - c0,
            "peak_rss_mb": peak_rss_mb(),
            "examples": copies * ds.requests.height,
            "n_params": n_params,
            "eval_s": check.seconds,
        },
    )
    log(f"sft: done in {time.monotonic() - t0:.0f} s ({n_params / 1e6:.2f}M parameters)")
    return sft_dir


# -- stage 4: one GRPO run (a worker process) ---------------------------------------------------------
def run_settings(cfg: dict[str, Any], method: str, seed: int) -> dict[str, Any]:
    return {
        "method": cfg["methods"][method],
        "seed": seed,
        "grpo": cfg["grpo"],
        "eval": cfg["eval"],
        "sft": cfg["sft"],
        "model": cfg["model"],
        "data": cfg["data"],
    }


def grpo_fields(cfg: dict[str, Any], out: Path, method: str, seed: int) -> dict[str, Any]:
    """The ``RemarkGRPOConfig`` fields of one GRPO run from the warm-up in ``out``: equal for both methods
    but for ``reward_scheme`` and ``sampling``; validation by callbacks (``validation_steps`` 0)."""
    g, m = cfg["grpo"], cfg["methods"][method]
    return {
        "output_dir": str(out / "runs" / f"{method}_s{seed}"),
        "data_dir": str(out / "data" / "train"),
        "model_name_or_path": str(out / "sft_model"),
        "seed": seed,
        "reward_scheme": m["reward_scheme"],
        "sampling": m["sampling"],
        "advantage_scaling": "group",
        "scale_rewards": "group",
        "num_ranks": g["num_ranks"],
        "match_mode": cfg["data"]["match_mode"],
        "loss_type": g["loss_type"],
        "num_generations": g["num_generations"],
        "per_device_train_batch_size": g["prompts_per_step"] * g["num_generations"],
        "gradient_accumulation_steps": 1,
        "learning_rate": g["learning_rate"],
        "lr_scheduler_type": g["lr_scheduler_type"],
        "beta": g["beta"],
        "temperature": g["temperature"],
        "max_completion_length": g["max_completion_length"],
        "max_steps": g["steps"],
        "use_cpu": True,
        "bf16": False,
        "report_to": "none",
        "disable_tqdm": True,
        "validation_steps": 0,  # the validation callbacks (one per held-out side, same sampling seed)
        "dataloader_num_workers": 0,
    }


def worker(cfg: dict[str, Any], out: Path, method: str, seed: int) -> None:
    """One GRPO run through ``remark.run.training.run_training``, validated by the library's callback on the
    validation half (best checkpoint by the primary metric in ``best/``) and scored on the test half."""
    one_thread()
    from hooks import NO_CHECKPOINT, LogHistory, Progress  # beside this file

    from remark.config import RemarkGRPOConfig
    from remark.run.training import run_training

    g, e = cfg["grpo"], cfg["eval"]
    if g["steps"] % e["every"]:
        raise SystemExit(f"grpo.steps ({g['steps']}) must be a multiple of eval.every ({e['every']})")
    run_dir = out / "runs" / f"{method}_s{seed}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    t0, c0 = time.monotonic(), cpu_seconds()
    args = RemarkGRPOConfig(**grpo_fields(cfg, out, method, seed), save_strategy="no", logging_steps=5)
    per_step = args.per_device_train_batch_size
    primary_mode, primary_key = cfg["analysis"]["primary"]
    best_by = f"sampled/{primary_key.removeprefix('eval/')}" if primary_mode == "sampled" else primary_key
    checks = [
        validation(
            cfg,
            out,
            side,
            every=e["every"],
            per_step=per_step,
            metric=best_by if side == "valid" else NO_CHECKPOINT,
        )
        for side in sides(out)
    ]
    summary = run_training(args, callbacks=[*checks, Progress(run_dir / "progress.json"), LogHistory()])
    wall = time.monotonic() - t0
    eval_s = sum(c.seconds for c in checks)
    write_json(
        run_dir / "done.json",
        {
            "stamp": stamp_of(run_settings(cfg, method, seed)),
            "method": method,
            "seed": seed,
            "steps": summary["global_step"],
            "best": summary["best"],
            "wall_s": wall,
            "train_runtime_s": summary["train_runtime_s"],
            "eval_s": eval_s,
            "eval_s_by_side": {side: c.seconds for side, c in zip(sides(out), checks, strict=True)},
            "train_s": (summary["train_runtime_s"] or wall) - eval_s,
            "cpu_s": cpu_seconds() - c0,
            "peak_rss_mb": peak_rss_mb(),
            "torch_threads": __import__("torch").get_num_threads(),
        },
    )


# -- orchestration -----------------------------------------------------------------------------------
def append_timings(out: Path, timings: dict[str, Any], stage: str, t0: float) -> None:
    """One line per invocation in ``<out>/timings.jsonl`` (never overwritten): stage wall times, the load
    at the end, the stage asked for and when it finished."""
    timings["total_wall_s"] = time.monotonic() - t0
    timings["load_at_end"] = os.getloadavg()
    timings["stage"] = stage
    timings["finished_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
    with (out / "timings.jsonl").open("a") as fh:
        fh.write(json.dumps(timings) + "\n")


class LoadMonitor(threading.Thread):
    """Samples the 1-minute load average every ``every`` seconds into a JSON-lines file."""

    def __init__(self, path: Path, every: float = 15.0) -> None:
        super().__init__(daemon=True)
        self.path, self.every, self.stop = path, every, threading.Event()

    def run(self) -> None:
        with self.path.open("a") as fh:
            while not self.stop.is_set():
                fh.write(json.dumps({"t": time.time(), "load1": os.getloadavg()[0]}) + "\n")
                fh.flush()
                self.stop.wait(self.every)


def train_all(cfg: dict[str, Any], out: Path, config_path: Path) -> list[dict[str, Any]]:
    from tqdm import tqdm

    jobs = [(m, s) for s in cfg["seeds"] for m in cfg["methods"]]
    todo = [
        (m, s) for m, s in jobs if not done(out / "runs" / f"{m}_s{s}" / "done.json", run_settings(cfg, m, s))
    ]
    for m, s in sorted(set(jobs) - set(todo)):
        log(f"train: reusing {m}_s{s}")
    steps = cfg["grpo"]["steps"]
    bar = tqdm(total=len(todo) * steps, desc="GRPO steps (all runs)", unit="step", dynamic_ncols=True)
    running: dict[tuple[str, int], subprocess.Popen] = {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    failed = []
    counted: dict[tuple[str, int], int] = {}
    queue = list(todo)
    while queue or running:
        while queue and len(running) < cfg.get("parallel", 2):
            m, s = queue.pop(0)
            run_dir = out / "runs" / f"{m}_s{s}"
            run_dir.parent.mkdir(parents=True, exist_ok=True)
            logf = (out / "runs" / f"{m}_s{s}.log").open("w")
            cmd = [sys.executable, str(Path(__file__).resolve()), "worker", "--method", m, "--seed", str(s)]
            cmd += ["--config", str(config_path), "--out", str(out)]
            running[(m, s)] = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env)
            counted[(m, s)] = 0
            bar.write(f"[{time.strftime('%H:%M:%S')}] started {m} seed {s} (pid {running[(m, s)].pid})")
        time.sleep(5)
        for key, proc in list(running.items()):
            prog = out / "runs" / f"{key[0]}_s{key[1]}" / "progress.json"
            if prog.is_file():
                try:
                    step = json.loads(prog.read_text())["step"]
                except (json.JSONDecodeError, KeyError):
                    step = counted[key]
                bar.update(step - counted[key])
                counted[key] = step
            if proc.poll() is not None:
                del running[key]
                bar.update(steps - counted[key])
                if proc.returncode != 0:
                    failed.append(key)
                    bar.write(
                        f"FAILED {key[0]} seed {key[1]}: see {out / 'runs' / f'{key[0]}_s{key[1]}.log'}"
                    )
                else:
                    bar.write(f"[{time.strftime('%H:%M:%S')}] finished {key[0]} seed {key[1]}")
    bar.close()
    if failed:
        raise SystemExit(f"{len(failed)} run(s) failed: {failed}")
    return [json.loads((out / "runs" / f"{m}_s{s}" / "done.json").read_text()) for m, s in jobs]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "stage", nargs="?", default="all", choices=["all", "data", "sft", "train", "analyze", "worker"]
    )
    p.add_argument("--config", type=Path, default=HERE / "config.yaml")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "protoqa_cpu")
    p.add_argument(
        "--protoqa-dir",
        type=Path,
        default=Path(os.environ.get("REMARK_PROTOQA_DIR", DEFAULT_PROTOQA)),
        help="ProtoQA data directory (iesl/protoqa-data's data/; env REMARK_PROTOQA_DIR)",
    )
    p.add_argument("--fresh", action="store_true", help="delete --out first")
    p.add_argument("--method")
    p.add_argument("--seed", type=int)
    a = p.parse_args(argv)
    cfg = load_config(a.config)
    out = a.out.resolve()
    sys.path.insert(0, str(HERE))
    if a.stage == "worker":
        worker(cfg, out, a.method, a.seed)
        return 0
    needed = [a.protoqa_dir / cfg["data"]["scraped"]]
    if cfg["data"].get("use_crowdsourced", True):
        needed.append(a.protoqa_dir / cfg["data"]["crowdsourced"])
    missing = [str(x) for x in needed if not x.is_file()]
    if missing and a.stage != "analyze":
        print(
            "SKIPPED: ProtoQA files not found: " + ", ".join(missing) + ". Get iesl/protoqa-data (CC-BY-4.0) "
            "and pass --protoqa-dir to its data/ directory (or set REMARK_PROTOQA_DIR)."
        )
        return 0
    if a.fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    # the workers read a snapshot, so editing the config during a run changes nothing mid-way
    snapshot = out / "config.yaml"
    if a.config.resolve() != snapshot.resolve():
        shutil.copyfile(a.config, snapshot)
    a.config = snapshot
    t0 = time.monotonic()
    monitor = LoadMonitor(out / "load.jsonl")
    monitor.start()
    timings: dict[str, Any] = {"cpu_count": os.cpu_count(), "load_at_start": os.getloadavg()}
    try:
        if a.stage in ("all", "data"):
            timings["data"] = build_data(cfg, a.protoqa_dir, out)["wall_s"]
        if a.stage in ("all", "sft"):
            ts = time.monotonic()
            # SFT in a child process so that it gets one torch thread like the runs
            env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
            code = (
                f"import sys; sys.path.insert(0, {str(HERE)!r}); import run, pathlib; "
                f"run.build_sft(run.load_config(pathlib.Path({str(a.config)!r})), pathlib.Path({str(out)!r}))"
            )
            subprocess.run([sys.executable, "-c", code], check=True, env=env)
            timings["sft_stage_wall_s"] = time.monotonic() - ts
        if a.stage in ("all", "train"):
            ts = time.monotonic()
            train_all(cfg, out, snapshot)
            timings["train_stage_wall_s"] = time.monotonic() - ts
        if a.stage in ("all", "analyze"):
            import analyze

            ts = time.monotonic()
            analyze.analyze(cfg, out)
            timings["analysis_wall_s"] = time.monotonic() - ts
    finally:
        monitor.stop.set()
        append_timings(out, timings, a.stage, t0)
    log(f"{a.stage}: done in {timings['total_wall_s'] / 60:.1f} min; outputs in {out}")
    if a.stage in ("all", "analyze"):
        log(f"report: {out / 'analysis' / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
